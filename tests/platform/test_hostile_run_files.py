"""Hostile input, round three: run directories and stores.

- An output (``--output-file``, ``--export``, ``--plot``) is refused where it would replace a file
  the platform keeps in any run directory, or an SQLite database, whatever the command reads.
- A loop of symbolic links as a run directory is one line, exit 2 (``train -s``, and the archive
  check of ``serve``/``evaluate-all``, which also refuses a damaged spec before Ray starts).
- A NaN score (a diverged run's) ranks last, ``--format json`` is standard JSON, and the exported
  file imports whole.
- A damaged vocabulary names the run's files; a ``tracking.json`` copied from another run is not
  believed by ``compare``.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from multigrain.platform.commands import main
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.ray.archives import check_archives
from multigrain.platform.runs import Run
from tests.conftest import resume_tagger_spec


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two 1-epoch runs of two specs (hidden 8 and 16), trained without tracking."""
    folder = tmp_path_factory.mktemp("hostile_run_files")
    spec = resume_tagger_spec(folder / "data")
    other = json.loads(json.dumps(spec))
    other["model"]["encoder"]["hidden_size"] = 16
    Run(spec, folder / "a").train()
    Run(other, folder / "b").train()
    return folder


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(code: int, err: str, message: str) -> None:
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
    assert message in err, err


def copied(runs, tmp_path, name: str = "a"):
    return shutil.copytree(runs / name, tmp_path / f"copy_{name}")


def test_an_output_over_any_runs_files_or_a_store_is_refused(runs, tmp_path, capsys):
    victim = copied(runs, tmp_path)
    before = {p.name: p.read_bytes() for p in victim.rglob("*") if p.is_file()}
    store = tmp_path / "store.db"
    uri = f"sqlite:///{store}"
    assert cli(capsys, "log", runs / "a", "--tracking-uri", uri)[0] == 0
    data = runs / "data" / "dev.bmes"
    cases = [
        (["evaluate", runs / "a", data, "--output-file", victim / "best.pt"], "--output-file", "best.pt"),
        (["evaluate", runs / "a", data, "--output-file", victim / "vocabulary" / "vocabulary.json"], "--output-file",
         "vocabulary/vocabulary.json"),
        (["leaderboard", "--all", "--export", victim / "config.json", "--tracking-uri", uri], "--export",
         "config.json"),
        (["compare", runs / "a", "--plot", victim / "metrics.json", "--tracking-uri", uri], "--plot", "metrics.json"),
    ]
    for args, option, name in cases:
        code, _, err = cli(capsys, *args)
        refused(code, err, f"{option} {args[args.index(option) + 1]}: is the run {victim}'s {name}; writing the "
                           f"output there could damage it (give another file name)")
    elsewhere = tmp_path / "other.db"
    shutil.copyfile(store, elsewhere)
    code, _, err = cli(capsys, "evaluate", runs / "a", data, "--output-file", elsewhere)
    refused(code, err, f"--output-file {elsewhere}: is an SQLite database (a tracking store?)")
    assert {p.name: p.read_bytes() for p in victim.rglob("*") if p.is_file()} == before
    assert elsewhere.read_bytes() == store.read_bytes()
    code, _, err = cli(capsys, "evaluate", runs / "a", data, "--output-file", victim / "notes.json")
    assert code == 0 and "f1" in json.loads((victim / "notes.json").read_text(encoding="utf-8")), err  # the user's


def test_a_loop_of_links_as_a_run_directory_is_one_line(runs, tmp_path, capsys):
    (tmp_path / "loop_a").symlink_to("loop_b")
    (tmp_path / "loop_b").symlink_to("loop_a")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(resume_tagger_spec(runs / "data")), encoding="utf-8")
    for target in (tmp_path / "loop_a", tmp_path / "loop_a" / "sub"):
        code, _, err = cli(capsys, "train", spec, "-s", target, "--no-tracking")
        refused(code, err, f"-s {target}: cannot be looked up (Too many levels of symbolic links)")
    with pytest.raises(ConfigurationError) as error:
        check_archives([str(tmp_path / "loop_a"), str(runs / "a")])
    assert str(error.value) == f"{tmp_path / 'loop_a'}: cannot be read (a loop of symbolic links)"


