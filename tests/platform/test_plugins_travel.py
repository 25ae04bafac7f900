"""Plugins are the user's to import: ``--include-package`` before or after the command; the run
directory records the plugin modules its spec needs (``plugins.json``, with each source file's
sha256) but never imports them: a fresh process opening the run without the flag stops with one
error naming the module, its components and the run directory (exit 2), and works with it; a
changed module is an error naming it; processes started for the user get the user's list."""
import hashlib
import json
import shutil
import textwrap

import pytest

from multigrain.platform import plugins
from multigrain.platform.commands import main
from multigrain.platform.errors import ConfigurationError
from multigrain.testing import bilstm_tagger, read_sentences, tiny_spec
from tests.conftest import DATA, run_cli

PLUGIN = "mg_tabplug_travel"
READER = "char_tab_bmes_travel"


def tab_reader_plugin(folder, module: str, reader: str) -> None:
    """``folder/module.py``: a plugin registering ``reader``, which reads ``char TAB BMES-tag`` lines."""
    (folder / f"{module}.py").write_text(textwrap.dedent(f"""
        from multigrain.components.readers.ner import CharTagReader
        from multigrain.platform.kinds import Reader


        @Reader.register("{reader}")
        class CharTabBmes(CharTagReader):
            '''``char TAB BMES-tag`` per line, a blank line between sentences.'''

            separator = "\\t"
            separator_name = "TAB"
    """), encoding="utf-8")


