"""Hostile input, round five: third-party plugins that misbehave, and run directories that would
supply plugin code.

An entry point that calls ``sys.exit(0)`` at import made every command exit 0 having done nothing;
one that printed at import put its text into ``predict``'s JSON lines; a plugin registered under a
built-in name with ``exist_ok`` replaced the built-in for every spec (one spec hash, two models); a
function registered as a component, a constructor's RuntimeError, and a NaN loss were tracebacks
(exit 1); a model fault was blamed on the validation reader; a run directory used as the working
directory supplied the ``--include-package`` module (its own ``__init__.py``, or a module whose
hash its own ``plugins.json`` vouched for); a 65 MB ``plugins.json`` was echoed into a 59 MB error.
"""
import hashlib
import importlib.metadata as metadata
import json
import re
import shutil
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest

from multigrain.platform.config import build
from multigrain.platform.errors import ConfigurationError, PluginWarning
from multigrain.platform.kinds import Encoder
from multigrain.platform.registry import load_builtin, load_plugins, reset_plugins
from tests.conftest import resume_tagger_spec, run_cli, trained_tagger

ENCODER_HEADER = textwrap.dedent("""
    import torch
    from multigrain.platform.kinds import Encoder


    class Plain(Encoder):
        def __init__(self, input_dim: int):
            super().__init__()
            self.input_dim = input_dim
            self.linear = torch.nn.Linear(input_dim, 8)

        def get_input_dim(self):
            return self.input_dim

        def get_output_dim(self):
            return 8
""")


def plugin_spec(directory: Path, encoder: str) -> Path:
    spec = resume_tagger_spec(directory / "data")
    spec["model"]["encoder"] = {"type": encoder}
    path = directory / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.fixture
def entry_points(monkeypatch):
    """Install fake ``multigrain.plugins`` entry points: a function of {name: module source}."""
    def install(sources: dict[str, str]) -> None:
        points = []
        for name, source in sources.items():
            SOURCES[f"mg_test_ep_{name}"] = source
            points.append(metadata.EntryPoint(name, f"mg_test_ep_{name}", "multigrain.plugins"))
        monkeypatch.setattr(metadata, "entry_points",
                            lambda group=None: points if group == "multigrain.plugins" else [])
        monkeypatch.setattr(sys, "meta_path", [SourceFinder(), *sys.meta_path])
        reset_plugins()

    yield install
    reset_plugins()
    for module in SOURCES:
        sys.modules.pop(module, None)
    SOURCES.clear()


SOURCES: dict[str, str] = {}


class SourceFinder:
    """Imports the fake entry points' modules from ``SOURCES``."""

    def find_spec(self, name, path=None, target=None):
        from importlib.util import spec_from_loader

        return spec_from_loader(name, self) if name in SOURCES else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(SOURCES[module.__name__], module.__dict__)


def test_an_entry_point_that_exits_or_prints_is_a_warning_and_prints_to_stderr(entry_points, capsys):
    entry_points({"exits": "import sys\nsys.exit(0)\n", "prints": "print('HELLO FROM A PLUGIN')\n"})
    with pytest.warns(PluginWarning) as caught:
        loaded = load_plugins()
    assert loaded == ["mg_test_ep_prints"]
    assert [str(w.message) for w in caught] == [
        "multigrain plugin entry point 'exits' (mg_test_ep_exits) failed to load: SystemExit: 0"]
    out, err = capsys.readouterr()
    assert out == "" and err == "HELLO FROM A PLUGIN\n"


def test_a_plugin_warning_is_one_line(monkeypatch):
    from multigrain.platform.commands import _plain_warnings

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    _plain_warnings()
    assert warnings.formatwarning(PluginWarning("plugin x failed"), PluginWarning, "registry.py", 1) == \
        "warning: plugin x failed\n"


def test_a_plugin_cannot_replace_a_built_in_component_even_with_exist_ok():
    load_builtin()
    builtin = Encoder.by_name("bilstm")
    impostor = type("Impostor", (Encoder,), {"__module__": "someones_plugin"})
    with pytest.raises(ConfigurationError, match=r"encoder 'bilstm' is registered twice: multigrain\.components\."
                                                 r"encoders\.bilstm\.BiLstmEncoder .*a plugin cannot replace a "
                                                 r"built-in component"):
        Encoder.register("bilstm", exist_ok=True)(impostor)
    assert Encoder.by_name("bilstm") is builtin
    mine = type("Mine", (Encoder,), {"__module__": "someones_plugin"})
    Encoder.register("mg_test_own_name")(mine)
    assert Encoder.register("mg_test_own_name", exist_ok=True)(type("Again", (Encoder,), {})) is not None



