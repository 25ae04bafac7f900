"""benchmarks/lattice_bert.py renders its report (corpus, pre-training, fine-tuning over seeds) as
the RESULTS.md section; the numbers in the table are the report's, mean ± sample std in percent."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import lattice_bert  # noqa: E402


def test_section_tables():
    speed = {"chars_per_s": 300.0, "tokens_per_s": 450.0}
    dev = {"msp_accuracy": 0.5, "sop_accuracy": 0.75, "segment_masked_accuracy": 0.5, "token_masked_accuracy": 0.875}
    report = {
        "corpus": [{"source": "a.txt", "fields": "plain lines", "pieces": 2, "chars": 1000},
                   {"source": "b.tsv", "fields": ["chars"], "pieces": 3, "chars": 2500}],
        "setup": {"size": "tiny", "chars_budget": 1000, "epochs": 2, "device": "CPU"},
        "pretraining": {"lattice_bert": {"chars": 1000, "tokens": 1500, "epochs": 2, "training_seconds": 10.0,
                                         "throughput": speed, "dev": dev}},
        "finetuning": {"resume": {"lattice_bert": {"metric": "f1", "seeds": {"13": {"f1": 0.90}, "14": {"f1": 0.92}}},
                                  "char_bert": {"metric": "f1", "seeds": {"13": {"f1": 0.88}}}}},
        "workers": {"skipped": "no --workers here"},
    }
    text = "\n".join(lattice_bert.section(report))
    assert "| **total** | | 5 | **3,500** |" in text
    assert "| lattice_bert | 2,000 | 3,000 | 10 | 300 | 450 | 50.0 | 50.0 | 87.5 | 75.0 |" in text
    assert "| resume | f1 | 88.00 ± 0.00 | 91.00 ± 1.41 |" in text
    assert "no --workers here" in text
    assert "budget 1,000 characters x 2 epochs, CPU;" in text  # a report from before batch sizes were kept
    report["setup"]["batch_size"] = 16
    assert "budget 1,000 characters x 2 epochs, batches of 16 pairs, CPU;" in "\n".join(lattice_bert.section(report))


def test_the_cuda_checks_run_on_the_cpu():
    """benchmarks/cuda_checks.py (for a lent GPU) against the CPU itself: the script's beam and
    Lattice-BERT checks run and pass (device = CPU, so the comparisons are exact)."""
    import cuda_checks

    assert cuda_checks.main(["--device", "cpu", "--checks", "beam", "lattice_bert"]) == 0


def test_a_chars_budget_of_all_is_the_counted_corpus():
    import argparse

    import pytest

    from multigrain.components.readers.corpus import __doc__ as corpus_doc

    counted = int(corpus_doc.split("total")[1].split()[1].replace(",", ""))
    assert lattice_bert.chars_budget("all") == counted == lattice_bert.CORPUS_CHARS
    assert lattice_bert.chars_budget("800000") == 800_000
    for bad in ("0", "-5", "1e6", "many"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive number of characters or 'all'"):
            lattice_bert.chars_budget(bad)


def test_the_corpus_is_counted_once_per_pre_training_run(tmp_path, monkeypatch):
    """Counting builds every lattice of the corpus again (minutes at millions of characters): a
    pre-training run directory keeps the count, and a later call (fine-tuning, the report) reads it."""
    from argparse import Namespace

    counted = []

    def corpus_stats(spec):
        counted.append(spec["dataset_reader"]["max_chars"])
        return {"instances": 3, "chars": 40, "tokens": 52}

    def train(spec, run_dir, track, uri):
        run_dir.mkdir(parents=True, exist_ok=True)
        return {"spec_hash": "h", "device": "CPU", "training_seconds": 1.0, "validation": {"msp_accuracy": 0.1}}

    monkeypatch.setattr(lattice_bert, "corpus_stats", corpus_stats)
    monkeypatch.setattr(lattice_bert, "train", train)
    args = Namespace(models=["char_bert"], size="tiny", chars_budget=1000, epochs=1, batch_size=None,
                     mixed_precision=None, runs_dir=str(tmp_path), no_tracking=True, tracking_uri=None,
                     throughput_batches=0)
    first = lattice_bert.pretrain_all(args)
    second = lattice_bert.pretrain_all(args)
    assert counted == [1000]
    for report in (first, second):
        del report["char_bert"]["wall_seconds"]  # this call's clock
    assert first == second and first["char_bert"]["chars"] == 40 and first["char_bert"]["tokens"] == 52


def test_a_fitted_budget_is_what_the_probe_says_ends_in_time(monkeypatch):
    """``--chars-budget fit:SECONDS``: a probe of P characters per model; a run of B characters
    takes fixed + B / read rate + B / train rate, the slowest model deciding; at most the corpus."""
    import argparse
    from argparse import Namespace

    import pytest

    import lattice_bert_device

    assert lattice_bert.chars_budget("fit:500") == ("fit", 500.0)
    for bad in ("fit:", "fit:0", "fit:-3", "fit:soon", "fit:nan"):
        with pytest.raises(argparse.ArgumentTypeError, match="fit:SECONDS: expected a positive number of seconds"):
            lattice_bert.chars_budget(bad)
    probes = []

    def pretrain_all(args):  # the probe: 100,000 characters each
        probes.append((args.chars_budget, args.probe, args.throughput_batches, args.corpus_stats))
        return {"lattice_bert": {"training_seconds": 5.0, "read_seconds": 2.0, "wall_seconds": 17.0},  # fixed 10 s
                "char_bert": {"training_seconds": 4.0, "read_seconds": 1.0, "wall_seconds": 10.0}}

    monkeypatch.setattr(lattice_bert_device, "pretrain_all", pretrain_all)
    monkeypatch.setattr(lattice_bert_device, "STARTED", 1000.0)
    monkeypatch.setattr(lattice_bert_device.time, "time", lambda: 1100.0)  # 100 s since the start
    args = Namespace(models=["lattice_bert", "char_bert"], chars_budget=("fit", 500.0), runs_dir="runs/x",
                     throughput_batches=10, corpus_stats=True)
    budget, plan = lattice_bert_device.fit_budget(args, 500.0, 100_000, margin=40.0)
    # 360 s left; Lattice-BERT: 10 s fixed, 2e-5 + 5e-5 s per character -> (360 - 10) / 7e-5 = 5,000,000
    assert probes == [(100_000, True, 0, False)]
    assert budget == 5_000_000 and plan["seconds_left"] == 360.0 and plan["corpus_share"] == 0.463
    assert plan["lattice_bert"] == {"train_chars_per_s": 20_000, "read_chars_per_s": 50_000, "fixed_s": 10.0}
    assert lattice_bert_device.fit_budget(args, 5000.0, 100_000, margin=40.0)[0] == lattice_bert.CORPUS_CHARS
    with pytest.raises(SystemExit, match="fit: 2 s left hold 0 characters, fewer than the probe's 100000"):
        lattice_bert_device.fit_budget(args, 142.0, 100_000, margin=40.0)
    report = {"setup": {"size": "tiny", "chars_budget": budget, "epochs": 1, "device": "GPU"}, "fit": plan,
              "pretraining": {"char_bert": {"chars": 1000, "tokens": None, "epochs": 1, "training_seconds": 4.0,
                                            "dev": {"msp_accuracy": 0.5, "sop_accuracy": 0.5,
                                                    "segment_masked_accuracy": 0.5, "token_masked_accuracy": 0.5}}},
              "export": [{"file": "lb_weights-00-of-01.pt", "bytes": 3 * 2**20}]}
    text = "\n".join(lattice_bert.section(report))
    assert "5,000,000 characters, 46.3 % of the corpus" in text
    assert "lattice_bert reads 50,000 and trains 20,000 characters/s" in text
    assert "| char_bert | 1,000 | – | 4 | 250 | nan | 50.0 |" in text  # no throughput batches: the run's own rate
    assert "`lb_weights-00-of-01.pt` 3.0 MiB" in text
