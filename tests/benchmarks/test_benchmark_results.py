"""The results tables come from MLflow: the results scripts record their runs as table rows, merge
them with the portable leaderboard file (rows measured by earlier sessions and other machines stay;
a seed already there is not trained again) and regenerate RESULTS.md's NER and sentence sections
from the store; the other sections are left as they were. Training is replaced by a stub returning
known metrics, so the tables can be checked to the digit. The committed file regenerates today's
tables byte for byte."""
import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import ner_results  # noqa: E402
import results_md  # noqa: E402
import results_tables  # noqa: E402
import sentence_results  # noqa: E402


@pytest.fixture
def fake_training(monkeypatch):
    """``train_or_reuse`` stub: seed s gets test accuracy 0.80 + s/100 (13 -> 0.93); records calls."""
    from multigrain.platform.experiment import identity
    from multigrain.platform.specs import spec_hash

    calls = []

    def train_or_reuse(spec, run_dir, tracking_uri=None, source=None, track=True):
        calls.append((spec["seed"], str(run_dir)))
        acc = 0.80 + spec["seed"] / 100
        return {"spec_hash": spec_hash(spec), "run_dir": str(run_dir), "source": source, **identity(spec),
                "finished": True, "leaderboard_metric": "accuracy" if spec["task"] != "ner" else "f1",
                "test": {"accuracy": acc, "macro_f1": acc - 0.01, "f1": acc},
                "validation": {"accuracy": acc - 0.02, "f1": acc - 0.02}, "seconds": 60.0, "best_epoch": 2,
                "epochs_completed": 3, "device": "GPU Fake",
                "history": [{"epoch": e, "train_loss": 1.0 / e, "validation_accuracy": acc - 0.1 / e} for e in (1, 2, 3)]}

    monkeypatch.setattr(results_md, "train_or_reuse", train_or_reuse)
    return calls


def results_file(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\n## CRF decode\n\nkept line\n", encoding="utf-8")
    return path


def board_run(run_id: str, experiment: str, key: str, tags: dict, metrics: dict) -> dict:
    """A run of another session or machine, as a portable leaderboard file holds it."""
    return {"id": run_id, "experiment": experiment, "name": key, "status": "FINISHED", "start_time": 1795000000000,
            "end_time": 1795000060000, "params": {}, "history": {}, "metrics": metrics,
            "tags": {"results_key": key, "results_row": json.dumps([run_id]), "results_time": "1795000000000",
                     "leaderboard": "true", "device": "CPU", "date": "2026-11-23", **tags}}


def common(tmp_path, *args):
    return [*args, "--results", str(tmp_path / "RESULTS.md"), "--board", str(tmp_path / "board.json"),
            "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--runs-dir", str(tmp_path / "runs")]


def test_sentence_rows_add_seeds_without_training_kept_ones(tmp_path, fake_training):
    from multigrain.platform.portable import read_board, write_board

    results = results_file(tmp_path)
    summary = board_run("elsewhere/bq_big", "pair/bq", "bq_big", {
        "results_table": "sentence", "spec_name": "bq_big", "num_epochs": "10", "overrides": "[]",
        "summary_test_a": "71.00 ± 0.10", "summary_test_b": "70.90 ± 0.10", "summary_dev": "72.00 ± 0.20",
        "summary_seeds": "3", "summary_minutes": "5.0"}, {"test_accuracy": 0.71})
    write_board(tmp_path / "board.json", [summary])
    args = common(tmp_path, "--only", "chnsenticorp_backbone", "--epochs", "3")
    assert sentence_results.main(args + ["--seeds", "1"]) == 0
    assert [seed for seed, _ in fake_training] == [13]
    assert sentence_results.main(args + ["--seeds", "2"]) == 0
    assert [seed for seed, _ in fake_training] == [13, 14]  # seed 13 came from the store
    fresh = [a.replace("m.db", "fresh.db") for a in args]  # another machine: the board alone brings the seeds
    assert sentence_results.main(fresh + ["--seeds", "1"]) == 0  # fewer seeds asked: the stored ones stay
    assert [seed for seed, _ in fake_training] == [13, 14]

    text = results.read_text(encoding="utf-8")
    assert "## CRF decode\n\nkept line\n" in text
    # seeds 13 and 14: accuracy 93 and 94 -> 93.50 ± 0.71 (sample std); macro-F1 one less; dev two less
    assert "| cls/chnsenticorp | backbone | 93.50 ± 0.71 | 92.50 ± 0.71 | 91.50 ± 0.71 | 2 | 3 | 1.0 |" in text
    assert "| pair/bq | big | 71.00 ± 0.10 | 70.90 ± 0.10 | 72.00 ± 0.20 | 3 | 10 | 5.0 |" in text  # imported row
    assert "GPU Fake (" in text
    runs = read_board(tmp_path / "board.json")
    seeds = sorted(r["tags"]["seed"] for r in runs if r["tags"].get("results_key") == "chnsenticorp_backbone")
    assert seeds == ["13", "14"] and len(runs) == 3
    mine = next(r for r in runs if r["tags"].get("seed") == "14")
    assert mine["name"].startswith("chnsenticorp_backbone ") and mine["name"].endswith(" seed 14")
    assert [e for e, _ in mine["history"]["train_loss"]] == [1, 2, 3] and mine["tags"]["spec_hash"]


def test_sentence_row_drops_seeds_of_another_spec(tmp_path, fake_training):
    results = results_file(tmp_path)
    args = common(tmp_path, "--only", "chnsenticorp_backbone")
    assert sentence_results.main(args + ["--seeds", "2", "--epochs", "3"]) == 0
    assert sentence_results.main(args + ["--seeds", "1", "--epochs", "4"]) == 0  # a changed spec trains anew
    assert [seed for seed, _ in fake_training] == [13, 14, 13]
    text = results.read_text(encoding="utf-8")
    assert "| cls/chnsenticorp | backbone | 93.00 ± 0.00 | 92.00 ± 0.00 | 91.00 ± 0.00 | 1 | 4 | 1.0 |" in text


def test_ner_rows_of_earlier_sessions_stay(tmp_path, fake_training):
    from multigrain.platform.portable import write_board

    results = results_file(tmp_path)
    earlier = board_run("elsewhere/msra_plte_vec", "ner/msra", "msra_plte_vec", {
        "results_table": "ner", "dataset": "msra", "spec_name": "msra_plte_vec", "note": ""},
        {"best_validation_f1": 0.9354, "test_f1": 0.9060, "epochs_completed": 10, "best_epoch": 9, "seconds": 98.9 * 60})
    write_board(tmp_path / "board.json", [earlier])
    assert ner_results.main(common(tmp_path, "--specs", "resume_bilstm_crf", "--epochs", "3")) == 0
    text = results.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("| resume") or line.startswith("| msra")]
    assert lines == ["| resume | bilstm_crf | 91.00 | 93.00 | 91.87 (BiG Tab. IV, LSTM) | 3 (2) | 1.0 | "
                     "--epochs 3 (spec: 8) |",
                     "| msra | plte_vec | 93.54 | 90.60 | 93.26 (PLTE Tab. 2) | 10 (9) | 98.9 |  |"]
    assert "## CRF decode\n\nkept line\n" in text and "GPU Fake (" in text


