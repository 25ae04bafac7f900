"""benchmarks/suite_processes.py, a suite's runs as local processes without Ray or MLflow. With both
blocked from import (as device_session.sh's REHEARSAL does), a suite of two tiny BiLSTM-CRF runs
(12 Resume sentences, seeds 13 and 14) trains into exactly the run directories ``suite.plan`` gives,
each finished with its planned spec hash, one ``finished`` summary line per run; a second call starts
nothing and leaves every file of the runs as it was; ``--extend`` with one more epoch continues the
finished 1-epoch runs and ends bit-identical (scores and weights) to the 2-epoch spec trained straight;
``--seconds`` stops a run that cannot finish (exit 1, a ``stopped`` line, no process left, the run
resumable when an epoch ended); SIGTERM to the driver ends its runs' processes within seconds; a missing
suite file, a structure or spec error, ``run_of`` entries and ``--only`` matching nothing are one
message and exit 2, nothing started."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT, alive, children_of, in_session, proc_stat, resume_tagger_spec, write_spec

sys.path.insert(0, str(ROOT / "benchmarks"))

import suite_processes  # noqa: E402
from multigrain.platform import suite as suites  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "suite_processes.py"
ENTRY = {"spec": "tiny.json", "seeds": [13, 14], "resources": {"cpus": 1}}
LONG = ["-o", "trainer.num_epochs=100000"]  # a run that cannot finish in a test's time (~0.07 s an epoch)
#: the oracle of --extend: each spec trained straight into its directory, in a process of its own
ORACLE = ("import json, sys\n"
          "from multigrain.platform.runs import Run\n"
          "for spec_file, run_dir in zip(sys.argv[1::2], sys.argv[2::2]):\n"
          "    Run(json.loads(open(spec_file, encoding='utf-8').read()), run_dir).train()\n")
COMPARED = ("spec_hash", "finished", "best_epoch", "best_validation_f1", "epochs_completed", "history",
            "validation", "test", "test_report", "test_samples")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny spec and a suite of it (2 seeds), and the environment of a machine without Ray or
    MLflow: both packages raise ImportError ahead of the repository on PYTHONPATH."""
    folder = tmp_path_factory.mktemp("suite_processes")
    write_spec(folder, resume_tagger_spec(folder / "data"))
    suite = folder / "suite.json"
    suite.write_text(json.dumps({"entries": [ENTRY]}), encoding="utf-8")
    absent = folder / "absent"
    for module in ("ray", "mlflow"):
        (absent / module).mkdir(parents=True)
        (absent / module / "__init__.py").write_text(f"raise ImportError('{module} is not on the device machine')\n",
                                                     encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=f"{absent}{os.pathsep}{ROOT}", CI="true", OMP_NUM_THREADS="2")
    env.pop("MLFLOW_TRACKING_URI", None)
    return SimpleNamespace(dir=folder, suite=suite, runs=folder / "runs", env=env)


def driver(tiny, *args, runs=None, timeout=180):
    """The script in a subprocess from the repository root, on the suite of ``tiny``."""
    return subprocess.run([sys.executable, str(SCRIPT), str(tiny.suite), "--runs-dir", str(runs or tiny.runs),
                           *args], cwd=ROOT, env=tiny.env, capture_output=True, text=True, timeout=timeout)


def plan(tiny, runs=None, **options) -> list:
    return suites.plan(str(tiny.suite), suites.load_suite(tiny.suite), str(runs or tiny.runs), **options)


def snapshot(folders) -> dict:
    """Every file under ``folders``: (mtime in ns, bytes)."""
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for f in folders for p in sorted(Path(f).rglob("*"))
            if p.is_file()}


def summary(stdout: str, state: str) -> list[str]:
    """The labels of the summary lines in ``state``."""
    return [" ".join(line.split()[1:3]) for line in stdout.splitlines() if line.startswith(f"{state} ")]


def log_of(run, logs: Path) -> Path:
    return logs / f"{Path(run.run_dir).name}.log"


