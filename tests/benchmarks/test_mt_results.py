"""benchmarks/mt_results.py: the budget cuts it applies to the shipped specs, and the table it
writes (BLEU mean ± sample sd over seeds per test set, BiG minus Transformer), checked to the digit
with training replaced by a stub returning known scores."""
import json
import statistics
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import mt_results  # noqa: E402
import results_md  # noqa: E402


def fake_bleu(encoder: str, seed: int, name: str) -> float:
    return 20.0 + (1.5 if encoder == "big" else 0.0) + (seed - 13) * 0.7 + len(name) / 10


def fake_result(spec: dict, run_dir, spec_hash: str = "h") -> dict:
    """A finished run of ``spec``: BLEU ``fake_bleu`` on each of its test sets."""
    encoder = spec["model"]["encoder"]["type"]
    sets = {name: {"data": entry["path"], "examples": 100,
                   "metrics": {"bleu": fake_bleu(encoder, spec["seed"], name), "chrf": 40.0},
                   "tracking_tags": {"sacrebleu_signature": f"nrefs:{mt_results.REFERENCES[name]}|case:lc"}}
            for name, entry in spec["test_sets"].items()}
    return {"finished": True, "run_dir": str(run_dir), "spec_hash": spec_hash, "training_seconds": 120.0 * spec["seed"],
            "epochs_completed": 1, "best_epoch": 1, "device": "CPU Fake", "validation": {"bleu": 10.0},
            "test_sets": sets}


@pytest.fixture
def fake_training(monkeypatch):
    calls = []

    def train_or_reuse(spec, run_dir, tracking_uri=None, source=None, track=True):
        calls.append((spec["model"]["encoder"]["type"], spec["seed"], str(run_dir)))
        return fake_result(spec, run_dir)

    monkeypatch.setattr(results_md, "train_or_reuse", train_or_reuse)
    monkeypatch.setattr(mt_results, "count_parameters",
                        lambda spec, run_dir: 1000 if spec["model"]["encoder"]["type"] == "transformer" else 1100)
    return calls


def test_budget_cuts_keep_the_dev_set_whole(monkeypatch):
    monkeypatch.chdir(ROOT)
    spec = mt_results.prepared_spec("big", "small", 14, epochs=2, max_train_pairs=2000, max_test_sentences=50)
    assert spec["seed"] == 14 and spec["trainer"]["num_epochs"] == 2
    assert spec["dataset_reader"]["max_instances"] == 2000
    assert "max_instances" not in spec["validation_dataset_reader"]
    assert spec["validation_dataset_reader"]["lattice_builder"] == {"type": "lexicon"}
    assert all(entry["reader"]["max_instances"] == 50 for entry in spec["test_sets"].values())
    plain = mt_results.prepared_spec("transformer", "small", 13)
    assert "validation_dataset_reader" not in plain and "max_instances" not in plain["dataset_reader"]