def test_committed_board_regenerates_the_tables_byte_identically(tmp_path):
    """A fresh clone: the committed portable file, imported into an empty MLflow store and read back
    (what ``python benchmarks/results_tables.py`` does), gives RESULTS.md's NER and sentence tables as
    committed; regenerated twice, the same bytes; a file without those sections gets them alone."""
    committed = (ROOT / "benchmarks" / "RESULTS.md").read_bytes()
    recs = results_tables.board_records(results_md.BOARD)
    assert {r["tags"]["results_table"] for r in recs} == {"ner", "sentence"}
    copy, bare = tmp_path / "RESULTS.md", tmp_path / "bare.md"
    copy.write_bytes(committed)
    bare.write_text("# Benchmark results\n", encoding="utf-8")
    for _ in range(2):
        results_tables.write_tables(recs, copy)
        assert copy.read_bytes() == committed
        results_tables.write_tables(recs, bare)
    sections = committed.decode("utf-8").split("\n## ")
    expected = "# Benchmark results\n\n## " + "\n## ".join(s for s in sections if s.startswith(("NER results",
                                                                                            "Sentence results")))
    assert bare.read_text(encoding="utf-8") == expected.rstrip("\n") + "\n"


def test_hand_kept_stores_are_retired_and_their_rows_migrated():
    from multigrain.platform.portable import read_board

    assert not list((ROOT / "benchmarks" / "results").glob("*_results.json"))
    runs = read_board(results_md.BOARD)
    keys = {t: {r["tags"]["results_key"] for r in runs if r["tags"].get("results_table") == t} for t in ("ner", "sentence")}
    assert len(keys["ner"]) == 48 and len(keys["sentence"]) == 33
    row = next(r for r in runs if r["id"] == "results/ner/resume_bilstm_big[no_global]")
    assert row["metrics"]["test_f1"] == 0.9313 and row["tags"]["note"] == "-o model.encoder.encoders.1.global_node=false"
    assert row["tags"]["config"] == "no_global" and row["tags"]["seed"] == "13"


def test_paper_numbers_live_in_one_file():
    from multigrain.platform.papers import numbers_file, paper_number

    assert numbers_file() == ROOT / "benchmarks" / "paper_numbers.json"
    assert paper_number("ner/resume", "resume_plte_vec") == "95.40 (PLTE Tab. 1)"  # the _vec spec: the same model
    assert paper_number("ner/weibo", "weibo_lattice_lstm") == "53.13 (PLTE Tab. 2; 58.79 later)"
    assert paper_number("ner/resume", "resume_quickstart") is None
    for script in ("ner_results.py", "sentence_results.py", "results_tables.py"):
        assert "95.40" not in (ROOT / "benchmarks" / script).read_text(encoding="utf-8")


def test_ner_seed_spread_is_mean_and_sample_std_over_seed_rows():
    row = lambda f1: {"test_f1": f1}  # noqa: E731
    rows = {"resume_big": row(0.93), "resume_big[seed14]": row(0.94), "resume_big[seed15]": row(0.95),
            "weibo_plte": row(0.50), "weibo_plte[seed13]": row(0.52), "weibo_plte[seed14]": row(0.48),
            "msra_plte": row(0.90)}
    lines = results_tables.seed_spread(rows)
    assert lines[2:] == ["- resume_big: test F1 94.00 ± 1.00 over seeds 13, 14, 15 (93.00, 94.00, 95.00)",
                         "- weibo_plte: test F1 50.00 ± 2.83 over seeds 13, 14 (52.00, 48.00)"]
    assert results_tables.seed_spread({"msra_plte": row(0.9)}) == []


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
