"""benchmarks/lattice_bert.py --suite (``lattice_bert_suite.py``): the Lattice-BERT tables of the
suite's finished runs, nothing trained: the cells are the runs' metrics.json figures (mean ± sample
sd over seeds, in percent), what only lattice_bert.py measures is "–" and named where the runs lack
it, a run not finished is named and left out, none finished exits 2; the ``Suite:`` line selects
exactly the table's runs (as test_suites_cover_results.py reads it)."""
import json
import statistics
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import lattice_bert  # noqa: E402
import lattice_bert_suite  # noqa: E402
import results_md  # noqa: E402
from tests.benchmarks import test_suites_cover_results as cover  # noqa: E402

SUITE = ROOT / "jsonnet_configs" / "suites" / "lattice_bert.jsonnet"


def score(spec: dict, seed: int) -> float:
    """A fine-tuning's fake test score, different for every task, encoder, cut and seed."""
    vocab = spec["vocabulary"]["directory"]
    return round(0.3 + 0.01 * len(spec["dataset_reader"]["type"]) + (0.05 if "lattice" in vocab else 0.0)
                 + (0.03 if "mlm" in vocab else 0.0) + 0.02 * (seed - 13) + (0.1 if "b16" in vocab else 0.0), 6)


def fake_result(r) -> dict:
    out = {"finished": True, "spec_hash": r.spec_hash, "run_dir": r.run_dir, "training_seconds": 100.0 + r.seed,
           "seconds": 120.0 + r.seed, "device": "CPU Fake", "epochs_completed": r.spec["trainer"]["num_epochs"]}
    if r.spec["task"] == "pretrain":
        chars = r.spec["dataset_reader"]["max_chars"]
        out["validation"] = {"msp_accuracy": chars / 1e8, "sop_accuracy": 0.5, "segment_masked_accuracy": chars / 2e8,
                             "token_masked_accuracy": 0.25, "msp_loss": 7.0}
    else:
        metric = lattice_bert.HEADLINE[r.spec["task"]]
        out["test"] = {metric: score(r.spec, r.seed), "loss": 1.0}
    return out


def finish(runs_dir: Path, only: str, skip=lambda r: False) -> list:
    """The suite's runs ``only`` selects finished under ``runs_dir`` (but those ``skip`` picks)."""
    from multigrain.platform import suite as suites

    runs = suites.plan(SUITE, suites.load_suite(SUITE), runs_dir, only=only, check_data_paths=False)
    for r in runs:
        if not skip(r):
            Path(r.run_dir).mkdir(parents=True, exist_ok=True)
            Path(r.run_dir, "metrics.json").write_text(json.dumps(fake_result(r)), encoding="utf-8")
    return runs