def test_table_of_two_encoders_and_two_seeds(fake_training, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    results, out = tmp_path / "RESULTS.md", tmp_path / "mt.json"
    results.write_text("# Benchmark results\n\n## Other\nkept\n", encoding="utf-8")
    code = mt_results.main(["--seeds", "2", "--runs-dir", str(tmp_path / "runs"), "--results", str(results),
                            "--out", str(out)])
    assert code == 0 and sorted((e, s) for e, s, _ in fake_training) == \
           [("big", 13), ("big", 14), ("transformer", 13), ("transformer", 14)]
    text = results.read_text(encoding="utf-8")
    assert "## Other\nkept" in text and mt_results.SECTION in text
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    for encoder, params in (("transformer", "1,000"), ("big", "1,100")):
        cells = [c.strip() for c in lines[encoder].strip("|").split("|")]
        assert cells[:5] == [encoder, "2", params, "27.00 ± 1.41", "10.00 ± 0.00"]
        for name, cell in zip(mt_results.TEST_SETS, cells[5:]):
            values = [fake_bleu(encoder, s, name) for s in (13, 14)]
            assert cell == f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"
    difference = [c.strip() for c in lines["BiG − Transformer (means)"].strip("|").split("|")][5:]
    assert difference == ["+1.50"] * 6
    assert "tvsub (3 refs)" in text and "wmt22 (2 refs)" in text and "nrefs:3|case:lc" in text
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert len(saved["runs"]) == 4 and saved["settings"]["train_pairs"] == "all 429,501"


def test_a_smoke_test_needs_its_own_files(capsys):
    with pytest.raises(SystemExit) as caught:
        mt_results.main(["--max-test-sentences", "10"])
    assert caught.value.code == 2 and "smoke test" in capsys.readouterr().err


def test_parts_run_apart_make_one_table(fake_training, tmp_path, monkeypatch):
    """Seed 13 on every test set, seed 14 in another process on three: ``--combine`` makes one
    table whose cells say which seeds a set's mean is over."""
    monkeypatch.chdir(ROOT)
    results = tmp_path / "RESULTS.md"
    common = ["--runs-dir", str(tmp_path / "runs"), "--results", str(results)]
    assert mt_results.main(["--seeds", "1", *common, "--out", str(tmp_path / "a.json")]) == 0
    assert mt_results.main(["--first-seed", "14", "--seeds", "1", "--test-sets", "tatoeba", "tvsub", "wmt22",
                            *common, "--out", str(tmp_path / "b.json")]) == 0
    assert sorted((e, s) for e, s, _ in fake_training) == [("big", 13), ("big", 14), ("transformer", 13),
                                                            ("transformer", 14)]
    assert mt_results.main(["--combine", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--results",
                            str(results), "--out", str(tmp_path / "all.json")]) == 0
    lines = {line.split(" | ")[0].strip("| "): [c.strip() for c in line.strip("|").split("|")]
             for line in results.read_text(encoding="utf-8").splitlines() if line.startswith("| ")}
    cells = dict(zip(mt_results.TEST_SETS, lines["big"][5:]))
    both = [fake_bleu("big", s, "tvsub") for s in (13, 14)]
    assert cells["tvsub"] == f"{statistics.fmean(both):.2f} ± {statistics.stdev(both):.2f}"
    assert cells["wmt18"] == f"{fake_bleu('big', 13, 'wmt18'):.2f} (seed 13)"
    assert lines["big"][1] == "2"
    saved = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert saved["settings"]["seeds"] == "13, 14" and len(saved["runs"]) == 4
    # another heading: a second table beside the first (a GPU's runs beside the CPU's)
    before = results.read_text(encoding="utf-8")
    assert mt_results.main(["--combine", str(tmp_path / "b.json"), "--results", str(results), "--out",
                            str(tmp_path / "gpu.json"), "--section", "## Translation on a GPU"]) == 0
    after = results.read_text(encoding="utf-8")
    assert after.startswith(before.rstrip("\n")) and after.count("| big | 1 |") == 1
    assert after.split("## Translation on a GPU")[1].count("| big |") == 1
    # parts of different budgets are not one table
    other = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    other["settings"]["epochs"] = 9
    (tmp_path / "c.json").write_text(json.dumps(other), encoding="utf-8")
    assert mt_results.main(["--combine", str(tmp_path / "a.json"), str(tmp_path / "c.json"), "--results",
                            str(results), "--out", str(tmp_path / "x.json")]) == 2


def test_no_tracking_trains_without_mlflow(fake_training, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    tracked = []
    fake = results_md.train_or_reuse
    monkeypatch.setattr(results_md, "train_or_reuse",
                        lambda *a, track=True, **k: tracked.append(track) or fake(*a, track=track, **k))
    for flags, expected in (([], True), (["--no-tracking"], False)):
        tracked.clear()
        assert mt_results.main(["--seeds", "1", "--only", "big", *flags, "--runs-dir", str(tmp_path / "runs"),
                                "--results", str(tmp_path / "R.md"), "--out", str(tmp_path / "mt.json")]) == 0
        assert tracked == [expected]


def test_a_set_scored_after_training_scores_as_it_would_have_in_training(tmp_path, monkeypatch):
    """A tiny translator trained with one test set, then scored on a set its spec does not name
    (the same file): the same metrics as the in-training evaluation; the second time from the
    kept file, without decoding."""
    from multigrain.platform.runs import Run

    monkeypatch.chdir(ROOT)
    spec = mt_results.tiny_tatoeba_spec(40, 8, 12)
    run_dir = tmp_path / "run"
    result = Run(spec, run_dir).train_or_reuse(logger=None)
    with_sets = json.loads(json.dumps(spec))
    with_sets["test_sets"]["again"] = with_sets["test_sets"]["tatoeba"]

    scored = mt_results.score_after_training(run_dir, with_sets, ["again"])
    trained = result["test_sets"]["tatoeba"]
    assert scored["again"]["metrics"] == trained["metrics"] and scored["again"]["examples"] == 12
    assert scored["again"]["tracking_tags"] == trained["tracking_tags"]
    assert (run_dir / "scored_after_training.json").exists()
    monkeypatch.setattr("multigrain.platform.training.evaluate", lambda *a, **k: pytest.fail("decoded again"))
    assert mt_results.score_after_training(run_dir, with_sets, ["again"]) == scored


def test_sets_scored_after_training_are_named_under_the_table(fake_training, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    later = {}

    def score_after_training(run_dir, spec_with_sets, names):
        later[str(run_dir)] = sorted(spec_with_sets["test_sets"])
        return {name: {"data": "x", "examples": 5, "metrics": {"bleu": 0.5, "chrf": 9.0}, "tracking_tags": {}}
                for name in names}

    monkeypatch.setattr(mt_results, "score_after_training", score_after_training)
    results = tmp_path / "RESULTS.md"
    assert mt_results.main(["--seeds", "1", "--test-sets", "tvsub", "--score-sets", "tvsub", "wmt22",
                            "--runs-dir", str(tmp_path / "runs"), "--results", str(results),
                            "--out", str(tmp_path / "a.json")]) == 0
    assert all(sets == ["tvsub", "wmt22"] for sets in later.values()) and len(later) == 2
    text = results.read_text(encoding="utf-8")
    assert "| 0.50 |" in text and "Scored after training" in text and ": wmt22." in text
    saved = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert [r["scored_after_training"] for r in saved["runs"]] == [["wmt22"], ["wmt22"]]


def test_variants_are_issue_40s_recipe_specs_and_their_cuts(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert mt_results.spec_path("big", "small", "gpu").name == "tvsub_big_small_gpu.jsonnet"
    assert mt_results.spec_path("transformer", "small").name == "tvsub_transformer_small.jsonnet"
    assert mt_results.spec_path("transformer", "base").name == "tvsub_transformer.jsonnet"
    cpu = mt_results.prepared_spec("big", "small", 13, variant="cpu")
    assert cpu["dataset_reader"]["max_instances"] == 180_000 and set(cpu["test_sets"]) == {"tvsub", "wmt22"}
    cut = mt_results.prepared_spec("big", "small", 13, max_train_pairs=300, variant="cpu", max_dev_sentences=20)
    assert cut["dataset_reader"]["max_instances"] == 300
    assert cut["validation_dataset_reader"]["max_instances"] == 20  # only as asked, never the training cut
    assert "max_instances" not in mt_results.prepared_spec("big", "small", 13, max_train_pairs=300,
                                                           variant="cpu")["validation_dataset_reader"]
    gpu = mt_results.prepared_spec("transformer", "small", 13, variant="gpu")
    assert gpu["data_loader"]["max_tokens"] == 8192 and gpu["model"]["decoder"]["pre_norm"] is True
    run_dir = mt_results.run_dir_for("big", cpu, "runs/mt", "small", None, "cpu")
    assert run_dir.name.startswith("tvsub_big-small_cpu-e2-")


def test_the_cpu_variant_records_what_each_run_cost(fake_training, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "mt_cpu40.json"
    code = mt_results.main(["--variant", "cpu", "--seeds", "1", "--only", "big", "--runs-dir", str(tmp_path / "runs"),
                            "--results", str(tmp_path / "R.md"), "--out", str(out)])
    assert code == 0 and "tvsub_big-small_cpu-e2-seed13-" in fake_training[0][2]
    saved = json.loads(out.read_text(encoding="utf-8"))
    run = saved["runs"][0]
    assert set(run["bleu"]) == {"tvsub", "wmt22"}
    assert run["pairs_seen"] == 180_000 * 1 and run["updates"] is None  # the stub completes 1 epoch; token batches vary in size
    assert run["cpu_seconds"] >= 0 and len(run["load_average"]["before"]) == 3
    assert saved["settings"]["train_pairs"] == "180,000" and saved["settings"]["size"] == "small (cpu recipe)"


def test_the_table_of_a_suites_finished_runs_trains_nothing(fake_training, tmp_path, monkeypatch):
    """``--suite``: the table of the translation suite's runs finished in their run directories
    (``multigrain suite`` trained them); an unfinished one is left out, nothing is trained."""
    from multigrain.platform import suite as suites

    monkeypatch.chdir(ROOT)
    path = ROOT / "jsonnet_configs" / "suites" / "mt.jsonnet"
    runs = suites.plan(path, suites.load_suite(path), tmp_path / "runs", check_data_paths=False)
    for r in runs:
        if (r.spec["model"]["encoder"]["type"], r.seed) != ("transformer", 15):
            Path(r.run_dir).mkdir(parents=True)
            Path(r.run_dir, "metrics.json").write_text(json.dumps(fake_result(r.spec, r.run_dir, r.spec_hash)))
    results, out = tmp_path / "RESULTS.md", tmp_path / "mt.json"
    assert mt_results.main(["--suite", str(path), "--runs-dir", str(tmp_path / "runs"), "--results", str(results),
                            "--out", str(out)]) == 0
    assert fake_training == []
    lines = {line.split(" | ")[0].strip("| "): [c.strip() for c in line.strip("|").split("|")]
             for line in results.read_text(encoding="utf-8").splitlines() if line.startswith("| ")}
    assert lines["transformer"][:3] == ["transformer", "2", "1,000"] and lines["big"][:3] == ["big", "3", "1,100"]
    tvsub = [fake_bleu("big", s, "tvsub") for s in (13, 14, 15)]
    assert f"{statistics.fmean(tvsub):.2f} ± {statistics.stdev(tvsub):.2f}" in lines["big"]
    settings = json.loads(out.read_text(encoding="utf-8"))["settings"]
    assert settings["size"] == "small" and settings["seeds"] == "13, 14, 15" and settings["argv"].startswith("--suite")
    assert f"Suite: `multigrain suite {path} --only 'tvsub_*_small'`." in results.read_text(encoding="utf-8")

    # a configuration's runs (the entries' [160k-e1]): their own table, their own Suite: line
    assert mt_results.main(["--suite", str(path), "--config", "160k-e1", "--only", "big", "--runs-dir",
                            str(tmp_path / "runs"), "--results", str(results), "--out", str(out)]) == 0
    text = results.read_text(encoding="utf-8")
    assert f"Suite: `multigrain suite {path} --only 'tvsub_big_small [160k-e1]'`." in text
    assert "| big | 3 |" in text and "| transformer |" not in text
    assert json.loads(out.read_text(encoding="utf-8"))["settings"]["epochs"] == 1