def test_a_plugin_registered_before_the_built_ins_are_loaded_cannot_take_their_name():
    import subprocess

    code = textwrap.dedent("""
        from multigrain.platform.kinds import Encoder
        try:
            Encoder.register("bilstm", exist_ok=True)(type("Impostor", (Encoder,), {"__module__": "someones_plugin"}))
        except Exception as e:
            print(type(e).__name__)
        print(Encoder.by_name("bilstm").__module__)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.stdout.split() == ["ConfigurationError", "multigrain.components.encoders.bilstm"], done.stderr

def test_a_function_registered_as_a_component_is_refused():
    def encoder_function(input_dim: int):
        return None

    with pytest.raises(ConfigurationError, match=r"encoder 'mg_test_function': Encoder.register is given "
                                                 r".*encoder_function \(.*\), which is no class"):
        Encoder.register("mg_test_function")(encoder_function)


class ConstructorFails(Encoder):
    def __init__(self, input_dim: int, failure: str = "runtime"):
        super().__init__()
        raise {"runtime": RuntimeError("the plugin's constructor failed"), "key": KeyError("missing")}[failure]


class UnknownHint(Encoder):
    def __init__(self, input_dim: "NoSuchType"):  # noqa: F821 - the hint names nothing
        super().__init__()


Encoder.register("mg_test_constructor_fails")(ConstructorFails)
Encoder.register("mg_test_unknown_hint")(UnknownHint)


class Model:
    def __init__(self, encoder: Encoder):
        self.encoder = encoder


@pytest.mark.parametrize("failure, said", [("runtime", "RuntimeError: the plugin's constructor failed"),
                                           ("key", "KeyError: 'missing'")])
def test_a_constructor_failure_is_a_spec_error_at_its_path(failure, said):
    with pytest.raises(ConfigurationError) as caught:
        build(Model, {"encoder": {"type": "mg_test_constructor_fails", "input_dim": 4, "failure": failure}}, "model")
    assert f"model.encoder: ConstructorFails: {said}" in str(caught.value)


def test_a_hint_naming_no_type_is_a_spec_error_at_its_path():
    with pytest.raises(ConfigurationError, match=r"model\.encoder: cannot read the type hints of .*UnknownHint"):
        build(Model, {"encoder": {"type": "mg_test_unknown_hint", "input_dim": 4}}, "model")


def test_a_model_fault_is_the_models_not_the_validation_readers(tmp_path):
    module = tmp_path / "mg_test_shape_plugin.py"
    module.write_text(ENCODER_HEADER + textwrap.dedent("""
        @Encoder.register("mg_test_wrong_shape")
        class WrongShape(Plain):
            def forward(self, inputs, mask, batch=None):
                return self.linear(inputs)[..., :3]
    """), encoding="utf-8")
    spec = plugin_spec(tmp_path, "mg_test_wrong_shape")
    out = run_cli("train", spec, "-s", tmp_path / "run", "--no-tracking", "--include-package", "mg_test_shape_plugin",
                  cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: model: the model cannot run on the first training examples (RuntimeError: ")
    assert out.stderr.rstrip().endswith("the fault is in its components or their options; its components from "
                                        "plugins: encoder mg_test_wrong_shape (mg_test_shape_plugin)")
    assert not (tmp_path / "run").exists()


def test_a_nan_loss_is_one_error_line(tmp_path):
    module = tmp_path / "mg_test_nan_plugin.py"
    module.write_text(ENCODER_HEADER + textwrap.dedent("""
        print("HELLO FROM THE NAN PLUGIN")


        @Encoder.register("mg_test_nan")
        class Nan(Plain):
            def forward(self, inputs, mask, batch=None):
                return self.linear(inputs) * float("nan")
    """), encoding="utf-8")
    spec = plugin_spec(tmp_path, "mg_test_nan")
    out = run_cli("train", spec, "-s", tmp_path / "run", "--no-tracking", "--include-package", "mg_test_nan_plugin",
                  cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, ""), out.stderr
    hello, error = out.stderr.splitlines()  # the loss is read where the loop syncs: after step 1, or steps 1-3
    assert hello == "HELLO FROM THE NAN PLUGIN"
    assert re.fullmatch(r"error: epoch 1, (step 1|steps 1-[23]): the loss became nan; a lower trainer\.optimizer\.lr "
                        r"or trainer\.grad_clipping may help, unless a component computes it", error), error


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return trained_tagger(tmp_path_factory.mktemp("plugins"))


@pytest.mark.parametrize("layout", ["module", "package"])
def test_a_run_directory_as_the_working_directory_never_supplies_the_plugin(trained, tmp_path, layout):
    run = tmp_path / "their_run"
    shutil.copytree(trained["run"], run)
    marker = tmp_path / "PWNED"
    evil = f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
    if layout == "module":
        source = run / "their_plugin.py"
    else:
        (run / "their_plugin").mkdir()
        source = run / "their_plugin" / "__init__.py"
    source.write_text(evil, encoding="utf-8")
    sha = hashlib.sha256(source.read_bytes()).hexdigest()  # the run vouches for its own code
    (run / "plugins.json").write_text(json.dumps({"modules": [
        {"module": "their_plugin", "package": "their_plugin", "sha256": sha, "components": []}]}), encoding="utf-8")
    for argv in (["evaluate", ".", trained["data"]], ["predict", ".", trained["input"]]):
        out = run_cli(*argv, "--include-package", "their_plugin", cwd=run)
        assert (out.returncode, out.stdout) == (2, ""), out.stderr
        assert out.stderr == (f"error: --include-package their_plugin: it would be imported from {source}, inside "
                              f"the run directory . that this command opens; a run directory never supplies code: "
                              f"run the command from another folder, or keep the module outside the run\n")
        assert not marker.exists()


def test_a_huge_plugins_record_is_a_short_error(trained, tmp_path):
    run = tmp_path / "their_run"
    shutil.copytree(trained["run"], run)
    record = {"modules": [{"module": "m", "package": "m", "components": [f"encoder e{i}" for i in range(200_000)]}]}
    (run / "plugins.json").write_text(json.dumps(record), encoding="utf-8")
    out = run_cli("predict", run, trained["input"], cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith(f"error: {run / 'plugins.json'}: damaged (ValueError: ") and \
        "bytes, more than a plugin record's 1,048,576)" in out.stderr and len(out.stderr) < 400, out.stderr
    record["modules"][0]["components"] = record["modules"][0]["components"][:25]
    (run / "plugins.json").write_text(json.dumps(record), encoding="utf-8")
    out = run_cli("predict", run, trained["input"], cwd=tmp_path)
    assert out.returncode == 2 and "encoder e9 and 15 more)" in out.stderr and "e10" not in out.stderr, out.stderr