def ten_tab_sentences(path):
    """Ten Resume dev sentences, TAB-separated (only the plugin reader reads them); returns ``path``."""
    blocks = read_sentences(DATA / "resume_ner" / "dev.char.bmes")[:10]
    path.write_text("\n\n".join(b.replace(" ", "\t") for b in blocks) + "\n\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 1-epoch tagger over a TAB-separated file that only the plugin reader reads, trained
    in this process by the CLI with ``--include-package`` AFTER the command."""
    folder = tmp_path_factory.mktemp("plugin_travel")
    tab_reader_plugin(folder, PLUGIN, READER)
    data = ten_tab_sentences(folder / "ten.tsv")
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": READER}, data, data, data, task="ner")
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        code = main(["train", "spec.json", "-s", "run", "--no-tracking", "--include-package", PLUGIN])
    assert code == 0
    return {"folder": folder, "run": folder / "run", "data": data}


def test_the_run_records_the_plugin_module_and_its_hash(trained):
    saved = json.loads((trained["run"] / plugins.PLUGINS_FILE).read_text(encoding="utf-8"))
    source = trained["folder"] / f"{PLUGIN}.py"
    assert saved == {"modules": [{
        "module": PLUGIN, "package": PLUGIN, "search_dir": str(trained["folder"].resolve()),
        "file": str(source.resolve()), "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "components": [f"reader {READER}"]}]}
    assert not list(trained["run"].glob("*.tmp"))


def test_a_fresh_process_without_the_flag_is_one_error_naming_the_module(trained):
    """The run names its plugin; it is not imported for it (working directory: the repository)."""
    out = run_cli("evaluate", trained["run"], trained["data"])
    assert out.returncode == 2, out.stderr
    source = trained["folder"].resolve() / f"{PLUGIN}.py"
    assert out.stderr == (
        f"error: {trained['run']}: the run needs plugin module '{PLUGIN}' (providing reader {READER}; "
        f"plugins.json records it as {source}), not imported in this process; a run directory names its "
        f"plugins but never imports them: if you trust the code, pass --include-package {PLUGIN}\n")
    assert out.stdout == ""


def test_a_fresh_process_with_the_flag_evaluates_the_run(trained):
    out = run_cli("evaluate", trained["run"], trained["data"], "--include-package", PLUGIN, cwd=trained["folder"])
    assert out.returncode == 0, out.stderr
    assert "ten.tsv: 10 instances read with the test reader (char_tab_bmes_travel), 10 scored" in out.stderr
    assert 0.0 <= json.loads(out.stdout)["f1"] <= 1.0
    assert "warning" not in out.stderr and "error" not in out.stderr


def test_a_changed_module_is_an_error_naming_it(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained["run"], copy)
    entry = json.loads((copy / plugins.PLUGINS_FILE).read_text())["modules"][0]
    entry["sha256"] = "0" * 64  # the source the run was trained with differs from today's
    (copy / plugins.PLUGINS_FILE).write_text(json.dumps({"modules": [entry]}))
    from multigrain.platform.runs import Run

    now = hashlib.sha256((trained["folder"] / f"{PLUGIN}.py").read_bytes()).hexdigest()
    with pytest.raises(ConfigurationError, match=rf"{copy}: plugin module '{PLUGIN}' \(.*{PLUGIN}\.py\) is not the "
                                                 rf"source the run was trained with \(sha256 000000000000 in "
                                                 rf"plugins\.json, {now[:12]} now\)"):
        Run.open(copy)


def test_a_module_that_is_not_imported_is_one_error_naming_it_and_the_run(trained, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(trained["run"], copy)
    entry = json.loads((copy / plugins.PLUGINS_FILE).read_text())["modules"][0]
    entry.update(module="mg_gone_plugin", package="mg_gone_plugin", search_dir=str(tmp_path / "moved"))
    (copy / plugins.PLUGINS_FILE).write_text(json.dumps({"modules": [entry]}))
    assert main(["evaluate", str(copy), str(trained["data"])]) == 2
    err = capsys.readouterr().err
    assert f"error: {copy}: the run needs plugin module 'mg_gone_plugin' (providing reader {READER}" in err
    assert err.endswith("pass --include-package mg_gone_plugin\n") and "Traceback" not in err
    for damaged in ('{"modules": [{"module": 1}]}', '{"modules": [{"module": "os; rm", "package": "os"}]}',
                    '{"modules": [{"module": "m", "package": "m", "sha256": "x"}]}', '{"modules": {}}',
                    '{"modules": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        (copy / plugins.PLUGINS_FILE).write_text(damaged)
        with pytest.raises(ConfigurationError, match="plugins.json: damaged"):
            plugins.check_recorded(copy)


def test_the_user_list_travels_and_a_run_list_never_does(trained, tmp_path, monkeypatch):
    """``travelling``: what the driver's flag imported and where it found it (plus named packages
    not included here, to be found in the working directory); ``include_travelled`` imports it."""
    import subprocess
    import sys

    monkeypatch.setitem(plugins.INCLUDED, PLUGIN, str(trained["folder"].resolve()))
    monkeypatch.chdir(tmp_path)
    assert [PLUGIN, str(trained["folder"].resolve())] in plugins.travelling()
    assert plugins.travelling(["mg_only_named"])[-1] == ["mg_only_named", str(tmp_path)]
    entries = [[PLUGIN, str(trained["folder"].resolve())]]
    script = ("import json, sys; from multigrain.platform import plugins; from multigrain.platform.runs import Run; "
              "plugins.include_travelled(json.loads(sys.argv[1])); run = Run.open(sys.argv[2]); "
              "print(run.experiment.test_dataset_reader.registered_name)")
    out = subprocess.run([sys.executable, "-P", "-c", script, json.dumps(entries), str(trained["run"])],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == READER


def test_replicas_and_evaluator_actors_open_the_run_with_the_user_list(trained):
    """Serve's ``LoadedArchive`` and evaluate-all's ``ArchiveEvaluator`` (what the Ray replicas and
    actors run) in a fresh process: with the driver's list they load and score the run; without
    it they stop with the error naming the module."""
    import subprocess
    import sys

    entries = json.dumps([[PLUGIN, str(trained["folder"].resolve())]])
    script = ("import json, sys; from multigrain.platform.ray.serve import LoadedArchive; "
              "from multigrain.platform.ray.evaluate import ArchiveEvaluator; "
              "entries = json.loads(sys.argv[1]); "
              "loaded = LoadedArchive(sys.argv[2], None, entries); "
              "print(len(loaded.predict_one_by_one([{'text': '我在北京'}]))); "
              "row = ArchiveEvaluator(entries).evaluate(sys.argv[2], sys.argv[3]); print(row['examples'])")
    out = subprocess.run([sys.executable, "-P", "-c", script, entries, str(trained["run"]), str(trained["data"])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "10"]
    out = subprocess.run([sys.executable, "-P", "-c", script, "[]", str(trained["run"]), str(trained["data"])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert f"the run needs plugin module '{PLUGIN}'" in out.stderr and f"--include-package {PLUGIN}" in out.stderr


def test_the_flag_before_and_after_the_command_several_times(tmp_path, monkeypatch, capsys):
    for name in ("a", "b", "c"):
        (tmp_path / f"mg_flag_{name}.py").write_text(textwrap.dedent(f"""
            from multigrain.platform.kinds import Reader
            @Reader.register("flag_reader_{name}")
            class FlagReader(Reader):
                pass
        """), encoding="utf-8")
    (tmp_path / "mg_flag_broken.py").write_text("raise RuntimeError('boom at import')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["--include-package", "mg_flag_a", "components", "reader",
                 "--include-package", "mg_flag_b", "--include-package", "mg_flag_c"]) == 0
    listed = capsys.readouterr().out
    assert all(f"flag_reader_{name}" in listed for name in "abc")
    assert main(["components", "reader", "--include-package", "mg_flag_broken"]) == 2
    assert ("--include-package mg_flag_broken: importing it failed: RuntimeError: boom at import"
            in capsys.readouterr().err)


def test_unknown_type_errors_name_the_flag_and_the_entry_point_group(tmp_path):
    from multigrain.platform.errors import SpecError
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.kinds import Reader

    hint = "--include-package MODULE, or register it under the entry-point group 'multigrain.plugins'"
    with pytest.raises(ConfigurationError, match="unknown reader type 'no_such_reader'") as lookup:
        Reader.by_name("no_such_reader")
    assert hint in str(lookup.value)
    spec = tiny_spec(bilstm_tagger(), {"type": "no_such_reader"}, "x", task="ner")
    with pytest.raises(SpecError) as built:
        validate_spec(spec, check_data_paths=False)
    assert "dataset_reader.type: unknown reader type 'no_such_reader'" in str(built.value)
    assert hint in str(built.value)


def test_a_submitted_job_trains_with_the_same_flags():
    import shlex

    from multigrain.platform.ray.jobs import job_entrypoint

    spec = tiny_spec(bilstm_tagger(), {"type": READER}, "train.tsv", task="ner")
    command = shlex.split(job_entrypoint(spec, "tiny", include_packages=(PLUGIN, "mg_other")))
    assert command[-4:] == ["--include-package", PLUGIN, "--include-package", "mg_other"]
    assert command[command.index("train") - 1] == "multigrain"


def test_entry_point_plugins_are_recorded_and_other_code_is_not(tmp_path, monkeypatch):
    """A component from a ``multigrain.plugins`` entry point is recorded (imported from sys.path);
    one registered by code that is no plugin (this test module) is not: no process could import it."""
    import importlib.metadata as metadata
    import sys

    from multigrain.platform.kinds import Reader
    from multigrain.platform.registry import reset_plugins

    (tmp_path / "mg_entry_plug.py").write_text(textwrap.dedent("""
        from multigrain.platform.kinds import Reader
        @Reader.register("entry_point_reader")
        class EntryPointReader(Reader):
            pass
    """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [metadata.EntryPoint("mine", "mg_entry_plug", "multigrain.plugins")]
    monkeypatch.setattr(metadata, "entry_points", lambda group=None: points if group == "multigrain.plugins" else [])

    @Reader.register("not_a_plugin_reader")
    class NotAPlugin(Reader):
        pass

    reset_plugins()
    try:
        assert Reader.by_name("entry_point_reader").__module__ == "mg_entry_plug"
        spec = {"dataset_reader": {"type": "entry_point_reader"},
                "validation_dataset_reader": {"type": "not_a_plugin_reader"}}
        (entry,) = plugins.needed_modules(spec)
        source = tmp_path / "mg_entry_plug.py"
        assert entry == {"module": "mg_entry_plug", "package": "mg_entry_plug", "search_dir": None,
                         "file": str(source.resolve()), "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                         "components": ["reader entry_point_reader"]}
    finally:
        reset_plugins()
        sys.modules.pop("mg_entry_plug", None)
