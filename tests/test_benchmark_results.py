"""The results scripts' tracked stores: rows and seeds measured by earlier invocations (earlier
sessions, whose run directories are gone) stay in RESULTS.md; a seed already in the store is not
trained again; the other sections of RESULTS.md are left as they were. Training is replaced by a
stub returning known metrics, so the tables can be checked to the digit."""
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import ner_results  # noqa: E402
import results_md  # noqa: E402
import sentence_results  # noqa: E402


fake_training_tracked: list = []


@pytest.fixture
def fake_training(monkeypatch):
    """``train_or_reuse`` stub: seed s gets test accuracy 0.80 + s/100 (13 -> 0.93); records calls."""
    calls = []

    def train_or_reuse(spec, run_dir, tracking_uri=None, source=None, track=True):
        calls.append((spec["seed"], str(run_dir)))
        fake_training_tracked.append(track)
        acc = 0.80 + spec["seed"] / 100
        return {"test": {"accuracy": acc, "macro_f1": acc - 0.01, "f1": acc}, "validation": {"accuracy": acc - 0.02,
                "f1": acc - 0.02}, "seconds": 60.0, "best_epoch": 2, "epochs_completed": 3, "device": "GPU Fake"}

    monkeypatch.setattr(results_md, "train_or_reuse", train_or_reuse)
    return calls


def results_file(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\n## CRF decode\n\nkept line\n", encoding="utf-8")
    return path


def test_sentence_store_adds_seeds_without_training_kept_ones(tmp_path, fake_training):
    results, store = results_file(tmp_path), tmp_path / "store.json"
    results_md.save_row(store, "bq_big", {"experiment": "pair/bq", "variant": "big", "epochs": 10, "tag": None,
                                          "overrides": [], "summary": {"test_a": "71.00 ± 0.10", "test_b": "70.90 ± 0.10",
                                                                       "dev": "72.00 ± 0.20", "seeds": 3, "minutes": 5.0,
                                                                       "device": "CPU", "date": "2026-11-23"}})
    common = ["--only", "chnsenticorp_backbone", "--results", str(results), "--store", str(store),
              "--runs-dir", str(tmp_path / "runs"), "--epochs", "3"]
    assert sentence_results.main(common + ["--seeds", "1"]) == 0
    assert [seed for seed, _ in fake_training] == [13]
    assert sentence_results.main(common + ["--seeds", "2"]) == 0
    assert [seed for seed, _ in fake_training] == [13, 14]  # seed 13 came from the store
    assert sentence_results.main(common + ["--seeds", "1"]) == 0  # fewer seeds asked: the stored ones stay
    assert [seed for seed, _ in fake_training] == [13, 14]

    text = results.read_text(encoding="utf-8")
    assert "## CRF decode\n\nkept line\n" in text
    # seeds 13 and 14: accuracy 93 and 94 -> 93.50 ± 0.71 (sample std); macro-F1 one less; dev two less
    assert "| cls/chnsenticorp | backbone | 93.50 ± 0.71 | 92.50 ± 0.71 | 91.50 ± 0.71 | 2 | 3 | 1.0 |" in text
    assert "| pair/bq | big | 71.00 ± 0.10 | 70.90 ± 0.10 | 72.00 ± 0.20 | 3 | 10 | 5.0 |" in text  # imported row


def test_sentence_runs_without_tracking_keep_the_device_they_trained_on(tmp_path, fake_training):
    fake_training_tracked.clear()
    results, store = results_file(tmp_path), tmp_path / "store.json"
    assert sentence_results.main(["--only", "chnsenticorp_big_vec", "--results", str(results), "--store", str(store),
                                  "--runs-dir", str(tmp_path / "runs"), "--seeds", "1", "--no-tracking"]) == 0
    assert fake_training_tracked == [False]
    (seed, run_dir), = fake_training
    row = results_md.save_row(store)["chnsenticorp_big_vec"]
    assert row["runs"]["13"]["device"] == "GPU Fake" and "GPU Fake (" in results.read_text(encoding="utf-8")
    # the run dir a later invocation (or another machine) finds: stem, epochs, seed, spec hash
    assert Path(run_dir).name == f"chnsenticorp_big_vec-e40-seed13-{row['runs']['13']['spec_hash'][:8]}"


def test_sentence_store_drops_seeds_of_another_spec(tmp_path, fake_training):
    results, store = results_file(tmp_path), tmp_path / "store.json"
    common = ["--only", "chnsenticorp_backbone", "--results", str(results), "--store", str(store),
              "--runs-dir", str(tmp_path / "runs")]
    assert sentence_results.main(common + ["--seeds", "2", "--epochs", "3"]) == 0
    assert sentence_results.main(common + ["--seeds", "1", "--epochs", "4"]) == 0  # a changed spec trains anew
    assert [seed for seed, _ in fake_training] == [13, 14, 13]
    row = results_md.save_row(store)["chnsenticorp_backbone"]
    assert sorted(row["runs"]) == ["13"] and row["epochs"] == 4


def test_ner_store_keeps_rows_of_earlier_sessions(tmp_path, fake_training):
    results, store = results_file(tmp_path), tmp_path / "store.json"
    earlier = {"dataset": "msra", "model": "plte_vec", "dev_f1": 0.9354, "test_f1": 0.9060, "paper": "93.26",
               "epochs": 10, "best_epoch": 9, "minutes": 98.9, "note": "", "device": "CPU", "date": "2026-11-23",
               "run_dir": None}
    results_md.save_row(store, "msra_plte_vec", earlier)
    assert ner_results.main(["--specs", "resume_bilstm_crf", "--epochs", "3", "--results", str(results),
                             "--store", str(store), "--runs-dir", str(tmp_path / "runs")]) == 0
    text = results.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("| resume") or line.startswith("| msra")]
    assert lines == ["| resume | bilstm_crf | 91.00 | 93.00 | 91.87 (BiG Tab. IV, LSTM) | 3 (2) | 1.0 | "
                     "--epochs 3 (spec: 8) |",
                     "| msra | plte_vec | 93.54 | 90.60 | 93.26 | 10 (9) | 98.9 |  |"]
    assert "## CRF decode\n\nkept line\n" in text


