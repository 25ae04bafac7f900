"""Registry: names, duplicates, defaults, --include-package and real entry-point plugins."""
import subprocess
import sys
import textwrap

import pytest

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.registry import Registrable, import_package, load_plugins, reset_plugins
from tests.conftest import run_cli


class Animal(Registrable, kind="test_animal"):
    default_implementation = "cat"


@Animal.register("cat")
class Cat(Animal):
    def __init__(self, lives: int = 9):
        self.lives = lives


def test_lookup_and_duplicate():
    assert Animal.by_name("cat") is Cat
    with pytest.raises(ConfigurationError, match="registered twice"):
        @Animal.register("cat")
        class OtherCat(Animal):
            pass


def test_unknown_name_suggests():
    with pytest.raises(ConfigurationError) as e:
        Animal.by_name("cta")
    assert "did you mean 'cat'" in str(e.value) and "valid choices: cat" in str(e.value)


def test_default_implementation_builds():
    from multigrain.platform.config import build

    class Zoo:
        def __init__(self, animal: Animal):
            self.animal = animal

    zoo = build(Zoo, {"animal": {"lives": 3}})
    assert isinstance(zoo.animal, Cat) and zoo.animal.lives == 3


def test_builtin_components_listed():
    from multigrain.platform.kinds import Encoder, Head, Model

    assert "bilstm" in Encoder.names() and "crf" in Head.names() and "tagger" in Model.names()


def test_include_package(tmp_path, monkeypatch):
    pkg = tmp_path / "localplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from multigrain.platform.kinds import Encoder
        @Encoder.register("local_identity")
        class LocalIdentity(Encoder):
            def __init__(self, input_dim: int):
                super().__init__()
                self.d = input_dim
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import_package("localplug")
    from multigrain.platform.kinds import Encoder

    assert Encoder.by_name("local_identity").__name__ == "LocalIdentity"
    with pytest.raises(ConfigurationError, match="cannot import"):
        import_package("no_such_package_xyz")


def test_entry_point_plugin_installed_in_temp_location(tmp_path):
    """A real package with a `multigrain.plugins` entry point, pip-installed into a temp target."""
    src = tmp_path / "src"
    (src / "mg_plugin_demo").mkdir(parents=True)
    (src / "mg_plugin_demo" / "__init__.py").write_text(textwrap.dedent("""
        from multigrain.platform.kinds import Encoder
        @Encoder.register("plugin_demo")
        class PluginDemo(Encoder):
            def __init__(self, input_dim: int, scale: float = 1.0):
                super().__init__()
                self.input_dim, self.scale = input_dim, scale
            def get_output_dim(self):
                return self.input_dim
    """))
    (src / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "mg-plugin-demo"
        version = "0.0.1"
        [project.entry-points."multigrain.plugins"]
        demo = "mg_plugin_demo"
        [tool.setuptools]
        packages = ["mg_plugin_demo"]
    """))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    code = textwrap.dedent("""
        from multigrain.platform.kinds import Encoder
        cls = Encoder.by_name("plugin_demo")
        print(cls.__module__, cls.__name__)
    """)
    env = {"PYTHONPATH": str(target)}
    import os
    full = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["mg_plugin_demo", "PluginDemo"]
    listing = run_cli("components", "encoder", env=env)
    assert listing.returncode == 0 and "plugin_demo" in listing.stdout


def test_components_command_lists_names_classes_and_files():
    out = run_cli("components", "encoder")
    assert out.returncode == 0, out.stderr
    assert "bilstm" in out.stdout and "BiLstmEncoder" in out.stdout and "bilstm.py" in out.stdout
    wrong = run_cli("components", "encoders")
    assert wrong.returncode == 2 and wrong.stderr.startswith(
        "error: unknown component kind 'encoders' (did you mean 'encoder'?); the kinds: encoder, head,"), wrong.stderr


def test_a_broken_plugin_does_not_hide_the_others(monkeypatch):
    """One entry point fails to import: the next still loads, a warning names the broken one, and
    a lookup that misses names it too."""
    import importlib.metadata as metadata
    import types

    good = types.ModuleType("mg_test_good_plugin")
    good.Animal = Animal
    exec("@Animal.register('dog')\nclass Dog(Animal):\n    pass\n", good.__dict__)
    monkeypatch.setitem(sys.modules, "mg_test_good_plugin", good)
    points = [metadata.EntryPoint("broken", "mg_test_no_such_module", "multigrain.plugins"),
              metadata.EntryPoint("good", "mg_test_good_plugin", "multigrain.plugins")]
    monkeypatch.setattr(metadata, "entry_points", lambda group=None: points if group == "multigrain.plugins" else [])
    reset_plugins()
    try:
        with pytest.warns(UserWarning, match="'broken' \\(mg_test_no_such_module\\) failed to load"):
            assert load_plugins() == ["mg_test_good_plugin"]
        assert Animal.by_name("dog").__name__ == "Dog"
        with pytest.raises(ConfigurationError, match="plugins that failed to load: broken \\(mg_test_no_such_module\\)"):
            Animal.by_name("parrot")
    finally:
        reset_plugins()


def test_include_package_imports_the_named_module_only(tmp_path):
    """A local plugin is found in the working directory, but that directory does not go on
    sys.path: a file there named like an installed module (``_jsonnet.py``) is never imported."""
    (tmp_path / "_jsonnet.py").write_text("raise SystemExit('the shadowing _jsonnet.py ran')\n")
    (tmp_path / "shadowplug.py").write_text(textwrap.dedent("""
        import sys
        from multigrain.platform.kinds import Encoder
        @Encoder.register("shadow_identity")
        class ShadowIdentity(Encoder):
            pass
        assert sys.path[0] != "", sys.path[:3]
    """))
    spec = tmp_path / "spec.jsonnet"
    spec.write_text("{}")
    out = run_cli("--include-package", "shadowplug", "validate", spec, cwd=tmp_path)
    assert "the shadowing _jsonnet.py ran" not in out.stderr + out.stdout
    assert out.returncode == 2 and "missing required argument" in out.stderr, out.stderr
