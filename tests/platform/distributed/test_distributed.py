"""Ray sweeps, GPU placement, worker faults, --resume, the Serve service and the evaluator pool.

One local Ray (2 CPUs, one *declared* GPU so placement can be checked without CUDA) is shared
by the module; every trial is a 1-epoch BiLSTM-CRF on 12 sentences.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from multigrain.platform.commands import main as cli_main
from multigrain.platform.ray.archives import check_archives
from multigrain.platform.ray.cluster import cluster_resources, patient_serve_defaults
from multigrain.platform.ray.evaluate import evaluator_pool
from multigrain.platform.ray.serve import start_service
from multigrain.platform.ray.sweep import Trial, expand_sweep, run_sweep, trial_resources
from multigrain.platform.ray.sweep_options import parse_grid, with_gpus_per_trial
from multigrain.platform.ray.sweep_report import summarize
from tests.conftest import ROOT, mlflow_runs, resume_tagger_spec, write_spec
from tests.platform.distributed.ray_head import free_port

LR_GRID = "trainer.optimizer.lr=[0.01,0.02]"


ADAM = {"type": "adam"}  # the trainer section a spec needs besides what a test varies


@pytest.fixture(scope="module")
def ray_local():
    import ray

    patient_serve_defaults()
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False,
             object_store_memory=80 * 1024 * 1024, log_to_driver=False)
    yield
    try:
        from ray import serve

        serve.shutdown()
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A module working directory (relative runs/ and mlruns.db land here)."""
    path = tmp_path_factory.mktemp("distributed")
    old = os.getcwd()
    os.chdir(path)
    yield path
    os.chdir(old)


@pytest.fixture(scope="module")
def swept(ray_local, workdir):
    """``multigrain sweep`` of 2 learning rates x 2 seeds, through the CLI, on the shared Ray."""
    spec_path = write_spec(workdir, resume_tagger_spec(workdir / "data"))
    uri = f"sqlite:///{workdir / 'mlruns.db'}"
    code = cli_main(["sweep", spec_path, "--grid", LR_GRID, "--seeds", "2", "--tracking-uri", uri,
                     "--resources", '{"num_cpus": 1, "num_gpus": 0}'])
    return {"code": code, "spec_path": spec_path, "uri": uri, "scratch_uri": f"sqlite:///{workdir / 'scratch.db'}"}


# ---------------------------------------------------------------------------- light start-up (no Ray)
HEAVY = {"torch", "ray", "mlflow"}
RAY_COMMANDS = ["sweep", "suite", "serve", "evaluate-all", "submit", "jobs"]


