"""Hostile input, round two: a run directory is data.

Item 1: a copied run directory whose ``plugins.json`` names a module (with or without a
``search_dir``) never makes ``evaluate``, ``predict`` or ``train --resume`` import it: each exits 2
naming the module, its components and the run directory and asking for ``--include-package``, and
the module's import-time side effect (a marker file) never happens. A recorded sha256 that differs
from the source the user's ``--include-package`` would import is exit 2 naming the module, before
that module is imported.

Item 4: a non-empty directory that is no run directory (no ``.multigrain-run``, no ``config.json``)
given to ``train -s`` (with or without ``--resume``) is exit 2 naming it and some of its files, and
every file in it stays byte-identical; a real run directory that is started over keeps the user's
own files; an older run directory without the marker still resumes (and is marked then).
"""
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from multigrain.platform import run_marker
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.runs import Run
from tests.conftest import run_cli, trained_tagger

EVIL = "evil_plugin"


def evil_source(marker: Path) -> str:
    return textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("imported")
    """)


def snapshot(folder: Path) -> dict:
    """Every file and folder under ``folder``: relative path -> bytes (None for a folder)."""
    return {p.relative_to(folder).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return trained_tagger(tmp_path_factory.mktemp("hostile"))


def hostile_copy(trained, tmp_path: Path, with_search_dir: bool, **extra) -> tuple[Path, Path, Path]:
    """(the copied run, the working directory to run the CLI in, the marker the evil module writes)."""
    run = tmp_path / "copied_run"
    shutil.copytree(trained["run"], run)
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    marker = tmp_path / "PWNED"
    (elsewhere if with_search_dir else work).joinpath(f"{EVIL}.py").write_text(evil_source(marker), encoding="utf-8")
    entry = {"module": EVIL, "package": EVIL, **extra}
    if with_search_dir:
        entry["search_dir"] = str(elsewhere)
    (run / "plugins.json").write_text(json.dumps({"modules": [entry]}), encoding="utf-8")
    return run, work, marker


@pytest.mark.parametrize("with_search_dir", [True, False], ids=["search_dir", "working_dir"])
def test_a_run_directory_never_imports_the_plugin_it_names(trained, tmp_path, with_search_dir):
    run, work, marker = hostile_copy(trained, tmp_path, with_search_dir)
    before = snapshot(run)
    expected = (f"error: {run}: the run needs plugin module '{EVIL}', not imported in this process; a run "
                f"directory names its plugins but never imports them: if you trust the code, pass "
                f"--include-package {EVIL}\n")
    commands = {"evaluate": ["evaluate", run, trained["data"]],
                "predict": ["predict", run, trained["input"]],
                "train --resume": ["train", run / "config.json", "-s", run, "--resume", "--no-tracking"]}
    for name, argv in commands.items():
        out = run_cli(*argv, cwd=work)
        assert (out.returncode, out.stderr, out.stdout) == (2, expected, ""), name
        assert not marker.exists(), f"{name} imported {EVIL}"
    assert snapshot(run) == before  # nothing in the run directory changed either


def test_the_error_names_the_components_and_the_recorded_file(trained, tmp_path):
    run, work, marker = hostile_copy(trained, tmp_path, True, file="/any/dir/evil_plugin.py",
                                     components=["reader resume_ner", "model \x1b[2Jtagger"])
    out = run_cli("evaluate", run, trained["data"], cwd=work)
    assert out.returncode == 2
    assert out.stderr == (f"error: {run}: the run needs plugin module '{EVIL}' (providing reader resume_ner, "
                          f"'model \\x1b[2Jtagger'; plugins.json records it as /any/dir/evil_plugin.py), not "
                          f"imported in this process; a run directory names its plugins but never imports them: "
                          f"if you trust the code, pass --include-package {EVIL}\n")
    assert not marker.exists()


def test_a_changed_source_with_the_users_flag_is_refused_before_the_import(trained, tmp_path):
    run, work, marker = hostile_copy(trained, tmp_path, False, sha256="0" * 64)
    source = work / f"{EVIL}.py"
    import hashlib

    now = hashlib.sha256(source.read_bytes()).hexdigest()
    for argv in (["evaluate", run, trained["data"]], ["predict", run, trained["input"]],
                 ["train", run / "config.json", "-s", run, "--resume", "--no-tracking"]):
        out = run_cli(*argv, "--include-package", EVIL, cwd=work)
        assert out.returncode == 2, out.stderr
        assert out.stderr == (f"error: {run}: plugin module '{EVIL}' ({source}) is not the source the run was "
                              f"trained with (sha256 000000000000 in plugins.json, {now[:12]} now); put back the "
                              f"source it was trained with, or train the run again\n")
        assert not marker.exists()


def test_the_recorded_source_after_the_import_is_checked_when_the_run_opens(trained, tmp_path, monkeypatch):
    """A module imported already (an entry point, a dotted name) is checked when the run is opened."""
    import sys
    import types

    run, _, _ = hostile_copy(trained, tmp_path, False, sha256="0" * 64)
    module = types.ModuleType(EVIL)
    module.__file__ = str(tmp_path / "elsewhere" / "mine.py")
    Path(module.__file__).write_text("x = 1\n")
    monkeypatch.setitem(sys.modules, EVIL, module)
    with pytest.raises(ConfigurationError, match=rf"plugin module '{EVIL}' \(.*mine\.py\) is not the source"):
        Run.open(run)
    import hashlib

    (run / "plugins.json").write_text(json.dumps({"modules": [{
        "module": EVIL, "package": EVIL, "sha256": hashlib.sha256(b"x = 1\n").hexdigest()}]}))
    assert Run.open(run).spec == trained["spec"]  # the same source: the run opens


# ------------------------------------------------------------------------------ item 4: cleaning
def users_folder(root: Path) -> Path:
    folder = root / "mine"
    (folder / "resources").mkdir(parents=True)
    (folder / "vocabulary").mkdir()
    (folder / "resources" / "important.txt").write_text("do not delete\n", encoding="utf-8")
    (folder / "notes.tmp").write_bytes(b"draft \x00\x01")
    (folder / "vocabulary" / "words.txt").write_text("北京\n上海\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "fresh"])
def test_a_directory_that_is_no_run_directory_is_never_cleaned(trained, tmp_path, resume):
    folder = users_folder(tmp_path)
    before = snapshot(folder)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(trained["spec"]), encoding="utf-8")
    out = run_cli("train", spec, "-s", folder, *(["--resume"] if resume else []), "--no-tracking", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (f"error: {folder}: {'nothing to resume: ' if resume else ''}the directory is not empty "
                          f"and not a multigrain run directory (no .multigrain-run, no config.json): it holds "
                          f"notes.tmp, resources/important.txt, vocabulary/words.txt; nothing in it was changed; "
                          f"choose a new or empty directory for -s\n")
    assert snapshot(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "spec.json"]  # no store, no lock file left


def test_starting_a_run_directory_over_keeps_the_users_files(trained, tmp_path):
    """Killed before its first epoch (no last.pt): ``--resume`` starts over, removing only what the
    platform wrote; the user's notes (also inside our folders) stay, byte for byte."""
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    for name in ("last.pt", "best.pt", "metrics.json"):
        (run / name).unlink()
    (run / "last.pt.tmp").write_bytes(b"half")
    (run / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (run / "notes.tmp").write_text("my draft\n", encoding="utf-8")
    (run / "vocabulary" / "mine.txt").write_text("mine\n", encoding="utf-8")
    assert run_marker.marked(run)
    with pytest.raises(ConfigurationError, match="not empty"):
        Run(trained["spec"], run).train()
    result = Run(trained["spec"], run).train(resume=True)
    assert result["finished"] is True and result["epochs_completed"] == 1
    assert (run / "notes.txt").read_text(encoding="utf-8") == "my notes\n"
    assert (run / "notes.tmp").read_text(encoding="utf-8") == "my draft\n"
    assert (run / "vocabulary" / "mine.txt").read_text(encoding="utf-8") == "mine\n"
    assert not (run / "last.pt.tmp").exists()
    expected = json.loads((trained["run"] / "metrics.json").read_text(encoding="utf-8"))["history"]
    assert result["history"][0]["train_loss"] == pytest.approx(expected[0]["train_loss"], rel=1e-6)


def test_an_older_run_directory_without_the_marker_still_resumes(trained, tmp_path):
    spec = json.loads(json.dumps(trained["spec"]))
    spec["trainer"]["num_epochs"] = 2
    run = tmp_path / "old"
    stopped = Run(spec, run).train(stop_after_epoch=1)
    assert stopped["finished"] is False
    (run / run_marker.MARKER).unlink()  # as a run made before markers existed
    (run / "notes.txt").write_text("mine\n", encoding="utf-8")
    result = Run(spec, run).train(resume=True)
    assert result["finished"] is True and result["epochs_completed"] == 2
    assert run_marker.marked(run) and (run / "notes.txt").read_text(encoding="utf-8") == "mine\n"


def test_the_marker_is_written_first_and_clearing_a_foreign_directory_is_refused(trained, tmp_path):
    marker = json.loads((trained["run"] / run_marker.MARKER).read_text(encoding="utf-8"))
    assert marker == {"format": 1, "resources": []}
    folder = users_folder(tmp_path)
    before = snapshot(folder)
    with pytest.raises(ConfigurationError, match=r"mine: the directory is not empty and not a multigrain run"):
        run_marker.clear(folder)
    in_the_way = tmp_path / "run.copying"  # where a sibling copy would go: not ours, never removed
    in_the_way.mkdir()
    (in_the_way / "keep.txt").write_text("keep")
    with pytest.raises(ConfigurationError, match=r"run\.copying: in the way of copying the run"):
        run_marker.copy_run(trained["run"], tmp_path / "run")
    assert (in_the_way / "keep.txt").read_text() == "keep" and not (tmp_path / "run").exists()
    assert snapshot(folder) == before


def test_serve_and_evaluate_all_refuse_the_run_before_ray_starts(trained, tmp_path):
    """The driver's archive check names the module the run needs (the replicas and actors get only
    the user's list, so they could not open it either)."""
    from multigrain.platform.ray.archives import check_archives

    run, _, marker = hostile_copy(trained, tmp_path, True)
    with pytest.raises(ConfigurationError) as refused:
        check_archives([str(run)])
    assert str(refused.value) == (f"{run}: the run needs plugin module '{EVIL}', not imported in this process; a "
                                  f"run directory names its plugins but never imports them: if you trust the code, "
                                  f"pass --include-package {EVIL}")
    assert not marker.exists()


def test_starting_over_removes_the_resources_the_platform_fitted_and_no_others(tmp_path):
    run = tmp_path / "run"
    run_marker.write_marker(run)

    def fit(training, path):
        path.write_text(json.dumps(training))

    resources = run_marker.fresh_resources(run, ["a", "b"])
    assert resources.get("subwords.json", fit).read_text() == '["a", "b"]'
    assert run_marker.fitted(run) == ["subwords.json"]
    (run / "resources" / "mine.txt").write_text("mine")
    (run / "config.json").write_text("{}")
    run_marker.clear(run)
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == [
        ".multigrain-run", "resources", "resources/mine.txt"]
    assert run_marker.fitted(run) == []


def test_copying_a_sibling_run_with_a_pipe_in_it_is_one_clear_error_and_leaves_nothing(trained, tmp_path):
    import os

    source = tmp_path / "sibling"
    shutil.copytree(trained["run"], source)
    (source / "best.pt").unlink()
    os.mkfifo(source / "best.pt")  # a copy would block on it forever
    with pytest.raises(ConfigurationError, match=r"best\.pt: not a regular file \(a pipe, socket or device\) in the "
                                                 r"run .*sibling; nothing was copied"):
        run_marker.copy_run(source, tmp_path / "run")
    assert not (tmp_path / "run").exists() and not (tmp_path / "run.copying").exists()


def test_copying_a_sibling_run_with_a_link_in_it_is_refused_and_reads_nothing_outside(trained, tmp_path):
    """A link in the sibling would copy a file from outside the run into the new one (its bytes read
    as a checkpoint): refused, nothing copied."""
    source = tmp_path / "sibling"
    shutil.copytree(trained["run"], source)
    secret = tmp_path / "secret.txt"
    secret.write_text("not the run's\n")
    (source / "resources").mkdir(exist_ok=True)
    (source / "resources" / "notes.txt").symlink_to(secret)
    with pytest.raises(ConfigurationError, match=r"notes\.txt: not a regular file \(a symbolic link \(multigrain "
                                                 r"writes none\)\) in the run .*sibling; nothing was copied"):
        run_marker.copy_run(source, tmp_path / "run")
    assert not (tmp_path / "run").exists() and not (tmp_path / "run.copying").exists()


# ------------------------------------------------------------------ damaged metrics.json and config.json
DEEP = "[" * 100000 + "]" * 100000


def cli(capsys, *args) -> tuple[int, str]:
    """(exit code, stderr) of the CLI run in this process."""
    from multigrain.platform.commands import main as cli_main

    code = cli_main([str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("text, why", [("[1]", "holds a list"), ("[]", "holds a list"),
                                       ('{"finished": tru', "bad JSON: Expecting value (column 14)"),
                                       (DEEP, "nested deeper than 200 levels")],
                         ids=["list", "empty_list", "truncated", "deep"])
def test_a_damaged_metrics_json_is_one_error_naming_it(trained, tmp_path, capsys, text, why):
    from multigrain.platform import suite as suites

    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    (run / "metrics.json").write_text(text, encoding="utf-8")
    before = snapshot(run)
    expected = f"{run / 'metrics.json'}: damaged, not a run's results ({why})"
    for name, call in {"finished_result": lambda: Run(trained["spec"], run).finished_result(),
                       "train --resume": lambda: Run(trained["spec"], run).train(resume=True),
                       "train_or_reuse": lambda: Run(trained["spec"], run).train_or_reuse()}.items():
        with pytest.raises(ConfigurationError) as refused:
            call()
        assert str(refused.value) == expected, name
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(trained["spec"]), encoding="utf-8")
    assert cli(capsys, "train", spec, "-s", run, "--resume", "--no-tracking") == (2, f"error: {expected}\n")
    assert snapshot(run) == before  # nothing was written there

    suite = tmp_path / "suite.json"  # a suite whose planned run directory holds the damaged file
    suite.write_text(json.dumps({"entries": [{"spec": "spec.json", "seeds": [13]}]}), encoding="utf-8")
    [planned] = suites.plan(suite, suites.load_suite(suite), tmp_path / "runs", check_data_paths=False)
    shutil.copytree(run, planned.run_dir)
    damaged = Path(planned.run_dir) / "metrics.json"
    assert cli(capsys, "suite", suite, "--dry-run", "--runs-dir", tmp_path / "runs") == (
        2, f"error: {damaged}: damaged, not a run's results ({why})\n")


@pytest.mark.parametrize("damage, why", [
    (lambda spec: DEEP, "damaged, not a JSON spec (nested deeper than 200 levels)"),
    (lambda spec: json.dumps({**spec, "trainer": 5}), "damaged, not a JSON spec (trainer: expected an object, got 5)"),
    (lambda spec: json.dumps({**spec, "trainer": None}),
     "damaged, not a JSON spec (trainer: expected an object, got null)"),
    (lambda spec: json.dumps({**spec, "trainer": {**spec["trainer"], "num_epochs": "x"}}),
     '1 error in spec:\n  trainer.num_epochs: expected int, got "x"'),
], ids=["deep", "trainer_int", "trainer_null", "num_epochs_text"])
def test_a_damaged_config_json_is_one_error_naming_it_and_the_key(trained, tmp_path, capsys, damage, why):
    """A run with a ``last.pt`` to resume whose saved spec is damaged: ``--resume`` with the user's
    spec reads it to decide whether the run may be extended."""
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    (run / "metrics.json").unlink()  # an interrupted run: the saved spec is read to plan the resume
    (run / "config.json").write_text(damage(trained["spec"]), encoding="utf-8")
    before = snapshot(run)
    expected = f"{run / 'config.json'}: {why}"
    with pytest.raises(ConfigurationError) as refused:
        Run(trained["spec"], run).train(resume=True)
    assert str(refused.value) == expected
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(trained["spec"]), encoding="utf-8")
    assert cli(capsys, "train", spec, "-s", run, "--resume", "--no-tracking") == (2, f"error: {expected}\n")
    assert snapshot(run) == before
