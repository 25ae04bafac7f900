"""End to end through the CLI: train -> MLflow -> leaderboard, evaluate, predict; light start-up."""
import json
import subprocess
import sys
import time

from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA, ROOT, run_cli


def test_import_and_help_are_light():
    code = ("import sys, multigrain, multigrain.platform.cli as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'ray', 'mlflow', 'transformers') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "train" in out.stdout and "leaderboard" in out.stdout


def test_train_track_leaderboard_evaluate_predict(tmp_path):
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 16)
    dev = copy_sentences(src, tmp_path / "dev.bmes", 6)
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, dev, dev, epochs=2, task="ner", grad_clipping=5.0)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = run_cli("train", "spec.json", "-s", "run1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["finished"] and 0 <= result["test"]["f1"] <= 1

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("ner/tiny")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    tags = run.data.tags
    for key in ("task", "model", "encoder", "spec_hash", "git_commit"):
        assert tags[key], key
    assert tags["leaderboard"] == "true" and tags["spec_hash"] == result["spec_hash"]
    assert tags["model"] == "tagger" and tags["encoder"] == "bilstm"
    assert run.data.params["model.encoder.hidden_size"] == "16"
    assert abs(run.data.metrics["test_f1"] - result["test"]["f1"]) < 1e-9
    history = client.get_metric_history(run.info.run_id, "validation_f1")
    assert [m.step for m in history] == [1, 2]
    # training batches are not decoded: the epoch's training record is its loss, no zero F1
    assert "train_loss" in run.data.metrics and not any(k.startswith("train_f1") for k in run.data.metrics)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.json", "metrics.json", "test_report.json"} <= artifacts

    board = run_cli("leaderboard", "ner/tiny", "--json", cwd=tmp_path)
    assert board.returncode == 0, board.stderr
    rows = json.loads(board.stdout)
    assert len(rows) == 1 and rows[0]["rank"] == 1 and rows[0]["spec_hash"] == result["spec_hash"]
    pretty = run_cli("leaderboard", "ner", cwd=tmp_path)
    assert result["spec_hash"][:12] in pretty.stdout

    ev = run_cli("evaluate", "run1", dev, cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    assert abs(json.loads(ev.stdout)["f1"] - result["test"]["f1"]) < 1e-9

    (tmp_path / "in.jsonl").write_text('{"text": "张三在北京大学读书"}\n{"chars": ["上", "海"]}\n', encoding="utf-8")
    pred = run_cli("predict", "run1", "in.jsonl", cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    lines = [json.loads(x) for x in pred.stdout.splitlines()]
    assert [len(x["tags"]) for x in lines] == [9, 2] and lines[0]["text"] == "张三在北京大学读书"

    (tmp_path / "bad.jsonl").write_text('{"text": "好"}\n{"text": \n', encoding="utf-8")
    bad = run_cli("predict", "run1", "bad.jsonl", cwd=tmp_path)
    assert bad.returncode != 0 and "bad.jsonl:2: bad JSON" in bad.stderr


def test_evaluate_missing_archive(tmp_path):
    out = run_cli("evaluate", tmp_path / "nope", tmp_path / "x", cwd=tmp_path)
    assert out.returncode != 0 and "not a multigrain run directory" in out.stderr


def test_log_replays_runs_trained_without_tracking(tmp_path):
    """``train --no-tracking`` (a machine without the store) writes no MLflow run; ``log`` adds it
    later with the run's own metrics and curves, after checking every directory first."""
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 12)
    dev = copy_sentences(src, tmp_path / "dev.bmes", 4)
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, dev, dev, epochs=2, task="ner", grad_clipping=5.0)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = run_cli("train", "spec.json", "-s", "run1", "--no-tracking", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "run1" / "metrics.json").read_text())
    assert not (tmp_path / "mlruns.db").exists()
    assert result["device"].startswith("CPU only (")  # where it trained, kept for the results tables
    assert result["git_commit"] == "unknown"  # tmp_path is no git checkout
    # as if trained in a checkout at commit abc123 on another machine: the MLflow run gets that commit
    (tmp_path / "run1" / "metrics.json").write_text(json.dumps({**result, "git_commit": "abc123"}))

    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    (tmp_path / "half" / "metrics.json").write_text('{"finished": false}')
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{}")
    (tmp_path / "broken" / "metrics.json").write_text('{"finished": ')
    for bad, message in (("nowhere", "nowhere: not a run directory (missing"), ("half", "half: the run is not finished"),
                         ("broken", "broken: unreadable run files")):
        refused = run_cli("log", "run1", bad, cwd=tmp_path)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert not (tmp_path / "mlruns.db").exists()  # run1 was not logged either

    logged = run_cli("log", "run1", cwd=tmp_path)
    assert logged.returncode == 0, logged.stderr
    again = run_cli("log", "run1", cwd=tmp_path)
    assert again.returncode == 0 and "run1: already logged as MLflow run" in again.stdout, again.stderr
    spelt_otherwise = run_cli("log", "./run1/", str(tmp_path / "run1"), cwd=tmp_path)
    assert spelt_otherwise.stdout.count("already logged as MLflow run") == 2, spelt_otherwise.stdout
    assert "Warning" not in again.stderr, again.stderr  # no library's notes to itself (pydantic's on importing mlflow)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    runs = client.search_runs([client.get_experiment_by_name("ner/tiny").experiment_id])
    assert len(runs) == 1 and runs[0].data.tags["spec_hash"] == result["spec_hash"]
    assert runs[0].data.tags["git_commit"] == "abc123"
    assert abs(runs[0].data.metrics["test_f1"] - result["test"]["f1"]) < 1e-9
    assert [m.step for m in client.get_metric_history(runs[0].info.run_id, "validation_f1")] == [1, 2]

    # two `log`s of one directory at once, into a fresh store: one logs it, the other finds it there
    from concurrent.futures import ThreadPoolExecutor

    from multigrain.platform.store import adding_runs

    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    with ThreadPoolExecutor(2) as pool:
        with adding_runs(fresh):  # both wait here, then go one after the other
            both = [pool.submit(run_cli, "log", "run1", "--tracking-uri", fresh, cwd=tmp_path) for _ in range(2)]
            time.sleep(3)
            assert not any(done.done() for done in both)  # waiting for the store
        outs = [done.result() for done in both]
    assert [o.returncode for o in outs] == [0, 0], [o.stderr for o in outs]
    assert sorted("already logged" in o.stdout for o in outs) == [False, True], [o.stdout for o in outs]
    client = MlflowClient(fresh)
    assert len(client.search_runs([client.get_experiment_by_name("ner/tiny").experiment_id])) == 1


def test_log_names_a_translators_test_sets_by_their_headline_metric():
    from multigrain.platform.commands.log import tested

    translator = {"leaderboard_metric": "bleu", "test_sets": {
        "tvsub": {"metrics": {"bleu": 0.7172, "chrf": 5.1}}, "wmt22": {"metrics": {"bleu": 0.0003}}}}
    assert tested(translator) == "test tvsub bleu 0.72, wmt22 bleu 0.00"
    assert tested({"test": {"f1": 0.9}}) == "test {'f1': 0.9}"