@pytest.fixture(scope="module")
def trained(tiny):
    """The suite's two 1-epoch runs, trained once by the script; (the finished call, the plan)."""
    return driver(tiny), plan(tiny)


def test_without_ray_or_mlflow_the_suite_trains_into_the_planned_run_directories(tiny, trained):
    for module in ("ray", "mlflow"):  # the blocker works: neither imports in this environment
        blocked = subprocess.run([sys.executable, "-c", f"import {module}"], env=tiny.env, capture_output=True,
                                 text=True, timeout=60)
        assert blocked.returncode == 1 and f"ImportError: {module} is not on the device machine" in blocked.stderr
    done, runs = trained
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[0] == "2 runs: 2 to train or resume, 0 finished already"
    assert [r.label for r in runs] == ["tiny seed=13", "tiny seed=14"]
    assert summary(done.stdout, "finished") == ["tiny seed=13", "tiny seed=14"]
    assert summary(done.stdout, "failed") == summary(done.stdout, "stopped") == []
    assert sorted(p.name for p in tiny.runs.iterdir()) == sorted([Path(r.run_dir).name for r in runs] + ["logs"])
    for r in runs:
        assert Path(r.run_dir).parent == tiny.runs
        result = r.result()  # metrics.json finished with the plan's spec hash
        assert result is not None and result["spec_hash"] == r.spec_hash and result["run_dir"] == r.run_dir
        assert result["epochs_completed"] == 1 and r.spec["seed"] == r.seed
        name = Path(r.run_dir).name
        assert json.loads((tiny.runs / "logs" / f"{name}.spec.json").read_text(encoding="utf-8")) == r.spec
        assert "epoch 1/1 | train loss" in log_of(r, tiny.runs / "logs").read_text(encoding="utf-8")
    assert runs[0].result()["history"] != runs[1].result()["history"]  # two seeds, two trainings


def test_a_second_call_reuses_the_finished_runs_and_writes_nothing_to_them(tiny, trained):
    _, runs = trained
    assert all(r.result() is not None for r in runs)
    before = snapshot([r.run_dir for r in runs])
    logs = {p: p.read_bytes() for p in (tiny.runs / "logs").iterdir()}
    assert len(before) >= 2 * 4 and sum(p.name == "metrics.json" for p in before) == 2
    again = driver(tiny)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[0] == "2 runs: 0 to train or resume, 2 finished already"
    assert summary(again.stdout, "finished") == ["tiny seed=13", "tiny seed=14"]
    assert snapshot([r.run_dir for r in runs]) == before
    assert {p: p.read_bytes() for p in (tiny.runs / "logs").iterdir()} == logs  # no run started, no log written


def identical(a, b) -> bool:
    """``a`` and ``b`` equal to the bit: tensors and arrays (dtype and values) inside dicts, lists and tuples."""
    import numpy as np
    import torch

    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(identical, a, b))
    return type(a) is type(b) and a == b