@pytest.fixture
def no_training(monkeypatch):
    from multigrain.platform.runs import Run

    monkeypatch.setattr(results_md, "train_or_reuse", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(Run, "train_or_reuse", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(Run, "train", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.chdir(ROOT)


def cells(text: str) -> dict[str, list[str]]:
    return {line.strip("|").split("|")[0].strip(): [c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")}


def pct(values) -> str:
    return f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.stdev(values):.2f}"


def test_the_tables_are_the_runs_metrics(no_training, tmp_path):
    runs_dir = tmp_path / "runs"
    runs = finish(runs_dir, "* [4m-b16*")
    out, results = tmp_path / "lb.json", tmp_path / "RESULTS.md"
    # lattice_bert.py's own measurement kept in one run directory: its row shows it
    char = next(r for r in runs if r.entry == "char_bert_tiny [4m-b16]")
    Path(char.run_dir, "corpus_stats.json").write_text(json.dumps({"instances": 9, "chars": 3_999_991, "tokens": 4_229_134}))
    Path(char.run_dir, "throughput.json").write_text(json.dumps({"chars_per_s": 2564.2, "tokens_per_s": 2667.0}))
    argv = ["--suite", str(SUITE), "--budget", "4m-b16", "--runs-dir", str(runs_dir), "--out", str(out),
            "--results", str(results)]
    assert lattice_bert.main(argv) == 0
    text = results.read_text(encoding="utf-8")
    assert text.count("## Lattice-BERT at 4,000,000 characters, batches of 16") == 1
    assert "budget 4,000,000 characters x 1 epochs, batches of 16 pairs, CPU Fake;" in text
    table = cells(text)
    # pre-training: the run's time and dev accuracies; characters/tokens/speed only where measured
    assert table["lattice_bert"][1:] == ["–", "–", "113", "–", "–", "4.0", "2.0", "25.0", "50.0"]
    assert table["lattice_bert_mlm"][1:4] == ["–", "–", "113"]
    assert table["char_bert"][1:] == ["3,999,991", "4,229,134", "113", "2564", "2667", "4.0", "2.0", "25.0", "50.0"]
    assert ("Left out (–), not in the runs' directories: characters, lattice tokens, train chars/s and tokens/s of "
            "lattice_bert, lattice_bert_mlm: `benchmarks/lattice_bert.py --suite ... --measure` counts and times them") in text
    # fine-tuning: every cell the mean ± sd of its three runs' test scores
    fine = [r for r in runs if r.tag == "4m-b16-1k"]
    assert len(fine) == 3 * 4 * 3
    head = next(line for line in text.splitlines() if line.startswith("| task |"))
    assert head == "| task | metric | char_bert | lattice_bert | lattice_bert_mlm |"
    for task, stem in (("resume", "resume_ner"), ("chnsenticorp", "chnsenticorp"), ("thucnews", "thucnews"),
                       ("bq", "bq")):
        row = table[task]
        for column, model in ((2, "char_bert"), (3, "lattice_bert"), (4, "lattice_bert_mlm")):
            scores = [score(r.spec, r.seed) for r in fine if r.entry == f"{stem}_{model} [4m-b16-1k]"]
            assert len(scores) == 3 and row[column] == pct(scores), (task, model)
    assert [k for k in table if k in lattice_bert.FINETUNE] == ["resume", "chnsenticorp", "thucnews", "bq"]
    # the JSON is lattice_bert.py's report, its settings the runs' specs
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["setup"] == {"size": "tiny", "chars_budget": 4_000_000, "epochs": 1, "batch_size": 16,
                               "device": "CPU Fake", "seeds": 3, "finetune_epochs": 5, "finetune_lr": 0.0005,
                               "finetune_max_instances": 1000, "finetune_device": "CPU Fake"}
    assert report["pretraining"]["char_bert"]["run_dir"] == char.run_dir
    assert report["finetuning"]["bq"]["lattice_bert"]["seeds"]["14"]["accuracy"] == score(
        next(r for r in fine if r.entry == "bq_lattice_bert [4m-b16-1k]" and r.seed == 14).spec, 14)
    # the Suite: line selects exactly the table's runs (as the coverage test reads it)
    lines = text.splitlines()
    commands = cover.suite_commands(lines)
    assert [only for _, only in commands] == ["* [4m-b16*"]
    assert {r.entry for r in cover.selection_of(commands)} == {r.entry for r in runs if r.tag.startswith("4m-b16")}


def test_the_800k_tables_name_two_suite_calls_and_unfinished_runs(no_training, tmp_path, capsys):
    runs_dir = tmp_path / "runs"
    left = {("resume_ner_lattice_bert [1k]", 15), ("lattice_bert_tiny_mlm [800k]", 13)}
    runs = finish(runs_dir, "* [800k]", skip=lambda r: (r.entry, r.seed) in left)
    runs += [r for r in finish(runs_dir, "* [1k]", skip=lambda r: (r.entry, r.seed) in left) if r.tag == "1k"]
    results = tmp_path / "RESULTS.md"
    assert lattice_bert.main(["--suite", str(SUITE), "--budget", "800k", "--runs-dir", str(runs_dir),
                              "--out", str(tmp_path / "lb.json"), "--results", str(results)]) == 0
    printed = capsys.readouterr().out
    for entry, seed in left:
        run = next(r for r in runs if (r.entry, r.seed) == (entry, seed))
        assert f"{entry} seed={seed}: no finished run in {run.run_dir} (new); left out" in printed
    text = results.read_text(encoding="utf-8")
    assert "## Lattice-BERT\n" in text and "batches of 64 pairs" in text
    table = cells(text)
    assert "lattice_bert_mlm" not in table and "lattice_bert" in table and "char_bert" in table
    resume = [score(r.spec, r.seed) for r in runs if r.entry == "resume_ner_lattice_bert [1k]" and r.seed != 15]
    assert table["resume"] == ["resume", "f1", table["resume"][2], pct(resume)]
    assert "Not finished, left out: lattice_bert_tiny_mlm [800k] seed=13, resume_ner_lattice_bert [1k] seed=15." in text
    suite_line = next(line for line in text.splitlines() if line.startswith("Suite:"))
    assert [only for _, only in cover.suite_commands([suite_line])] == ["* [800k]", "* [1k]"]


def test_no_finished_run_exits_2(no_training, tmp_path, capsys):
    code = lattice_bert.main(["--suite", str(SUITE), "--budget", "2400k", "--runs-dir", str(tmp_path / "none"),
                              "--out", str(tmp_path / "lb.json"), "--results", str(tmp_path / "RESULTS.md")])
    assert code == 2
    captured = capsys.readouterr()
    assert "--budget 2400k: none of the suite's" in captured.err
    assert "lattice_bert_tiny [2400k] seed=13: no finished run in" in captured.out
    assert not (tmp_path / "RESULTS.md").exists() and not (tmp_path / "lb.json").exists()
    with pytest.raises(SystemExit, match=r"--budget 9k: no pre-training entry tagged \[9k\].*800k-b16"):
        lattice_bert_suite.main(["--suite", str(SUITE), "--budget", "9k", "--runs-dir", str(tmp_path)])


def test_measure_keeps_lattice_bert_pys_own_figures_in_the_run_directories(no_training, tmp_path, monkeypatch):
    """``--measure``: the corpus count and the throughput batches (lattice_bert.py's functions) of the
    budget's finished pre-trainings go into their run directories, and the table shows them."""
    import lattice_bert_report

    runs_dir = tmp_path / "runs"
    runs = finish(runs_dir, "* [2400k]", skip=lambda r: r.entry == "char_bert_tiny [2400k]")
    counted, timed = [], []

    def corpus_stats(spec):
        counted.append(spec["dataset_reader"]["max_chars"])
        return {"instances": 7, "chars": 2_399_983, "tokens": 3_524_591}

    def throughput(specs, batches):
        timed.append((sorted(specs), batches))
        return {name: {"batches": batches, "seconds": 1.0, "chars_per_s": 824.4, "tokens_per_s": 1213.0}
                for name in specs}

    monkeypatch.setattr(lattice_bert_report, "corpus_stats", corpus_stats)
    monkeypatch.setattr(lattice_bert, "throughput", throughput)
    results = tmp_path / "RESULTS.md"
    argv = ["--suite", str(SUITE), "--budget", "2400k", "--runs-dir", str(runs_dir), "--out", str(tmp_path / "lb.json"),
            "--results", str(results), "--measure", "--throughput-batches", "4"]
    assert lattice_bert.main(argv) == 0
    assert counted == [2_400_000] and timed == [(["lattice_bert"], 4)]  # the finished one only
    lb = next(r for r in runs if r.entry == "lattice_bert_tiny [2400k]")
    assert json.loads(Path(lb.run_dir, "throughput.json").read_text())["chars_per_s"] == 824.4
    table = cells(results.read_text(encoding="utf-8"))
    assert table["lattice_bert"][1:6] == ["2,399,983", "3,524,591", "113", "824", "1213"]
    assert "char_bert" not in table and "Left out (–)" not in results.read_text(encoding="utf-8")
    assert lattice_bert.main(argv) == 0 and counted == [2_400_000]  # counted once