def test_the_archive_check_refuses_a_damaged_run_before_ray(runs, tmp_path):
    damaged = copied(runs, tmp_path)
    (damaged / "config.json").write_text('{"model":', encoding="utf-8")
    empty = copied(runs, tmp_path, "b")
    (empty / "best.pt").unlink()
    (empty / "best.pt").mkdir()
    with pytest.raises(ConfigurationError) as error:
        check_archives([str(damaged), str(runs / "a"), str(empty)])
    lines = str(error.value).split("\n")
    assert lines[0].startswith(f"{damaged / 'config.json'}: damaged, not a JSON spec (bad JSON")
    assert lines[1].startswith(f"{empty / 'best.pt'}: not a regular file (a directory)") and len(lines) == 2


def test_the_archive_check_refuses_weights_that_are_no_whole_torch_file(runs, tmp_path):
    import zipfile

    truncated, foreign, nothing = (shutil.copytree(runs / "a", tmp_path / name) for name in ("t", "f", "n"))
    data = (runs / "a" / "best.pt").read_bytes()
    (truncated / "best.pt").write_bytes(data[:len(data) // 2])
    (foreign / "best.pt").unlink()
    with zipfile.ZipFile(foreign / "best.pt", "w") as archive:
        archive.writestr("notes.txt", "a zip, but no torch file")
    (nothing / "best.pt").write_bytes(b"")
    with pytest.raises(ConfigurationError) as error:
        check_archives([str(truncated), str(runs / "a"), str(foreign), str(nothing)])
    assert str(error.value).split("\n") == [
        f"{truncated / 'best.pt'}: not a multigrain checkpoint, or damaged (a truncated or damaged torch zip file)",
        f"{foreign / 'best.pt'}: not a multigrain checkpoint (a zip file that torch.save did not write)",
        f"{nothing / 'best.pt'}: not a multigrain checkpoint, or damaged (an empty file)"]


def test_a_damaged_vocabulary_names_the_runs_files(runs, tmp_path, capsys):
    run = copied(runs, tmp_path)
    path = run / "vocabulary" / "vocabulary.json"
    vocabulary = json.loads(path.read_text(encoding="utf-8"))
    vocabulary["tags"][1] = "garbage"
    path.write_text(json.dumps(vocabulary), encoding="utf-8")
    code, _, err = cli(capsys, "evaluate", run, runs / "data" / "dev.bmes")
    refused(code, err, f"error: {run / 'config.json'} (with the run's vocabulary/ and resources/): 1 error in spec:\n"
                       f"  model: Tagger: labels ['garbage'] match no tag scheme")


def with_test_f1(runs, tmp_path, name: str, value: float):
    run = copied(runs, tmp_path, name)
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    metrics["test"]["f1"] = value
    (run / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return run


@pytest.mark.parametrize("nan_first", [True, False], ids=["nan logged first", "nan logged last"])
def test_a_nan_score_ranks_last_and_exports_as_standard_json(runs, tmp_path, capsys, nan_first):
    diverged, fine = with_test_f1(runs, tmp_path, "a", math.nan), with_test_f1(runs, tmp_path, "b", 0.5)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    for run in ((diverged, fine) if nan_first else (fine, diverged)):
        assert cli(capsys, "log", run, "--tracking-uri", uri)[0] == 0
    code, out, err = cli(capsys, "leaderboard", "--all", "--format", "json", "--tracking-uri", uri)
    rows = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in --format json"))
    assert code == 0 and [(r["rank"], r["value"]) for r in rows] == [(1, 0.5), (2, None)], err
    export = tmp_path / "board.json"
    assert cli(capsys, "leaderboard", "--all", "--export", export, "--tracking-uri", uri)[0] == 0
    board = json.loads(export.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"{c} in the file"))
    assert sorted(r["metrics"]["test_f1"] for r in board["runs"] if isinstance(r["metrics"]["test_f1"], str)) == ["NaN"]
    other = f"sqlite:///{tmp_path / 'other.db'}"
    code, out, err = cli(capsys, "leaderboard", "--import", export, "--tracking-uri", other)
    assert code == 0 and "imported 2 runs" in out + err, err
    code, out, _ = cli(capsys, "leaderboard", "--all", "--format", "json", "--tracking-uri", other)
    assert [(r["rank"], r["value"]) for r in json.loads(out)] == [(1, 0.5), (2, None)]


def test_an_imported_metric_must_be_a_number_or_a_named_non_finite_value(tmp_path, capsys, runs):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    assert cli(capsys, "log", runs / "a", "--tracking-uri", uri)[0] == 0
    export = tmp_path / "board.json"
    assert cli(capsys, "leaderboard", "--all", "--export", export, "--tracking-uri", uri)[0] == 0
    board = json.loads(export.read_text(encoding="utf-8"))
    board["runs"][0]["metrics"]["test_f1"] = "nan"
    export.write_text(json.dumps(board), encoding="utf-8")
    code, _, err = cli(capsys, "leaderboard", "--import", export, "--tracking-uri", f"sqlite:///{tmp_path / 'o.db'}")
    refused(code, err, 'metrics.test_f1: expected a number, got "nan"')


def test_compare_does_not_believe_a_tracking_json_copied_from_another_run(runs, tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    first, second = copied(runs, tmp_path, "a"), copied(runs, tmp_path, "b")
    logged = {}
    for run in (first, second):
        code, out, err = cli(capsys, "log", run, "--tracking-uri", uri)
        assert code == 0, err
        logged[run] = re.search(r"logged as MLflow run ([0-9a-f]{32})", out + err).group(1)
    (second / "tracking.json").write_text(json.dumps({"tracking_uri": uri, "run_id": logged[first]}), encoding="utf-8")
    code, out, err = cli(capsys, "compare", second, "--tracking-uri", uri, "--format", "json", "--plot",
                         tmp_path / "c.png")
    assert code == 0, err
    [shown] = json.loads(out)["runs"]
    assert shown["spec_hash"] == (second / "spec_hash").read_text(encoding="utf-8").strip()


def test_an_export_through_a_link_or_onto_a_device_never_replaces_it(runs, tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    assert cli(capsys, "log", runs / "a", "--tracking-uri", uri)[0] == 0
    target = tmp_path / "board.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    assert cli(capsys, "leaderboard", "--all", "--export", link, "--tracking-uri", uri)[0] == 0
    assert link.is_symlink() and json.loads(target.read_text(encoding="utf-8"))["runs"]  # the file it names, written
    device = tmp_path / "null"
    device.symlink_to("/dev/null")
    assert cli(capsys, "leaderboard", "--all", "--export", device, "--tracking-uri", uri)[0] == 0
    assert device.is_symlink() and os.path.realpath(device) == "/dev/null" and Path("/dev/null").is_char_device()
    code, _, err = cli(capsys, "leaderboard", "--all", "--export", "/dev/full", "--tracking-uri", uri)
    refused(code, err, "/dev/full: cannot be written (No space left on device); it is no regular file")
    assert Path("/dev/full").is_char_device()


@pytest.mark.parametrize("uri, why", [("http://[::1", "Invalid IPv6 URL"), ("http://h:port", "Port could not be cast")])
def test_a_tracking_uri_that_is_no_uri_is_one_line(capsys, uri, why):
    for command in (["leaderboard", "--all"], ["compare", "x"]):
        code, _, err = cli(capsys, *command, "--tracking-uri", uri)
        refused(code, err, f"tracking URI {uri}: cannot be read as a URI ({why}")


@pytest.mark.parametrize("command", [["ui"], ["serve", "run"]])
def test_an_empty_host_is_refused(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([*command, "--host", ""])
    assert e.value.code == 2 and "an empty one would listen on every interface" in capsys.readouterr().err