def test_extend_continues_the_shorter_runs_and_equals_the_longer_spec_trained_straight(tiny, trained):
    _, shorter = trained
    kept = snapshot([r.run_dir for r in shorter])
    extended = driver(tiny, "-o", "trainer.num_epochs=2", "--extend")
    assert extended.returncode == 0, extended.stdout + extended.stderr
    assert extended.stdout.splitlines()[0] == "2 runs: 2 to train or resume, 0 finished already"
    assert summary(extended.stdout, "finished") == ["tiny seed=13", "tiny seed=14"]
    longer = plan(tiny, overrides=["trainer.num_epochs=2"])
    assert [r.spec["trainer"]["num_epochs"] for r in longer] == [2, 2]
    assert {r.run_dir for r in longer}.isdisjoint(r.run_dir for r in shorter)
    for short, r in zip(shorter, longer):
        log = log_of(r, tiny.runs / "logs").read_text(encoding="utf-8")
        assert f"{r.run_dir}: continuing {short.run_dir} (the same spec with fewer epochs)" in log
        assert "epoch 1/2 |" not in log and "epoch 2/2 |" in log  # only the missing epoch trained
        result = r.result()
        assert result is not None and result["epochs_completed"] == 2
        assert [h["epoch"] for h in result["history"]] == [1, 2]
        assert result["history"][0] == short.result()["history"][0]
    assert snapshot([r.run_dir for r in shorter]) == kept  # the sibling is copied, not moved or changed

    oracle = tiny.dir / "oracle"
    oracle.mkdir()
    args = []
    for r in longer:
        spec_file = oracle / f"{Path(r.run_dir).name}.json"
        spec_file.write_text(json.dumps(r.spec), encoding="utf-8")
        args += [str(spec_file), str(oracle / Path(r.run_dir).name)]
    straight = subprocess.run([sys.executable, "-c", ORACLE, *args], cwd=ROOT, env=dict(tiny.env, OMP_NUM_THREADS="1"),
                              capture_output=True, text=True, timeout=180)
    assert straight.returncode == 0, straight.stdout + straight.stderr
    assert "continuing" not in straight.stdout
    from multigrain.platform.checkpoints import load_checkpoint  # weights_only=True

    for r in longer:
        twin = oracle / Path(r.run_dir).name
        expected = json.loads((twin / "metrics.json").read_text(encoding="utf-8"))
        got = r.result()
        assert {k: got[k] for k in COMPARED} == {k: expected[k] for k in COMPARED}
        best = [load_checkpoint(d / "best.pt", "cpu") for d in (Path(r.run_dir), twin)]
        assert identical(*best), "best.pt"
        last = [load_checkpoint(d / "last.pt", "cpu") for d in (Path(r.run_dir), twin)]
        assert last[0]["epoch"] == 2 and set(last[0]) == set(last[1])
        assert all(identical(last[0][k], last[1][k]) for k in last[0] if k != "seconds")  # weights, Adam, RNG