def test_default_stores_are_tracked_files():
    for table in ("ner_results", "sentence_results"):
        store = results_md.STORES / f"{table}.json"
        assert store.exists() and store.is_relative_to(ROOT / "benchmarks")
        assert results_md.save_row(store), f"{store} has no rows"


def test_ner_seed_spread_is_mean_and_sample_std_over_seed_rows():
    row = lambda f1: {"test_f1": f1}  # noqa: E731
    rows = {"resume_big": row(0.93), "resume_big[seed14]": row(0.94), "resume_big[seed15]": row(0.95),
            "weibo_plte": row(0.50), "weibo_plte[seed13]": row(0.52), "weibo_plte[seed14]": row(0.48),
            "msra_plte": row(0.90)}
    lines = ner_results.seed_spread(rows)
    assert lines[2:] == ["- resume_big: test F1 94.00 ± 1.00 over seeds 13, 14, 15 (93.00, 94.00, 95.00)",
                         "- weibo_plte: test F1 50.00 ± 2.83 over seeds 13, 14 (52.00, 48.00)"]
    assert ner_results.seed_spread({"msra_plte": row(0.9)}) == []


def test_export_m3e_vectors_writes_whole_tokens_with_their_rows(tmp_path, capsys):
    """The exported table holds every whole vocabulary token (no ``##`` pieces, no specials) with its
    own row of the model's input embeddings, upper-case forms of lower-case Latin tokens, and
    loads into a ``char_bigram`` embedding (word2vec text format)."""
    import json

    import torch

    import export_m3e_vectors
    from multigrain.components.vectors import load_vec_into

    model = tmp_path / "tiny_bert"
    model.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "好", "##好", "天", "ab", "AB", "x", "##x", "中国"]
    (model / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    from transformers import BertConfig, BertModel

    bert = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=6, num_hidden_layers=1, num_attention_heads=1,
                                intermediate_size=8, max_position_embeddings=16))
    bert.save_pretrained(model)
    table = bert.get_input_embeddings().weight.detach()
    assert export_m3e_vectors.main(["--model", str(model), "--out", str(tmp_path / "out")]) == 0

    lines = (tmp_path / "out" / "m3e_chars.vec").read_text(encoding="utf-8").splitlines()
    rows = {line.split(" ")[0]: [float(v) for v in line.split(" ")[1:]] for line in lines[1:]}
    expected = {"好": 4, "天": 6, "ab": 7, "AB": 8, "x": 9, "中国": 11, "X": 9}  # "AB" is its own token
    assert lines[0] == f"{len(expected)} 6" and set(rows) == set(expected)
    for token, i in expected.items():
        assert rows[token] == pytest.approx(table[i].tolist(), abs=1e-5)
    info = json.loads((tmp_path / "out" / "m3e_vectors.json").read_text())
    assert info["tokens"] == 7 and info["dim"] == 6 and info["single_characters"] == 4

    missing = tmp_path / "no_model"
    assert export_m3e_vectors.main(["--model", str(missing), "--out", str(tmp_path / "out2")]) == 2
    assert f"model_path: {missing} is not a directory" in capsys.readouterr().err
    assert not (tmp_path / "out2").exists()

    weight = torch.zeros(4, 6)
    assert load_vec_into(weight, ["<pad>", "<unk>", "天", "X"], str(tmp_path / "out" / "m3e_chars.vec")) == 2
    assert weight[3].tolist() == pytest.approx(table[9].tolist(), abs=1e-5)


def test_write_vec_header_counts_the_rows_written(tmp_path):
    """A token the text format cannot hold (whitespace inside) is left out, and the header says so."""
    import torch

    from pretrain_vectors import write_vec

    write_vec(tmp_path / "t.vec", ["好", "a b", "天", "\t"], torch.arange(8.0).view(4, 2))
    lines = (tmp_path / "t.vec").read_text(encoding="utf-8").splitlines()
    assert lines == ["2 2", "好 0.00000 1.00000", "天 4.00000 5.00000"]


def test_pretrain_vectors_trains_only_the_namespaces_asked_for(tmp_path):
    """``--namespaces chars`` writes chars.vec alone (no jieba pass, no bigram table), at the
    asked dimension, and records the choice in vectors.json."""
    import json

    from pretrain_vectors import main

    out = tmp_path / "v"
    assert main(["--out", str(out), "--dim", "8", "--epochs", "1", "--max-sentences", "20", "--namespaces", "chars",
                 "--threads", "1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["chars.vec", "vectors.json"]
    count, dim = map(int, (out / "chars.vec").read_text(encoding="utf-8").splitlines()[0].split())
    report = json.loads((out / "vectors.json").read_text(encoding="utf-8"))
    assert dim == 8 and 100 < count <= report["namespaces"]["chars"]["tokens"]  # whitespace tokens left out
    assert report["settings"]["namespaces"] == ["chars"] and list(report["namespaces"]) == ["chars"]