def imported_top_level(*argv: str) -> tuple[set, str]:
    """The top-level packages a fresh ``python -X importtime -m multigrain.platform.cli ARGV``
    imported (from the import-time report on stderr), and its stdout."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "multigrain.platform.cli", *argv],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in out.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "multigrain" in names and "argparse" in names  # the report was read
    return names, out.stdout


@pytest.mark.parametrize("command", [None, *RAY_COMMANDS])
def test_help_of_the_cli_and_each_ray_command_imports_no_torch_ray_mlflow(command):
    names, stdout = imported_top_level(*([command] if command else []), "--help")
    assert not names & HEAVY, sorted(names & HEAVY)
    if command:
        assert stdout.startswith(f"usage: multigrain {command} ")
    else:
        assert all(f"    {c} " in stdout for c in RAY_COMMANDS), stdout


def test_importing_the_ray_modules_imports_no_ray():
    code = ("import sys\n"
            "import multigrain.platform.ray\n"
            "from multigrain.platform.ray import archives, cluster, evaluate, jobs, serve, sweep, sweep_report, train\n"
            "from multigrain.platform.commands import evaluate_all, interrupt, submit\n"
            "from multigrain.platform.commands import jobs as jobs_command, serve as serve_command\n"
            "from multigrain.platform.commands import sweep as sweep_command\n"
            "print(sorted(m for m in ('torch', 'ray', 'mlflow', 'rich', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- planning (no Ray)
def test_grid_expansion_and_identities(tmp_path):
    spec = resume_tagger_spec(tmp_path)
    trials = expand_sweep(spec, parse_grid([LR_GRID, "model.encoder.hidden_size=[8,12]"]), 3, "tiny",
                          tmp_path / "runs")
    assert len(trials) == 2 * 2 * 3
    assert {t.seed for t in trials} == {7, 8, 9}
    assert {(t.spec["trainer"]["optimizer"]["lr"], t.spec["model"]["encoder"]["hidden_size"]) for t in trials} == {
        (0.01, 8), (0.01, 12), (0.02, 8), (0.02, 12)}
    assert len({t.spec_hash for t in trials}) == 12
    from multigrain.platform.specs import spec_hash

    for t in trials:
        assert t.spec_hash == spec_hash(t.spec) and t.run_dir == str(tmp_path / "runs" / "tiny" / t.spec_hash[:8])
    assert spec["trainer"]["optimizer"]["lr"] == 0.01 and spec["seed"] == 7  # the base spec is untouched


def test_summary_ranks_by_mean_over_seeds():
    def trial(i, lr, seed, dev, test):
        t = Trial(i, (("trainer.optimizer.lr", lr),), seed, {"trainer": {"optimizer": ADAM, "validation_metric": "+f1"}},
                  f"{i:064x}", f"r{i}")
        t.result = {"validation": {"f1": dev, "loss": 1.0}, "test": {"f1": test, "loss": 2.0}}
        t.state = "FINISHED"
        return t

    devs = {0.01: [0.50, 0.70, 0.60], 0.02: [0.80, 0.60, 0.75]}
    tests = {0.01: [0.40, 0.45, 0.50], 0.02: [0.70, 0.72, 0.74]}
    trials = [trial(3 * k + s, lr, s, devs[lr][s], tests[lr][s]) for k, lr in enumerate(devs) for s in range(3)]
    rows = summarize(trials)
    assert [r["point"]["trainer.optimizer.lr"] for r in rows] == [0.02, 0.01]
    for row in rows:
        lr = row["point"]["trainer.optimizer.lr"]
        assert row["mean"] == pytest.approx(sum(devs[lr]) / 3)
        assert row["std"] == pytest.approx(statistics.stdev(devs[lr]))
        assert row["test"]["f1"] == (pytest.approx(sum(tests[lr]) / 3), pytest.approx(statistics.stdev(tests[lr])))
        assert "loss" not in row["test"] and row["completed"] == 3
    minus = [trial(i, t.point[0][1], t.seed, t.result["validation"]["f1"], 0.0) for i, t in enumerate(trials)]
    for t in minus:
        t.spec = {"trainer": {"optimizer": ADAM, "validation_metric": "-f1"}}
    assert [r["point"]["trainer.optimizer.lr"] for r in summarize(minus)] == [0.01, 0.02]


def test_trial_resources_rule():
    cpu_spec, pinned = {"trainer": {"optimizer": ADAM}}, {"trainer": {"optimizer": ADAM, "cuda_device": -1}}
    assert trial_resources(None, cpu_spec, {"CPU": 8}) == {"num_cpus": 1, "num_gpus": 0}
    assert trial_resources(None, cpu_spec, {"CPU": 8, "GPU": 2}) == {"num_cpus": 1, "num_gpus": 1}
    assert trial_resources(None, pinned, {"CPU": 8, "GPU": 2}) == {"num_cpus": 1, "num_gpus": 0}
    assert trial_resources({"num_cpus": 2, "num_gpus": 0.5}, cpu_spec, {"CPU": 8}) == {"num_cpus": 2,
                                                                                        "num_gpus": 0.5}
    # --gpus-per-trial: the same as --resources num_gpus, also for a spec pinned to the CPU
    assert trial_resources(with_gpus_per_trial(None, 0.25), pinned, {"CPU": 8, "GPU": 1}) == {"num_cpus": 1,
                                                                                             "num_gpus": 0.25}
    assert with_gpus_per_trial({"num_cpus": 2}, 2) == {"num_cpus": 2, "num_gpus": 2}
    assert with_gpus_per_trial({"num_cpus": 2}, None) == {"num_cpus": 2}


def test_a_quiet_sweep_prints_its_status_every_interval_and_each_running_trials_new_progress_line():
    from multigrain.platform.ray.sweep import Trial
    from multigrain.platform.ray.sweep_report import STATUS_EVERY, QuietReport

    now = [0.0]
    printed = []
    report = QuietReport(printed.append, clock=lambda: now[0])
    trials = [Trial(i, (("trainer.optimizer.lr", lr),), 13, {}, "h", f"runs/{i}") for i, lr in enumerate([0.01, 0.02])]
    trials[0].state, trials[0].progress = "RUNNING", "epoch 1/2: 5/20 batches (25.0%) | elapsed 30.0s"
    trials[1].state = "QUEUED"
    two_lrs = Trial(2, (("trainer.optimizer.parameter_groups.0.1.lr", 2e-4), ("trainer.optimizer.lr", 3e-3)), 13, {},
                    "h", "runs/2")
    assert two_lrs.label == "1.lr=0.0002, optimizer.lr=0.003 seed=13"  # keys ending alike told apart
    report(trials)
    assert printed == ["sweep [0.0 min] 0/2 ended, 1 running, 1 queued",
                       "  [0] lr=0.01 seed=13: epoch 1/2: 5/20 batches (25.0%) | elapsed 30.0s"]
    now[0] = STATUS_EVERY / 2
    report(trials)  # nothing changed, too soon
    assert len(printed) == 2
    now[0] = STATUS_EVERY + 1
    report(trials)  # the interval: the status again, not the same progress line
    assert printed[2:] == ["sweep [0.4 min] 0/2 ended, 1 running, 1 queued"]
    trials[0].state, trials[1].state, trials[1].progress = "FINISHED", "RUNNING", "epoch 1/2: 1/20 batches (5.0%)"
    report(trials)
    assert printed[3:] == ["[0] lr=0.01 seed=13: FINISHED", "sweep [0.4 min] 1/2 ended, 1 running, 0 queued",
                           "  [1] lr=0.02 seed=13: epoch 1/2: 1/20 batches (5.0%)"]


@pytest.mark.parametrize("argv, message", [
    (["--grid", "trainer.optimizr.lr=[0.1,0.2]"], "--grid trainer.optimizr.lr: trainer has no key 'optimizr' "
                                                   "(did you mean 'optimizer'?)"),
    (["--grid", "trainer.optimizer.lr=0.1,0.2"], "is not a JSON list"),
    (["--grid", "trainer.optimizer.lr=[]"], "non-empty JSON list"),
    (["--grid", LR_GRID, "-o", 'model.encoder.hidden_size="8x"'], 'model.encoder.hidden_size: expected int, got "8x"'),
    (["--grid", LR_GRID, "-o", "train_data_path=missing.bmes"], "train_data_path: file not found: missing.bmes"),
    (["--grid", LR_GRID, "--address", "127.0.0.1:{port}"], "cannot reach a Ray cluster there"),
    (["--grid", LR_GRID, "--resources", '{"num_gpu": 1}'], "unknown key 'num_gpu'"),
    (["--grid", LR_GRID, "--gpus-per-trial", "0"], "--gpus-per-trial 0.0: expected a number of GPUs more than 0"),
    (["--grid", LR_GRID, "--gpus-per-trial", "nan"], "--gpus-per-trial nan: expected a number of GPUs more than 0"),
    (["--grid", LR_GRID, "--gpus-per-trial", "1.5"], "--gpus-per-trial 1.5: above 1 it must be a whole number"),
    (["--grid", LR_GRID, "--gpus-per-trial", "0.5", "--resources", '{"num_gpus": 0.5}'],
     "--gpus-per-trial and --resources num_gpus both set: give one"),
])
def test_bad_sweeps_fail_before_scheduling(tmp_path, monkeypatch, capsys, argv, message):
    import ray

    monkeypatch.chdir(tmp_path)
    spec_path = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    argv = [a.replace("{port}", str(free_port())) for a in argv]
    started = ray.is_initialized()
    code = cli_main(["sweep", spec_path, "--tracking-uri", f"sqlite:///{tmp_path}/m.db", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert err.count("error:") == 1
    assert ray.is_initialized() == started  # Ray was not even started
    assert not (tmp_path / "runs").exists() and not (tmp_path / "m.db").exists()


def test_infeasible_gpu_request_fails_before_scheduling(ray_local, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec_path = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    code = cli_main(["sweep", spec_path, "--grid", LR_GRID, "--resources", '{"num_gpus": 2}',
                     "--tracking-uri", f"sqlite:///{tmp_path}/m.db"])
    err = capsys.readouterr().err
    assert code == 2 and "asks for num_gpus=2 but the cluster has 1 GPU" in err, err
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------- sweeps on Ray
def test_sweep_of_four_trials_logs_four_runs(swept):
    assert swept["code"] == 0
    runs = mlflow_runs(swept["uri"])
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    spec = json.loads(Path(swept["spec_path"]).read_text())
    trials = expand_sweep(spec, parse_grid([LR_GRID]), 2, "tiny")
    assert {r.data.tags["spec_hash"] for r in runs} == {t.spec_hash for t in trials}
    for t in trials:
        metrics = json.loads((Path(t.run_dir) / "metrics.json").read_text())
        assert metrics["finished"] and metrics["spec_hash"] == t.spec_hash
        run = next(r for r in runs if r.data.tags["spec_hash"] == t.spec_hash)
        assert run.data.metrics["test_f1"] == pytest.approx(metrics["test"]["f1"])
        assert run.data.params["trainer.optimizer.lr"] == json.dumps(t.spec["trainer"]["optimizer"]["lr"])


def test_resume_runs_only_the_missing_trials(swept, capsys):
    before = {r.info.run_id for r in mlflow_runs(swept["uri"])}
    code = cli_main(["sweep", swept["spec_path"], "--grid", "trainer.optimizer.lr=[0.01,0.02,0.05]", "--seeds", "2",
                     "--resume", "--tracking-uri", swept["uri"], "--resources", '{"num_cpus": 1, "num_gpus": 0}'])
    out = capsys.readouterr().out
    assert code == 0 and "6 trials (3 grid points x 2 seeds), 4 already finished" in out
    runs = mlflow_runs(swept["uri"])
    new = [r for r in runs if r.info.run_id not in before]
    assert len(runs) == 6 and len(new) == 2
    assert {r.data.params["trainer.optimizer.lr"] for r in new} == {"0.05"}
    assert len({r.data.tags["spec_hash"] for r in runs}) == 6


def test_a_translation_spec_sweeps_like_any_spec(ray_local, workdir, tmp_path):
    """Each trial of a translator spec fits its subword model in its worker and logs BLEU/chrF
    (and the sacrebleu signature) to MLflow, as ``multigrain train`` does."""
    from tests.components.models.test_translator import spec_for, tatoeba_pairs
    from tests.conftest import DATA

    spec = spec_for(tatoeba_pairs(DATA, tmp_path, 20), epochs=1)
    spec["test_data_path"] = spec["train_data_path"]
    uri = f"sqlite:///{tmp_path / 'mt.db'}"
    code = cli_main(["sweep", write_spec(tmp_path, spec), "--grid", LR_GRID, "--tracking-uri", uri,
                     "--runs-root", str(tmp_path / "runs"), "--resources", '{"num_cpus": 1, "num_gpus": 0}'])
    assert code == 0
    runs = mlflow_runs(uri)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    for run_dir in (tmp_path / "runs" / "tiny").iterdir():
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["finished"] and (run_dir / "resources" / "target_subwords.json").is_file()
        run = next(r for r in runs if r.data.tags["spec_hash"] == metrics["spec_hash"])
        assert run.data.metrics["test_bleu"] == pytest.approx(metrics["test"]["bleu"])
        assert run.data.metrics["test_chrf"] == pytest.approx(metrics["test"]["chrf"])
        # Tatoeba's references are cased: the cased BLEU ranks the run, and its signature tags it
        assert run.data.tags["sacrebleu_signature"].startswith("nrefs:1|case:mixed|")
        assert run.data.tags["leaderboard_metric"] == "test_bleu_cased"


def test_gpu_placement_with_declared_gpu(ray_local, swept, tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    trials = expand_sweep(spec, [], 1, "tiny", tmp_path / "runs")
    options = trial_resources(None, spec, cluster_resources())
    assert options == {"num_cpus": 1, "num_gpus": 1}  # the cluster has a GPU: the trial asks for it
    run_sweep(trials, options, uri=swept["scratch_uri"], poll=0.2)
    placement = trials[0].result["placement"]
    assert trials[0].state == "FINISHED"
    assert placement["gpu_ids"] == ["0"] and placement["cuda_visible_devices"] == "0"


def test_fractional_gpus_run_four_trials_on_one_gpu_at_once(ray_local, swept, tmp_path):
    """``--gpus-per-trial 0.25`` on a Ray with one GPU (a logical one: this machine has none): the
    four trials hold the GPU together (Ray's free GPU reaches 0 with no trial waiting for it), in
    four processes, each seeing it as ``CUDA_VISIBLE_DEVICES=0``, and each trains on the CPU since
    torch here has no CUDA."""
    import ray
    import torch

    spec = resume_tagger_spec(tmp_path / "data")
    trials = expand_sweep(spec, parse_grid([LR_GRID]), 2, "tiny", tmp_path / "runs")
    options = trial_resources(with_gpus_per_trial({"num_cpus": 0.5}, 0.25), spec, cluster_resources())
    assert options == {"num_cpus": 0.5, "num_gpus": 0.25}
    free_gpu = []
    run_sweep(trials, options, uri=swept["scratch_uri"], poll=0.1,
              on_update=lambda ts: free_gpu.append(ray.available_resources().get("GPU", 0.0)))
    assert [t.state for t in trials] == ["FINISHED"] * 4, [t.error for t in trials]
    placements = [t.result["placement"] for t in trials]
    assert all(p["gpu_ids"] == ["0"] and p["cuda_visible_devices"] == "0" for p in placements), placements
    assert min(free_gpu) == 0.0 and len({p["pid"] for p in placements}) == 4
    assert not torch.cuda.is_available() and {t.result["device"].split()[0] for t in trials} == {"CPU"}
    assert ray.available_resources().get("GPU") == 1.0  # given back


def test_killed_worker_is_retried_and_no_run_is_lost(ray_local, workdir, tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    trials = expand_sweep(spec, [], 2, "tiny", tmp_path / "runs")
    killed = []

    def kill_first_attempt(ts):
        t = ts[0]
        if not killed and t.state == "RUNNING" and t.attempts == 1 and t.pid:
            os.kill(t.pid, signal.SIGKILL)
            killed.append(t.pid)

    uri = f"sqlite:///{tmp_path}/m.db"
    run_sweep(trials, {"num_cpus": 1, "num_gpus": 0}, max_retries=2, uri=uri, on_update=kill_first_attempt,
                poll=0.1)
    assert killed, "the trial finished before it could be killed"
    assert [t.state for t in trials] == ["FINISHED", "FINISHED"], [t.error for t in trials]
    assert trials[0].attempts == 2 and trials[0].result["placement"]["pid"] != killed[0]
    assert trials[1].attempts == 1
    # CPU trials on a cluster with a GPU: no GPU assigned, and the GPUs hidden from torch
    assert all(t.result["placement"]["gpu_ids"] == [] for t in trials)
    assert all(t.result["placement"]["cuda_visible_devices"] == "" for t in trials)
    runs = mlflow_runs(uri)
    assert sorted(r.data.tags["spec_hash"] for r in runs) == sorted(t.spec_hash for t in trials)


def test_trial_failure_is_reported_not_retried(ray_local, swept, tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    trials = expand_sweep(spec, [], 1, "tiny", tmp_path / "runs")
    Path(spec["train_data_path"]).write_text("", encoding="utf-8")  # valid path, no examples
    run_sweep(trials, {"num_cpus": 1, "num_gpus": 0}, uri=swept["scratch_uri"], poll=0.1)
    assert trials[0].state == "FAILED" and trials[0].attempts == 1
    assert trials[0].error == f"{spec['train_data_path']}: empty file: no examples"


# ---------------------------------------------------------------------------- serving and evaluation
def _post(url: str, body) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_local_workers_give_a_serve_proxy_time_to_start(ray_local, monkeypatch):
    import ray

    @ray.remote(num_cpus=0)
    def ready_timeout():
        return os.environ.get("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S")

    assert ray.get(ready_timeout.remote()) == "60"  # inherited from the driver: Serve's default is 5 s
    monkeypatch.setenv("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "7")
    patient_serve_defaults()
    assert os.environ["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "7"  # the user's value stays


@pytest.mark.parametrize("ingress", ["replica", "proxy"])
def test_serve_answers_like_in_process_predict(swept, ingress):
    """Both ways in: the replica's own HTTP front (a local Ray) and Serve's proxy (a cluster)."""
    from ray import serve

    from multigrain.platform.runs import Run

    run_dir = next(Path("runs/sweeps/tiny").iterdir())
    named = check_archives([str(run_dir)])
    port = free_port()
    try:
        urls = start_service(named, host="127.0.0.1", port=port, num_cpus=0.5, ingress=ingress)
        url = urls[run_dir.name]
        assert url == f"http://127.0.0.1:{port}/predict/{run_dir.name}"
        texts = ["张三，男，1962年出生，中国国籍。", "现任北京大学教授", "高级工程师"]
        status, body = _post(url, {"instances": [{"text": t} for t in texts]})
        assert status == 200
        archive = Run.open(run_dir).load_archive()
        lines = Path("queries.jsonl")
        lines.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
        expected = list(archive.predict_batches(archive.read_json_lines(str(lines))))
        assert body["predictions"] == json.loads(json.dumps(expected))
        status, body = _post(url, {"texts": texts})
        assert status == 400 and "instances" in body["error"]
    finally:
        serve.shutdown()


def test_evaluate_all_refuses_what_is_not_an_archive(tmp_path, capsys):
    code = cli_main(["evaluate-all", str(tmp_path), "--data", str(tmp_path / "none.bmes")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1
    assert f"{tmp_path}: not a multigrain run directory (no config.json)" in err and "none.bmes: file not found" in err


def test_evaluator_pool_matches_in_process_and_records_rows(swept, tmp_path, capsys):
    import ray

    from multigrain.platform.runs import Run
    from multigrain.platform.batching import DataLoaderConfig
    from multigrain.platform.experiment import batches_for
    from multigrain.platform.leaderboard import leaderboard
    from multigrain.platform.evaluation import evaluate

    run_dirs = sorted(str(p) for p in Path("runs/sweeps/tiny").iterdir())[:2]
    data = json.loads(Path(swept["spec_path"]).read_text())["train_data_path"]
    uri = f"sqlite:///{tmp_path}/m.db"
    code = cli_main(["evaluate-all", *run_dirs, "--data", data, "--num-cpus", "0.5", "--tracking-uri", uri, "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and [r["run_dir"] for r in rows] == [str(Path(p).resolve()) for p in run_dirs]
    for row in rows:
        archive = Run.open(row["run_dir"]).load_archive()
        instances = archive.read(data)
        expected = evaluate(archive.model, batches_for(archive.model, instances, DataLoaderConfig(batch_size=64), 0,
                                                       False), archive.device)
        assert row["examples"] == 12 and row["metrics"] == pytest.approx(expected)
    runs = mlflow_runs(uri)
    assert len(runs) == 2 and all(r.data.tags["leaderboard"] == "true" and r.data.tags["evaluated_on"] == data
                                  for r in runs)
    board = leaderboard("ner/tiny", uri, group_seeds=False)  # one row per evaluated archive
    assert {b["run_id"] for b in board} == {r["run_id"] for r in rows}
    assert {b["value"] for b in board} == {r["metrics"]["f1"] for r in rows}

    # an evaluator actor that dies is restarted and the call retried
    (actor,) = evaluator_pool(1, num_cpus=0.5, num_gpus=0)
    first = ray.get(actor.pid.remote())
    os.kill(first, signal.SIGKILL)
    again = ray.get(actor.evaluate.remote(rows[0]["run_dir"], data), timeout=120)
    assert again["pid"] != first and again["metrics"] == pytest.approx(rows[0]["metrics"])
    ray.kill(actor)
