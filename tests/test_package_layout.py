"""The package's shape: modules under 400 lines, no import cycles (function-level imports
counted), ``platform/`` domain-free (it imports nothing from ``components/``), every requirement
``make`` installs pinned to one version."""
import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "multigrain"
MAX_LINES = 400


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body (``from a import b`` counts as
    ``a.b`` when that is a module, else ``a``)."""
    paths = {module_name(p, package.parent): p for p in package.rglob("*.py")}

    def known(name: str) -> str:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in paths.items():
        deps = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(known(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = name.split(".") if is_package else name.split(".")[:-1]
                    parent = parent[:len(parent) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    deps.add(full if full in paths else known(base))
        deps.discard(name)
        deps.discard("")
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    pkg = tmp_path / "multigrain"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from multigrain.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    (pkg / "c.py").write_text("import multigrain.a\n")
    graph = import_graph(pkg)
    assert graph["multigrain.c"] == {"multigrain.a"}
    assert cycles(graph) == [["multigrain.a", "multigrain.sub.b"]]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_platform_imports_nothing_from_components():
    wrong = sorted(f"{a} -> {b}" for a, deps in import_graph().items() if a.startswith("multigrain.platform")
                   for b in deps if b.startswith("multigrain.components"))
    assert wrong == []


#: the modules of a run and its training: they never know which executor trains a data-parallel run
#: (``multigrain train`` hands ``Run.train`` Ray Train's as ``data_parallel``)
RAY_FREE = ("runs", "run_plan", "run_training", "final_evaluation", "run_archive", "training", "devices",
            "evaluation", "data_parallel")


def imported_names(path: Path, name: str) -> set[str]:
    """Every module name ``path`` (the module ``name``) imports anywhere: at the top, in functions,
    under ``if TYPE_CHECKING:`` (relative imports made absolute; ``from a import b`` gives ``a`` and
    ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = name.split(".")[:len(name.split(".")) - node.level]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def knows_ray(names: set[str]) -> list[str]:
    return sorted(n for n in names if n == "ray" or n.startswith("ray.") or n == "multigrain.platform.ray"
                  or n.startswith("multigrain.platform.ray."))


def test_the_import_finder_sees_imports_in_functions_and_type_checking_blocks(tmp_path):
    (tmp_path / "m.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from multigrain.platform.ray.train import RayTrainCluster\n"
                                   "def f():\n    from .ray import cluster\n    import ray.train\n")
    names = imported_names(tmp_path / "m.py", "multigrain.platform.m")
    assert knows_ray(names) == ["multigrain.platform.ray", "multigrain.platform.ray.cluster",
                                "multigrain.platform.ray.train", "multigrain.platform.ray.train.RayTrainCluster",
                                "ray.train"]


@pytest.mark.parametrize("module", RAY_FREE)
def test_the_run_and_its_training_import_nothing_of_ray(module):
    path = PACKAGE / "platform" / f"{module}.py"
    assert knows_ray(imported_names(path, f"multigrain.platform.{module}")) == []


def test_models_import_no_readers():
    """A model reads no data files: what it shares with a reader lives in a module both import."""
    wrong = {}
    for path in sorted((PACKAGE / "components" / "models").glob("*.py")):
        name = f"multigrain.components.models.{path.stem}"
        found = sorted(n for n in imported_names(path, name) if n.startswith("multigrain.components.readers"))
        if found:
            wrong[path.name] = found
    assert wrong == {}


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_make_installs_only_pinned_packages():
    """`make` installs the project with its ``test`` extra: every requirement there names one
    version, so a fresh machine gets the versions the suite passed with."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["test"]
    pinned = re.compile(r"[A-Za-z0-9_.\-]+(\[[a-z,_\-]+\])?==[0-9][0-9A-Za-z.+]*")
    unpinned = [r for r in requirements if not pinned.fullmatch(r)]
    assert not unpinned, f"requirements without one version: {unpinned}"
