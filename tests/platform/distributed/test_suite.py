"""``multigrain suite``: a suite file's structure errors, its plan (specs x configurations x seeds),
training on a local Ray with reuse, resume and MLflow rows tagged as suite runs (and so rows of
RESULTS.md's tables: ``benchmarks/results_tables.py --suite``), two suites at once, and ``--check``
against a leaderboard export. Every run is a 1-epoch BiLSTM-CRF on 12 Resume sentences."""
import json
import re
import threading
from pathlib import Path

import pytest

from multigrain.platform import suite as suites
from multigrain.platform.commands import main as cli_main
from multigrain.platform.errors import ConfigurationError, SpecError
from tests.conftest import alive, in_session, mlflow_runs, resume_tagger_spec, write_spec


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             log_to_driver=False)
    yield
    ray.shutdown()


def benchmark_module(name: str):
    """A module of benchmarks/ (not a package: its scripts import each other by name)."""
    import importlib
    import sys

    folder = str(Path(__file__).resolve().parents[3] / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def write_suite(directory: Path, entries: list, name: str = "suite.json") -> str:
    path = directory / name
    path.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    return str(path)


@pytest.fixture
def tiny(tmp_path):
    """A tiny spec beside a suite of it: 2 configurations x 2 seeds."""
    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    entry = {"spec": Path(spec).name, "seeds": [13, 14], "configs": {"a": {}, "b": ["trainer.optimizer.lr=0.02"]},
             "resources": {"cpus": 1}}
    return {"dir": tmp_path, "spec": spec, "suite": write_suite(tmp_path, [entry]), "entry": entry,
            "runs": str(tmp_path / "runs"), "uri": f"sqlite:///{tmp_path / 'm.db'}"}


# ---------------------------------------------------------------------------- structure and plan
def test_every_structure_error_at_once_with_its_path(tmp_path):
    path = write_suite(tmp_path, [{"spec": "x.json", "seed": [1]},
                                  {"spec": "x.json", "seeds": [1, 1], "resources": {"gpu": 1, "cpus": -1},
                                   "configs": {"a/b": {}}, "overrides": "lr=1"},
                                  3])
    with pytest.raises(SpecError) as e:
        suites.load_suite(path)
    paths = [p.path for p in e.value.problems]
    assert sorted(paths) == sorted(["entries[0].seed", "entries[1].seeds", "entries[1].overrides",
                                    "entries[1].configs.a/b", "entries[1].resources.gpu", "entries[1].resources.cpus",
                                    "entries[2]"])
    assert "did you mean 'seeds'" in str(e.value) and "did you mean 'gpus'" in str(e.value)


def test_cli_reports_a_bad_suite_with_exit_2_and_the_spec_problem_under_its_entry(tiny, capsys):
    bad = write_suite(tiny["dir"], [{**tiny["entry"], "configs": {"a": ["trainer.optimizer.lrr=1"]}}], "bad.json")
    assert cli_main(["suite", bad, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "entries[0].configs.a: tiny.json: override trainer.optimizer.lrr" in err and "Traceback" not in err


def test_plan_expands_configurations_and_seeds_with_one_identity_each(tiny, capsys):
    runs = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"])
    assert [(r.entry, r.seed) for r in runs] == [("tiny [a]", 13), ("tiny [a]", 14), ("tiny [b]", 13),
                                                 ("tiny [b]", 14)]
    assert len({r.spec_hash for r in runs}) == 4
    assert [r.spec["seed"] for r in runs] == [13, 14, 13, 14]
    assert runs[2].spec["trainer"]["optimizer"]["lr"] == 0.02 and runs[0].spec["trainer"]["optimizer"]["lr"] != 0.02
    assert runs[2].run_dir == str(Path(tiny["runs"]) / f"tiny-b-{runs[2].spec_hash[:8]}")
    assert runs[0].options == {"num_cpus": 1}
    only = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], only="tiny [b]")
    assert [r.entry for r in only] == ["tiny [b]", "tiny [b]"]
    tagged = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], only="tiny*")
    assert [r.entry for r in tagged] == ["tiny [a]", "tiny [a]", "tiny [b]", "tiny [b]"]
    first = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], seeds=[14])
    assert [(r.entry, r.seed) for r in first] == [("tiny [a]", 14), ("tiny [b]", 14)]
    with pytest.raises(ConfigurationError, match="--seeds 99: no run"):
        suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], seeds=[99])
    cut = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], seeds=[13],
                      overrides=["+dataset_reader.max_instances=3", "trainer.num_epochs=1"])
    assert [r.spec["dataset_reader"]["max_instances"] for r in cut] == [3, 3]
    assert [r.spec["trainer"]["num_epochs"] for r in cut] == [1, 1]
    assert cut[1].spec["trainer"]["optimizer"]["lr"] == 0.02  # the configuration's own overrides still apply
    assert {r.spec_hash for r in cut}.isdisjoint({r.spec_hash for r in runs})
    assert cut[1].overrides == ["trainer.optimizer.lr=0.02", "+dataset_reader.max_instances=3", "trainer.num_epochs=1"]
    assert suites.unplaceable(runs, {"CPU": 2.0}) == []
    assert suites.unplaceable(runs, {"CPU": 0.5, "GPU": 1}) == ["tiny [a]: asks for 1 CPUs; this Ray has 0.5 in all",
                                                                "tiny [b]: asks for 1 CPUs; this Ray has 0.5 in all"]
    bracketed = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], only="t* [b]")
    assert [r.entry for r in bracketed] == ["tiny [b]", "tiny [b]"]
    both = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], only=["tiny [b]", "t* [a]"])
    assert [r.entry for r in both] == ["tiny [a]", "tiny [a]", "tiny [b]", "tiny [b]"]  # the suite's order, once each
    unmatched = r"^--only 'tiny \[c\]' 'x\*': no entry of .*its entries: tiny \[a\], "  # each such pattern named
    with pytest.raises(ConfigurationError, match=unmatched):
        suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"], only=["tiny [c]", "tiny*", "x*"])
    untagged = write_suite(tiny["dir"], [{k: v for k, v in tiny["entry"].items() if k != "configs"}, tiny["entry"]], "untagged.json")
    plain = suites.plan(untagged, suites.load_suite(untagged), tiny["runs"], only="tiny")
    assert [r.entry for r in plain] == ["tiny", "tiny"]
    assert cli_main(["suite", tiny["suite"], "--runs-dir", tiny["runs"], "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count(" train ") == 4 and "4 runs: 4 to train, 0 to resume, 0 to reuse" in out
    assert cli_main(["suite", tiny["suite"], "--runs-dir", tiny["runs"], "--dry-run", "--only", "tiny [a]",
                     "tiny [b]", "--seeds", "13"]) == 0
    assert "2 runs: 2 to train, 0 to resume, 0 to reuse" in capsys.readouterr().out


def test_two_entries_resolving_to_one_spec_are_refused(tiny):
    path = write_suite(tiny["dir"], [{"spec": "tiny.json", "seeds": [13]}, {"spec": "tiny.json", "seeds": [13],
                                                                              "configs": {"same": {}}}], "dup.json")
    with pytest.raises(SpecError, match=r"tiny \[same\] seed 13 is the same spec as tiny seed 13"):
        suites.plan(path, suites.load_suite(path), tiny["runs"])


def test_the_status_shows_each_running_runs_new_progress_line_once(tiny):
    from multigrain.platform.ray.suite import Progress

    runs = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"])
    printed = []
    progress = Progress(runs, printed.append)
    states = {0: "running", 1: "queued", 2: "finished", 3: "running"}
    line = "epoch 1/1: 30/120 batches (25.0%) | 1.0 batches/s | elapsed 30.0s | remaining ~1m30s"
    snapshot = {0: {"line": line}, 2: {"line": "evaluating: 4/4 batches | done"}, 3: {"epoch": 0}}
    progress.report(states, snapshot)
    progress.report(states, snapshot)  # nothing new
    assert printed == [f"  {runs[0].label}: {line}"]
    progress.report(states, {0: {"line": line.replace("30/120", "60/120")}})
    assert printed[-1] == f"  {runs[0].label}: " + line.replace("30/120", "60/120") and len(printed) == 2


# ---------------------------------------------------------------------------- running on Ray
def test_suite_trains_logs_then_reuses_resumes_and_checks(ray_local, tiny, capsys):
    from multigrain.platform.commands.train import train  # noqa: F401  (the CLI's own path below)

    # one run trained before by `multigrain train` for 1 of 2 epochs: the suite resumes it
    runs = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"])
    two = write_suite(tiny["dir"], [{**tiny["entry"], "overrides": {"trainer.num_epochs": 2}}], "two.json")
    runs = suites.plan(two, suites.load_suite(two), tiny["runs"])
    first = runs[0]
    Path(tiny["dir"], "first.json").write_text(json.dumps(first.spec), encoding="utf-8")
    assert cli_main(["train", str(Path(tiny["dir"], "first.json")), "-s", first.run_dir, "--stop-after-epoch", "1",
                     "--no-tracking"]) == 0
    epoch_one = json.loads(Path(first.run_dir, "metrics.json").read_text())["history"][0]
    assert first.state() == "partial"
    capsys.readouterr()

    assert cli_main(["suite", two, "--runs-dir", tiny["runs"], "--tracking-uri", tiny["uri"]]) == 0
    out = capsys.readouterr().out
    assert "4 runs: 3 to train, 1 to resume, 0 to reuse" in out and "suite [" in out
    done = json.loads(Path(first.run_dir, "metrics.json").read_text())
    assert done["finished"] and done["epochs_completed"] == 2 and done["history"][0] == epoch_one
    logged = mlflow_runs(tiny["uri"])
    training = [r for r in logged if "evaluated_on" not in r.data.tags]
    assert sorted(r.data.tags["spec_hash"] for r in training) == sorted(r.spec_hash for r in runs)
    assert sorted(r.data.tags.get("config") for r in training) == ["a", "a", "b", "b"]

    first_tags = next(r.data.tags for r in training if r.data.tags["spec_hash"] == first.spec_hash)
    assert first_tags["suite_entry"] == "tiny [a]" and first_tags["spec_name"] == "tiny"
    assert json.loads(first_tags["overrides"]) == ["trainer.num_epochs=2"] and first_tags["num_epochs"] == "2"
    assert first_tags["note"] == "-o trainer.num_epochs=2" and first_tags["device"] and first_tags["date"]

    # again: everything reused, nothing trained or logged twice (and no Ray needed)
    assert cli_main(["suite", two, "--runs-dir", tiny["runs"], "--tracking-uri", tiny["uri"]]) == 0
    out = capsys.readouterr().out
    assert "0 to train, 0 to resume, 4 to reuse" in out and out.count("reused ") == 4
    assert len(mlflow_runs(tiny["uri"])) == len(logged)

    # the suite's runs as rows of RESULTS.md's NER table and of a board (benchmarks/results_tables.py)
    results_tables = benchmark_module("results_tables")
    results, rows_board = tiny["dir"] / "RESULTS.md", tiny["dir"] / "rows.json"
    assert results_tables.main(["--suite", two, "--runs-dir", tiny["runs"], "--tracking-uri", tiny["uri"],
                                "--board", str(rows_board), "--results", str(results)]) == 0
    rows = [line.split(" | ") for line in results.read_text(encoding="utf-8").splitlines() if line.startswith("| tiny")]
    assert [(r[1], r[-1].removesuffix(" |")) for r in rows] == [("tiny [a]", "2 seeds (13, 14); -o trainer.num_epochs=2"),
                                             ("tiny [b]", "2 seeds (13, 14); -o trainer.num_epochs=2; "
                                                          "-o trainer.optimizer.lr=0.02")]
    assert all(" ± " in r[3] and r[5].startswith("2 (") for r in rows)  # test F1 over 2 seeds; 2 epochs each
    assert len(json.loads(rows_board.read_text())["runs"]) == 4
    assert len(mlflow_runs(tiny["uri"])) == len(logged)  # tagged, not logged again

    # --check against an export of these runs: reproduced; shifted by 1 point: differs (exit 1)
    board = tiny["dir"] / "board.json"
    assert cli_main(["leaderboard", "ner", "--tracking-uri", tiny["uri"], "--export", str(board)]) == 0
    capsys.readouterr()
    assert cli_main(["suite", two, "--runs-dir", tiny["runs"], "--check", str(board)]) == 0
    out = capsys.readouterr().out
    assert out.count("reproduced ") == 2 and "2 reproduced, 0 differs, 0 missing, 0 new" in out
    data = json.loads(board.read_text())
    for run in data["runs"]:
        if run["tags"].get("config") == "b":
            run["metrics"] = {k: v + 0.01 for k, v in run["metrics"].items()}
    board.write_text(json.dumps(data))
    assert cli_main(["suite", two, "--runs-dir", tiny["runs"], "--check", str(board)]) == 1
    out = capsys.readouterr().out
    assert "differs" in out and "1 reproduced, 1 differs" in out
    three = write_suite(tiny["dir"], [{**tiny["entry"], "overrides": {"trainer.num_epochs": 2},
                                       "configs": {"a": {}, "b": ["trainer.optimizer.lr=0.02"], "c": {}}}], "3.json")
    with pytest.raises(SpecError):  # [c] resolves to [a]'s spec
        suites.plan(three, suites.load_suite(three), tiny["runs"])
    three = write_suite(tiny["dir"], [{**tiny["entry"], "overrides": {"trainer.num_epochs": 2}, "configs": {
        "a": {}, "c": ["trainer.optimizer.lr=0.03"]}}], "3.json")
    assert cli_main(["suite", three, "--runs-dir", tiny["runs"], "--check", str(board)]) == 0
    assert "1 reproduced, 0 differs, 1 missing, 0 new" in capsys.readouterr().out


def test_two_suites_at_once_train_each_run_once(ray_local, tiny):
    from multigrain.platform.ray.suite import run_suite

    plans = [suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"]) for _ in range(2)]
    outcomes = [None, None]

    def drive(i):
        outcomes[i] = run_suite(plans[i], tracking=False, print_line=lambda line: None, poll=0.1)

    threads = [threading.Thread(target=drive, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert all(o is not None for o in outcomes)
    states = [[o[r.index]["state"] for r in plans[0]] for o in outcomes]
    assert states == [["finished"] * 4] * 2, [o[r.index].get("error") for o in outcomes for r in plans[0]]
    for r in plans[0]:  # one training: both drivers got the same history (the second reused the first's)
        a, b = (o[r.index]["result"] for o in outcomes)
        assert a["history"] == b["history"] and a["training_seconds"] == b["training_seconds"]


def signal_session(sid: int, sig) -> set[int]:
    """``sig`` to every process of session ``sid``, again until no new one appears: a signal to the
    suite's process group would miss the raylet's workers, each in a group of its own. Returns them."""
    import os

    signalled: set[int] = set()
    while new := in_session(sid) - signalled:
        for pid in new:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        signalled |= new
    return signalled


def wait_gone(pids: set[int], timeout: float = 60.0) -> None:
    import time

    deadline = time.time() + timeout
    while left := alive(pids):
        assert time.time() < deadline, f"processes {sorted(left)} outlived SIGKILL"
        time.sleep(0.05)


def test_a_killed_suite_restarts_reusing_finished_runs_and_resuming_the_interrupted_one(ray_local, tmp_path, capsys):
    """SIGKILL the whole ``multigrain suite`` session (driver, its local Ray and the raylet's
    workers, which sit in process groups of their own) while one run has finished and the other is
    between epochs; the restarted suite reuses the first (its files untouched), resumes the second
    from its ``last.pt`` (the epochs it had are kept as they were), trains nothing twice and logs one
    MLflow run per run. One CPU runs them one at a time, in the order Ray picks: either may be the
    finished one, so each has more than one epoch."""
    import os
    import signal
    import subprocess
    import sys
    import time

    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    path = write_suite(tmp_path, [{"spec": Path(spec).name, "seeds": [13], "name": "short",
                                   "overrides": ["trainer.num_epochs=4"]},
                                  {"spec": Path(spec).name, "seeds": [13], "name": "long",
                                   "overrides": ["trainer.num_epochs=12"]}])
    runs_dir, uri = str(tmp_path / "runs"), f"sqlite:///{tmp_path / 'm.db'}"
    short, long = suites.plan(path, suites.load_suite(path), runs_dir)
    epochs = {short.run_dir: 4, long.run_dir: 12}

    def finished_and_cut():
        states = {r.state(): r for r in (short, long)}
        return (states["finished"], states["partial"]) if set(states) == {"finished", "partial"} else None

    command = [sys.executable, "-m", "multigrain.platform.cli", "suite", path, "--runs-dir", runs_dir,
               "--tracking-uri", uri, "--num-cpus", "1"]
    env = {**os.environ, "CI": "true", "OMP_NUM_THREADS": "1"}
    log = tmp_path / "suite.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and finished_and_cut() is None:
            assert proc.poll() is None, f"the suite ended before it could be killed:\n{log.read_text()[-3000:]}"
            time.sleep(0.05)
        stopped = signal_session(proc.pid, signal.SIGSTOP)  # frozen where it stands, the training worker too
        pair = finished_and_cut()
        assert pair is not None, (short.state(), long.state())
        finished, cut = pair
    finally:
        stopped = signal_session(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    wait_gone(stopped)  # no worker of the killed suite still writes its run directory
    finished_files = {p.name: p.read_bytes() for p in Path(finished.run_dir).iterdir() if p.is_file()}
    from multigrain.platform.checkpoints import load_checkpoint

    had = load_checkpoint(Path(cut.run_dir, "last.pt"), "cpu")["history"]  # the epochs it had when killed
    assert 1 <= len(had) < epochs[cut.run_dir]

    assert cli_main(["suite", path, "--runs-dir", runs_dir, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "2 runs: 0 to train, 1 to resume, 1 to reuse" in out
    assert {p.name: p.read_bytes() for p in Path(finished.run_dir).iterdir() if p.is_file()} == finished_files
    done = json.loads(Path(cut.run_dir, "metrics.json").read_text())
    assert done["finished"] and done["epochs_completed"] == epochs[cut.run_dir] and done["history"][:len(had)] == had
    training = [r for r in mlflow_runs(uri) if "evaluated_on" not in r.data.tags]
    assert sorted(r.data.tags["spec_hash"] for r in training) == sorted([short.spec_hash, long.spec_hash])


def test_a_suite_worker_reports_its_trainings_progress_lines_to_the_monitor(ray_local, tiny):
    """The worker hands each progress line its training prints (here one per batch) to the suite's
    monitor, whose snapshot the driver shows under its status line."""
    import ray

    from multigrain.platform.ray.suite import _suite_task
    from multigrain.platform.ray.sweep import SweepMonitor

    run = suites.plan(tiny["suite"], suites.load_suite(tiny["suite"]), tiny["runs"])[0]
    monitor = ray.remote(num_cpus=0)(SweepMonitor).remote()
    task = ray.remote(num_cpus=1, runtime_env={"env_vars": {"MULTIGRAIN_PROGRESS_INTERVAL": "0"}})(_suite_task)
    result = ray.get(task.remote(run.spec, run.run_dir, 7, monitor, str(tiny["dir"]), False, []))
    assert result["finished"]
    record = ray.get(monitor.snapshot.remote())[7]
    assert record["epoch"] == 1 and re.fullmatch(r".+: \d+/\d+ batches \(100\.0%\) \|.+\| done", record["line"])


def test_an_entry_reads_an_earlier_entrys_run_directory_and_starts_after_it(ray_local, tiny, capsys):
    """``ext_vars: {pretrained: {run_of: NAME}}``: the run directory of entry NAME at the same seed
    (or its only seed); the reading runs start once that run has finished (here they need its
    directory to exist to find their validation file), and ``--only`` of the reader plans it too."""
    spec = Path(tiny["spec"])
    reader = tiny["dir"] / "reader.jsonnet"
    reader.write_text(f"(import '{spec.name}') + {{ validation_data_path: std.extVar('pretrained') + "
                      f"'/../../data/dev.bmes' }}", encoding="utf-8")
    path = write_suite(tiny["dir"], [{"spec": spec.name, "seeds": [13], "name": "first"},
                                     {"spec": reader.name, "seeds": [13, 14], "name": "second",
                                      "ext_vars": {"pretrained": {"run_of": "first"}}}], "chained.json")
    runs = suites.plan(path, suites.load_suite(path), tiny["runs"], check_data_paths=False)
    first = runs[0]
    assert [(r.entry, r.seed, r.needs) for r in runs] == [("first", 13, []), ("second", 13, [0]), ("second", 14, [0])]
    assert runs[1].spec["validation_data_path"] == first.run_dir + "/../../data/dev.bmes"
    only = suites.plan(path, suites.load_suite(path), tiny["runs"], only="second", seeds=[14], check_data_paths=False)
    assert [(r.entry, r.seed, r.needs) for r in only] == [("first", 13, []), ("second", 14, [0])]
    bad = write_suite(tiny["dir"], [{"spec": spec.name, "ext_vars": {"a": 1}}], "bad_var.json")
    with pytest.raises(SpecError, match=r"entries\[0\].ext_vars.a: an ext-var is a string, or \{run_of"):
        suites.load_suite(bad)
    bad = write_suite(tiny["dir"], [{"spec": reader.name, "name": "second", "ext_vars": {"pretrained": {"run_of": "x"}}}],
                      "bad_chain.json")
    with pytest.raises(SpecError, match=r"entries\[0\].ext_vars.pretrained: run_of 'x': no earlier entry"):
        suites.plan(bad, suites.load_suite(bad), tiny["runs"])

    assert cli_main(["suite", path, "--runs-dir", tiny["runs"], "--no-tracking"]) == 0
    assert "3 runs: 3 to train, 0 to resume, 0 to reuse" in capsys.readouterr().out
    first_done = Path(first.run_dir, "metrics.json").stat().st_mtime
    for r in runs[1:]:
        assert r.result() is not None and Path(r.run_dir, "config.json").stat().st_mtime >= first_done


def test_run_of_with_a_seed_reads_that_run_for_every_seed(tiny):
    """``{run_of: NAME, seed: N}``: every seed of the entry reads entry NAME's run of seed N (one
    intermediate model under several seeds of the next task), planned first, also under ``--only``."""
    spec = Path(tiny["spec"])
    reader = tiny["dir"] / "reader_seed.jsonnet"
    reader.write_text(f"(import '{spec.name}') + {{ validation_data_path: std.extVar('pretrained') + "
                      f"'/../../data/dev.bmes' }}", encoding="utf-8")
    entries = [{"spec": spec.name, "seeds": [13, 14], "name": "first"},
               {"spec": reader.name, "seeds": [13, 14, 15], "name": "second",
                "ext_vars": {"pretrained": {"run_of": "first", "seed": 14}}}]
    path = write_suite(tiny["dir"], entries, "pinned.json")
    runs = suites.plan(path, suites.load_suite(path), tiny["runs"], check_data_paths=False)
    assert [(r.entry, r.seed, r.needs) for r in runs] == [("first", 13, []), ("first", 14, []), ("second", 13, [1]),
                                                          ("second", 14, [1]), ("second", 15, [1])]
    assert {r.spec["validation_data_path"] for r in runs[2:]} == {runs[1].run_dir + "/../../data/dev.bmes"}
    only = suites.plan(path, suites.load_suite(path), tiny["runs"], only="second", seeds=[15], check_data_paths=False)
    assert [(r.entry, r.seed, r.needs) for r in only] == [("first", 14, []), ("second", 15, [0])]
    entries[1]["ext_vars"]["pretrained"]["seed"] = 16
    bad = write_suite(tiny["dir"], entries, "pinned_absent.json")
    with pytest.raises(SpecError, match=r"entries\[1\].ext_vars.pretrained: run_of 'first': no earlier entry of that "
                                        r"name with seed 16$"):
        suites.plan(bad, suites.load_suite(bad), tiny["runs"], check_data_paths=False)
    entries[1]["ext_vars"]["pretrained"] = {"run_of": "frist", "seed": 14}  # a misspelt name: the one it may mean
    bad = write_suite(tiny["dir"], entries, "pinned_misspelt.json")
    with pytest.raises(SpecError, match=r"entries\[1\].ext_vars.pretrained: run_of 'frist': no earlier entry of that "
                                        r"name with seed 14 \(did you mean 'first'\?\)$"):
        suites.plan(bad, suites.load_suite(bad), tiny["runs"], check_data_paths=False)
    for seed in ("14", True, -1):
        entries[1]["ext_vars"]["pretrained"]["seed"] = seed
        bad = write_suite(tiny["dir"], entries, "pinned_bad.json")
        with pytest.raises(SpecError, match=r"entries\[1\].ext_vars.pretrained: an ext-var is a string, or \{run_of"):
            suites.load_suite(bad)


def test_check_reads_a_translation_runs_own_test_set():
    """A spec scored only on named test sets (translation) is checked on the set named like its
    dataset (``mt/tvsub``: ``test_sets.tvsub``), with that set's ranked metric."""
    from multigrain.platform.suite_check import _test_scores

    result = {"leaderboard_metric": "bleu", "test_sets": {"tvsub": {"metrics": {"bleu": 3.2, "chrf": 12.0},
                                                                    "leaderboard_metric": "bleu"},
                                                          "wmt22": {"metrics": {"bleu": 0.2}}}}
    assert _test_scores(result, "mt/tvsub") == ({"bleu": 3.2, "chrf": 12.0}, "bleu")
    assert _test_scores(result, "mt/other") is None and _test_scores(None, "mt/tvsub") is None
    assert _test_scores({"test": {"f1": 0.9}, "leaderboard_metric": "f1"}, "ner/resume") == ({"f1": 0.9}, "f1")


def test_the_local_ray_of_a_suite_or_sweep_runs_its_trainings_at_the_commands_priority():
    """Ray starts its workers at nice 15: beside any other work they get the processor last (a
    suite's trainings ran at a third of their speed beside one ordinary process). ``connect`` with
    ``worker_niceness=0``, as ``suite`` and ``sweep`` call it, starts them at the command's own
    priority, as ``multigrain train`` runs, and leaves no setting behind for a later Ray of the
    process; without it, Ray's 15. Either way the SIGTERM handler set before stays (``ray.init``
    replaces it with one that exits with a stack dump)."""
    import ast
    import os
    import subprocess
    import sys

    code = """
import os, ray, signal
from multigrain.platform.ray.cluster import connect

def nice():
    return os.getpriority(os.PRIO_PROCESS, 0)

def mine(signum, frame):  # a command's SIGTERM handler: ray.init replaced it with one of Ray's
    pass

signal.signal(signal.SIGTERM, mine)
base, out = nice(), []
for niceness in (0, None):
    connect(None, loopback=True, worker_niceness=niceness, num_cpus=1, object_store_memory=80 * 1024 * 1024)
    out += [ray.get(ray.remote(nice).remote()) - base, "RAY_worker_niceness" in os.environ,
            signal.getsignal(signal.SIGTERM) is mine]
    ray.shutdown()
print(out + [base])
"""
    env = {k: v for k, v in os.environ.items() if k != "RAY_worker_niceness"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    *out, base = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    # Ray's 15 is an increment, capped at the highest niceness, 19 (under `nice make test` it is less)
    assert out == [0, False, True, min(15, 19 - base), False, True]


def test_check_needs_no_data_files(tmp_path, capsys):
    """``--check`` trains nothing: an entry whose vectors are not built yet is "missing", not a spec error."""
    spec = str(Path(__file__).resolve().parents[3] / "jsonnet_configs" / "ner" / "resume_plte_vec.jsonnet")
    suite = write_suite(tmp_path, [{"spec": spec, "seeds": [13], "ext_vars": {"vectors": str(tmp_path / "none")}}])
    board = tmp_path / "board.json"
    board.write_text(json.dumps({"format": "multigrain-leaderboard", "version": 1, "runs": []}), encoding="utf-8")
    assert cli_main(["suite", suite, "--runs-dir", str(tmp_path / "runs"), "--num-cpus", "1"]) == 2
    assert "char_pretrained_file: file not found" in capsys.readouterr().err  # training needs them
    assert not (tmp_path / "runs").exists()
    assert cli_main(["suite", suite, "--runs-dir", str(tmp_path / "runs"), "--check", str(board)]) == 0
    assert "0 reproduced, 0 differs, 1 missing, 0 new" in capsys.readouterr().out
