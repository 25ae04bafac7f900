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
    assert first == second and first["char_bert"]["chars"] == 40 and first["char_bert"]["tokens"] == 52