def watch(proc: subprocess.Popen, until, timeout: float, runs: set) -> set[int]:
    """Polls the driver ``proc`` until ``until()`` or its exit (``timeout`` at most), adding to
    ``runs`` the run processes it starts (each leads a session of its own); returns ``runs``."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline and not until():
        runs |= {c for c in alive(children_of(proc.pid)) if (f := proc_stat(c)) and f[3] == str(c)}
        time.sleep(0.1)
    return runs


def kill_all(proc: subprocess.Popen, runs: set) -> None:
    """The driver's and the runs' sessions that still hold a live process killed (after a failed
    check: nothing outlives a test), the driver reaped."""
    for group in {proc.pid, *runs}:
        if in_session(group):
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait(30)


def start_driver(tiny, runs: Path, out: Path, *args) -> subprocess.Popen:
    with open(out, "wb") as f:
        return subprocess.Popen([sys.executable, str(SCRIPT), str(tiny.suite), "--runs-dir", str(runs), *args],
                                cwd=ROOT, env=tiny.env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def test_seconds_stops_a_run_still_going_and_leaves_no_process(tiny):
    runs_dir, out = tiny.dir / "stopped", tiny.dir / "stopped.out"
    proc = start_driver(tiny, runs_dir, out, "--seeds", "13", *LONG, "--seconds", "8", "--every", "2")
    seen = set()
    try:
        watch(proc, lambda: False, 90, seen)
        assert proc.wait(30) == 1
        assert len(seen) == 1  # the one run's process, in a session of its own
        assert all(in_session(sid) == set() for sid in seen) and in_session(proc.pid) == set()
    finally:
        kill_all(proc, seen)  # after the checks: what a failed one left alive
    text = out.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "1 runs: 1 to train or resume, 0 finished already"
    assert "8 s are up: stopping the runs still going" in text and "1 running, 0 ended" in text
    assert summary(text, "stopped") == ["tiny seed=13"] and summary(text, "finished") == []
    [run] = plan(tiny, runs_dir, seeds=[13], overrides=LONG[1:])
    log = log_of(run, runs_dir / "logs").read_text(encoding="utf-8")
    assert run.result() is None and "epoch 100000/100000" not in log
    assert ("epoch 1/100000 |" in log) == (run.state() == "partial")  # an epoch ended: a later call resumes


def test_sigterm_to_the_driver_ends_the_runs_processes(tiny):
    runs_dir, out = tiny.dir / "terminated", tiny.dir / "terminated.out"
    [run] = plan(tiny, runs_dir, seeds=[14], overrides=LONG[1:])
    log = log_of(run, runs_dir / "logs")
    proc = start_driver(tiny, runs_dir, out, "--seeds", "14", *LONG)
    seen = set()
    try:
        watch(proc, lambda: log.exists() and "epoch 1/100000 |" in log.read_text(encoding="utf-8"), 90, seen)
        assert proc.poll() is None and len(seen) == 1, out.read_text(encoding="utf-8")
        [child] = seen
        assert in_session(child)  # training
        environ = dict(v.split("=", 1) for v in Path(f"/proc/{child}/environ").read_text().split("\0") if "=" in v)
        assert environ["OMP_NUM_THREADS"] == "1" and environ["PYTHONUNBUFFERED"] == "1"  # the entry's cpus: 1
        os.kill(proc.pid, signal.SIGTERM)
        sent = time.monotonic()
        assert proc.wait(30) == 128 + signal.SIGTERM
        assert time.monotonic() - sent < 10  # the run ended on SIGTERM, not on SIGKILL after the 20 s grace
        assert in_session(child) == set() and in_session(proc.pid) == set()
    finally:
        kill_all(proc, seen)  # after the checks: what a failed one left alive
    assert run.result() is None


def bad_suites(folder: Path) -> dict:
    entries = {
        "structure": [{"spec": "tiny.json", "seed": [13]}],
        "spec": [{**ENTRY, "configs": {"a": ["trainer.optimizer.lrr=1"]}}],
        "run_of": [{"spec": "tiny.json", "seeds": [13]},
                   {"spec": "tiny.json", "name": "reader", "seeds": [13], "overrides": {"trainer.optimizer.lr": 0.02},
                    "ext_vars": {"x": {"run_of": "tiny"}}}],
    }
    paths = {}
    for name, listed in entries.items():
        paths[name] = folder / f"bad_{name}.json"
        paths[name].write_text(json.dumps({"entries": listed}), encoding="utf-8")
    return paths


@pytest.mark.parametrize("case, args, message", [
    ("missing", [], "nope.json: no such suite file"),
    ("structure", [], "entries[0].seed: unknown key (did you mean 'seeds'?)"),
    ("spec", [], "entries[0].configs.a: tiny.json: override trainer.optimizer.lrr"),
    ("run_of", [], "runs that read other runs' directories (run_of) need multigrain suite: reader seed=13"),
    ("only", ["--only", "zzz"], "--only 'zzz': no entry of"),
    ("override twice", ["-o", "seed=1", "-o", "seed=2"], "override seed: given twice (1 and 2); give it once"),
], ids=["missing", "structure", "spec", "run_of", "only", "override twice"])
def test_a_bad_suite_or_selection_is_one_message_exit_2_and_nothing_started(tiny, tmp_path, capsys, case, args,
                                                                               message):
    paths = bad_suites(tiny.dir)
    suite = {"missing": tiny.dir / "nope.json", "only": tiny.suite,
             "override twice": tiny.suite}.get(case) or paths[case]
    runs_dir, handler = tmp_path / "runs", signal.getsignal(signal.SIGTERM)
    assert suite_processes.main([str(suite), "--runs-dir", str(runs_dir), *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    first, *rest = captured.err.rstrip("\n").split("\n")
    assert first.startswith("error: " if case != "run_of" else f"{suite}: ") and "Traceback" not in captured.err
    assert first.count(str(suite)) == 1  # the file named once
    assert message in captured.err
    assert all(line.startswith("  ") for line in rest)  # one report: any further line is one of its problems
    assert not runs_dir.exists()
    assert signal.getsignal(signal.SIGTERM) is handler  # refused before the driver's SIGTERM handler is set
