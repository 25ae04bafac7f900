"""The results tables come from MLflow: a suite's finished runs (``multigrain suite``) are recorded
as table rows (one per entry and configuration, its seeds' runs), merged with the portable
leaderboard file (rows measured by earlier sessions and other machines stay) and RESULTS.md's NER
and sentence sections are regenerated from the store; the other sections are left as they were.
Training is replaced by finished run directories with known metrics, so the tables can be checked
to the digit. The committed file regenerates today's tables byte for byte."""
import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import results_md  # noqa: E402
import results_tables  # noqa: E402


def finish(run, acc: float, epochs: int = 3) -> None:
    """A suite run's directory holding a finished run of its spec: test F1/accuracy ``acc``."""
    from multigrain.platform.experiment import identity

    result = {"spec_hash": run.spec_hash, "run_dir": run.run_dir, **identity(run.spec), "finished": True,
              "leaderboard_metric": "f1" if run.spec["task"] == "ner" else "accuracy",
              "test": {"accuracy": acc, "macro_f1": acc - 0.01, "f1": acc},
              "validation": {"accuracy": acc - 0.02, "f1": acc - 0.02}, "seconds": 60.0, "best_epoch": epochs - 1,
              "epochs_completed": epochs, "device": "GPU Fake",
              "history": [{"epoch": e, "train_loss": 1.0 / e, "validation_f1": acc - 0.1 / e} for e in range(1, 4)]}
    path = Path(run.run_dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.json").write_text(json.dumps(result), encoding="utf-8")


def board_run(run_id: str, experiment: str, key: str, tags: dict, metrics: dict, when: int = 1795000000000) -> dict:
    """A run of another session or machine, as a portable leaderboard file holds it."""
    return {"id": run_id, "experiment": experiment, "name": key, "status": "FINISHED", "start_time": when,
            "end_time": when + 60000, "params": {}, "history": {}, "metrics": metrics,
            "tags": {"results_key": key, "results_row": json.dumps([run_id]), "results_time": str(when),
                     "leaderboard": "true", "device": "CPU", "date": "2026-11-23", **tags}}


@pytest.fixture
def suite(tmp_path):
    """A suite of two shipped specs (the NER one twice: untagged, 1 seed; [e3], 2 seeds; the
    sentence one [small], 3 seeds) and a board with rows of earlier sessions."""
    from multigrain.platform.portable import write_board

    ner, cls = (str(ROOT / "jsonnet_configs" / p) for p in ("ner/resume_bilstm_crf.jsonnet",
                                                            "cls/chnsenticorp_backbone.jsonnet"))
    entries = [{"spec": ner, "seeds": [13]}, {"spec": ner, "seeds": [13, 14], "configs": {"e3": ["trainer.num_epochs=3"]}},
               {"spec": cls, "seeds": [13, 14, 15], "configs": {"small": {"model.embedder.num_layers": 2}}}]
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    earlier = [board_run("elsewhere/msra_plte_vec", "ner/msra", "msra_plte_vec", {
        "results_table": "ner", "dataset": "msra", "spec_name": "msra_plte_vec", "note": "", "seed": "13"},
        {"best_validation_f1": 0.9354, "test_f1": 0.9060, "epochs_completed": 10, "best_epoch": 9, "seconds": 98.9 * 60}),
        board_run("elsewhere/resume_bilstm_crf", "ner/resume", "resume_bilstm_crf", {
            "results_table": "ner", "dataset": "resume", "spec_name": "resume_bilstm_crf", "note": "old", "seed": "13"},
            {"best_validation_f1": 0.5, "test_f1": 0.5, "epochs_completed": 1, "best_epoch": 1, "seconds": 60})]
    write_board(tmp_path / "board.json", earlier)
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## CRF decode\n\nkept line\n", encoding="utf-8")
    return {"path": str(path), "board": tmp_path / "board.json", "results": results, "runs": str(tmp_path / "runs"),
            "args": ["--suite", str(path), "--board", str(tmp_path / "board.json"), "--results", str(results),
                     "--runs-dir", str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"]}


def test_a_suites_finished_runs_become_rows_merged_with_the_board(suite, tmp_path, capsys):
    from multigrain.platform import suite as suites
    from multigrain.platform.portable import read_board

    runs = suites.plan(suite["path"], suites.load_suite(suite["path"]), suite["runs"], check_data_paths=False)
    for r in runs[:-1]:  # the last sentence seed has not finished: the row holds 2 of its 3 seeds
        finish(r, 0.80 + r.seed / 100)
    assert results_tables.main(suite["args"]) == 0
    out = capsys.readouterr().out
    assert "resume_bilstm_crf[e3]: 2 of 2 seeds recorded in the ner table" in out
    assert "chnsenticorp_backbone[small]: 2 of 3 seeds recorded in the sentence table" in out
    text = suite["results"].read_text(encoding="utf-8")
    assert "## CRF decode\n\nkept line\n" in text and text.endswith("`\n") and not text.endswith("\n\n") and "GPU Fake (" in text
    ner = [line for line in text.splitlines() if line.startswith(("| resume", "| msra"))]
    assert ner == ["| resume | bilstm_crf | 91.00 | 93.00 | 94.41 (BiG Tab. IV, LSTM, printed under MSRA) | 3 (2) | 1.0 |  |",  # replaced
                   "| resume | bilstm_crf [e3] | 91.50 ± 0.71 | 93.50 ± 0.71 | – | 3 (2, 2) | 1.0 | "
                   "2 seeds (13, 14); -o trainer.num_epochs=3 |",
                   "| msra | plte_vec | 93.54 | 90.60 | 93.26 (PLTE Tab. 2) | 10 (9) | 98.9 |  |"]  # kept
    # seeds 13 and 14: accuracy 93 and 94 -> 93.50 ± 0.71 (sample std); macro-F1 one less; dev two less
    assert "| cls/chnsenticorp | backbone [small] | 93.50 ± 0.71 | 92.50 ± 0.71 | 91.50 ± 0.71 | 2 | 10 | 1.0 |" in text
    assert "- `[small]`: `-o model.embedder.num_layers=2`" in text

    board = read_board(suite["board"])
    small = sorted((r for r in board if r["tags"].get("results_key") == "chnsenticorp_backbone[small]"),
                   key=lambda r: r["tags"]["seed"])
    assert [r["tags"]["seed"] for r in small] == ["13", "14"] and all(r["tags"]["config"] == "small" for r in small)
    assert small[0]["tags"]["suite_entry"] == "chnsenticorp_backbone [small]" and small[0]["tags"]["device"] == "GPU Fake"
    assert small[0]["tags"]["spec_name"] == "chnsenticorp_backbone" and small[0]["tags"]["num_epochs"] == "10"
    assert len(board) == 2 + 5  # the earlier rows (one replaced, not dropped: its run stays) and the suite's runs

    # the board alone (a fresh clone) regenerates the same tables; recording again changes nothing
    fresh = tmp_path / "fresh.md"
    fresh.write_text(text, encoding="utf-8")
    assert results_tables.main(["--board", str(suite["board"]), "--results", str(fresh)]) == 0
    assert fresh.read_text(encoding="utf-8") == text
    assert results_tables.main(suite["args"]) == 0
    assert suite["results"].read_text(encoding="utf-8") == text and len(read_board(suite["board"])) == 7


def test_only_records_the_chosen_entries_not_the_runs_they_read(suite, tmp_path, capsys):
    """``--only B``, where B reads entry A's run (``run_of``): B's row is recorded, A's earlier row of
    three seeds is not replaced by the one run B reads."""
    from multigrain.platform import suite as suites

    ner = str(ROOT / "jsonnet_configs" / "ner" / "resume_bilstm_crf.jsonnet")
    entries = [{"spec": ner, "seeds": [13, 14]},
               {"spec": ner, "seeds": [13], "configs": {"e3": ["trainer.num_epochs=3"]},
                "ext_vars": {"unused": {"run_of": "resume_bilstm_crf", "seed": 14}}}]
    path = tmp_path / "chained.json"
    path.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    runs = suites.plan(path, suites.load_suite(path), suite["runs"], check_data_paths=False)
    for r in runs:
        finish(r, 0.80 + r.seed / 100)
    args = ["--suite", str(path), "--only", "resume_bilstm_crf [e3]", *suite["args"][2:]]
    assert results_tables.main(args) == 0
    out = capsys.readouterr().out
    assert "resume_bilstm_crf[e3]: 1 of 1 seeds recorded in the ner table" in out
    assert "resume_bilstm_crf:" not in out
    text = suite["results"].read_text(encoding="utf-8")
    assert "| resume | bilstm_crf | 50.00 | 50.00 | 94.41 (BiG Tab. IV, LSTM, printed under MSRA) | 1 (1) | 1.0 | old |" in text  # kept


def test_a_suite_row_of_several_seeds_replaces_the_seed_rows_it_holds():
    """Older NER rows kept each extra seed as a ``[seedN]`` row; a later suite row of the spec that
    holds seed N hides it (one it does not hold stays)."""
    def run(key, seed, when, ids=None):
        return {"id": f"{key}/{seed}", "experiment": "ner/resume", "status": "FINISHED", "start_time": when,
                "metrics": {"test_f1": 0.9 + seed / 1000, "best_validation_f1": 0.9, "epochs_completed": 3,
                            "best_epoch": 2, "seconds": 60},
                "tags": {"results_table": "ner", "results_key": key, "results_time": str(when), "seed": str(seed),
                         "results_row": json.dumps(ids or [f"{key}/{seed}"]), "dataset": "resume",
                         "spec_name": "resume_big", "device": "CPU", "date": "2026-11-27"}}

    suite_ids = ["resume_big/13", "resume_big/14"]
    recs = [run("resume_big[seed14]", 14, 1), run("resume_big[seed15]", 15, 1),
            run("resume_big", 13, 2, suite_ids), run("resume_big", 14, 2, suite_ids)]
    lines = [line for line in results_tables.ner_section(recs) if line.startswith("| resume")]
    assert [line.split(" | ")[1] for line in lines] == ["big", "big [seed15]"]
    assert lines[0].split(" | ")[3] == "91.35 ± 0.07" and "2 seeds (13, 14)" in lines[0]


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
    keys = {t: {r["tags"]["results_key"] for r in runs if r["tags"].get("results_table") == t
                and r["tags"].get("migrated_from")} for t in ("ner", "sentence")}  # later rows come from suites
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
    assert "95.40" not in (ROOT / "benchmarks" / "results_tables.py").read_text(encoding="utf-8")
    assert not (ROOT / "benchmarks" / "ner_results.py").exists() and not (ROOT / "benchmarks" / "sentence_results.py").exists()


def test_a_one_run_suite_row_of_another_seed_names_it():
    """A suite row of one run says its seed unless it is the default 13 (which one-run rows are)."""
    def run(seed, suite_entry="msra_tagger_m3e_again [cpu-e1]"):
        return {"id": f"r{seed}", "experiment": "ner/msra", "status": "FINISHED", "start_time": 1,
                "metrics": {"test_f1": 0.9, "best_validation_f1": 0.92, "epochs_completed": 1, "seconds": 60},
                "tags": {"results_table": "ner", "results_key": "msra_tagger_m3e_again[cpu-e1]", "seed": str(seed),
                         "results_row": json.dumps([f"r{seed}"]), "dataset": "msra", "config": "cpu-e1",
                         "spec_name": "msra_tagger_m3e_again", "note": "-o trainer.num_epochs=1",
                         **({"suite_entry": suite_entry} if suite_entry else {})}}

    assert results_tables.ner_row([run(16)])["note"] == "1 seed (16); -o trainer.num_epochs=1"
    assert results_tables.ner_row([run(13)])["note"] == "-o trainer.num_epochs=1"
    assert results_tables.ner_row([run(16, suite_entry=None)])["note"] == "-o trainer.num_epochs=1"


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
