"""Leaderboards people browse: readable MLflow runs (names, descriptions, artifacts), seed groups as
mean ± std beside the paper's number, the formats, the portable file's round trip, ``compare``, and
one clear error (exit 2, nothing written) for each kind of bad input. Runs are tiny trainings."""
import csv
import io
import json
import shutil
import statistics

import pytest
from PIL import Image

from multigrain.platform.commands import main as cli_main
from multigrain.testing import sentence_model, tiny_spec
from tests.conftest import DATA, train_runs


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Seeds 7 and 8 of ``resume_bilstm_crf`` (a spec name with a paper number) and seed 7 at another
    learning rate."""
    folder = tmp_path_factory.mktemp("board")
    uri = f"sqlite:///{folder / 'm.db'}"
    results = train_runs(folder, uri, [("resume_bilstm_crf", 7, 0.05), ("resume_bilstm_crf", 8, 0.05),
                                       ("resume_bilstm_crf", 7, 0.02)])
    return {"folder": folder, "uri": uri, "results": results}


def run_of(uri, result):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("ner/resume")
    (run,) = client.search_runs([exp.experiment_id], f"tags.spec_hash = '{result['spec_hash']}'")
    return client, run


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_runs_are_named_described_and_carry_their_pictures(board, tmp_path):
    result = board["results"][1]
    client, run = run_of(board["uri"], result)
    assert run.info.run_name == f"resume_bilstm_crf {result['spec_hash'][:8]} seed 8"
    tags = run.data.tags
    assert tags["spec_name"] == "resume_bilstm_crf" and tags["seed"] == "8"
    assert tags["seed_group"] == run_of(board["uri"], board["results"][0])[1].data.tags["seed_group"]
    note = tags["mlflow.note.content"]
    assert f"test f1 **{100 * result['test']['f1']:.2f}**" in note and "94.41 (BiG Tab. IV, LSTM, printed under MSRA)" in note
    assert "model `tagger`, encoder `bilstm`, dataset `ner/resume`, seed 8" in note
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"learning_curves.png", "learning_curves.json", "test_report.json", "sample_predictions.json"} <= names
    curves = json.loads(open(client.download_artifacts(run.info.run_id, "learning_curves.json", str(tmp_path))).read())
    assert [e for e, _ in curves["train_loss"]] == [1, 2]
    assert [v for _, v in curves["validation_f1"]] == [h["validation_f1"] for h in result["history"]]
    with Image.open(client.download_artifacts(run.info.run_id, "learning_curves.png", str(tmp_path))) as png:
        assert png.format == "PNG" and png.size == (1100, 400)
    samples = json.loads(open(client.download_artifacts(run.info.run_id, "sample_predictions.json", str(tmp_path))).read())
    assert len(samples) == 16 and len(samples[0]["tags"]) == len(samples[0]["gold_tags"]) == len(samples[0]["text"])


def test_leaderboard_groups_seeds_beside_the_paper_in_every_format(board, capsys):
    seeds = [r["test"]["f1"] for r in board["results"][:2]]
    code, out, _ = cli(capsys, "leaderboard", "--all", "--format", "json", "--tracking-uri", board["uri"])
    rows = json.loads(out)
    assert code == 0 and len(rows) == 2
    group = next(r for r in rows if r["seeds"] == 2)
    assert group["values"] == seeds and group["value"] == pytest.approx(statistics.fmean(seeds))
    assert group["ours"] == f"{100 * statistics.fmean(seeds):.2f} ± {100 * statistics.stdev(seeds):.2f}"
    assert group["paper"] == "94.41 (BiG Tab. IV, LSTM, printed under MSRA)" and group["metric"] == "test_f1"
    assert [r["rank"] for r in rows] == [1, 2] and rows[0]["value"] >= rows[1]["value"]

    code, md, _ = cli(capsys, "leaderboard", "ner", "--format", "md", "--tracking-uri", board["uri"])
    lines = md.splitlines()
    assert code == 0 and lines[0] == "| rank | experiment | name | model | encoder | metric | scored on | ours | " \
                                     "seeds | epochs | paper | spec hash | date |" and len(lines) == 4
    assert (f"| resume_bilstm_crf | tagger | bilstm | test_f1 | test | {group['ours']} | 2 | 2 | "
            "94.41 (BiG Tab. IV, LSTM, printed under MSRA) |") in md
    code, text, _ = cli(capsys, "leaderboard", "ner/resume", "--format", "csv", "--tracking-uri", board["uri"])
    table = list(csv.DictReader(io.StringIO(text)))
    assert code == 0 and {r["seeds"] for r in table} == {"2", "1"}
    assert float(next(r for r in table if r["seeds"] == "2")["value"]) == pytest.approx(group["value"])
    code, out, _ = cli(capsys, "leaderboard", "--all", "--no-group", "--json", "--tracking-uri", board["uri"])
    assert code == 0 and len(json.loads(out)) == 3


def test_export_import_round_trip_is_idempotent(board, tmp_path, capsys):
    exported, again = tmp_path / "board.json", tmp_path / "again.json"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    code, _, err = cli(capsys, "leaderboard", "--all", "--export", exported, "--tracking-uri", board["uri"])
    assert code == 0 and "exported 3 runs" in err
    assert cli(capsys, "leaderboard", "--import", exported, "--tracking-uri", other)[0] == 0
    code, _, err = cli(capsys, "leaderboard", "--import", exported, "--tracking-uri", other)
    assert code == 0 and "imported 0 runs (3 already in the store)" in err
    original = cli(capsys, "leaderboard", "--all", "--format", "md", "--tracking-uri", board["uri"])[1]
    assert cli(capsys, "leaderboard", "--all", "--format", "md", "--tracking-uri", other)[1] == original
    assert cli(capsys, "leaderboard", "--all", "--export", again, "--tracking-uri", other)[0] == 0
    assert again.read_text(encoding="utf-8") == exported.read_text(encoding="utf-8")
    runs = json.loads(exported.read_text(encoding="utf-8"))["runs"]
    assert all(r["tags"]["spec_hash"] and "test_f1" in r["metrics"] and len(r["history"]["train_loss"]) == 2
               for r in runs)


def test_compare_lists_exactly_the_differing_spec_keys_and_plots_the_curves(board, tmp_path, capsys):
    first, other_seed, other_lr = board["results"]
    plot = tmp_path / "cmp.png"
    code, out, _ = cli(capsys, "compare", first["spec_hash"][:10], other_lr["spec_hash"], "--plot", plot,
                       "--format", "json", "--tracking-uri", board["uri"])
    result = json.loads(out.split("\nlearning curves:")[0])
    assert code == 0 and result["differences"] == {"trainer.optimizer.lr": ["0.05", "0.02"]}
    assert result["metrics"]["test_f1"] == [first["test"]["f1"], other_lr["test"]["f1"]]
    with Image.open(plot) as png:
        assert png.format == "PNG" and png.size == (1100, 400)
    run_id = run_of(board["uri"], other_seed)[1].info.run_id
    code, out, _ = cli(capsys, "compare", first["spec_hash"], run_id, "--plot", plot, "--format", "md",
                       "--tracking-uri", board["uri"])
    assert code == 0 and "| seed | 7 | 8 |" in out and "trainer.optimizer.lr" not in out


def test_compare_takes_run_directories_and_names_every_run_it_cannot_find(board, tmp_path, capsys):
    first, _, other_lr = board["results"]
    folder, uri = board["folder"], board["uri"]
    copied = tmp_path / "copied"  # no tracking.json: found by its spec hash
    shutil.copytree(folder / "run-resume_bilstm_crf-7-0.05", copied)
    (copied / "tracking.json").unlink()
    code, out, _ = cli(capsys, "compare", copied, folder / "run-resume_bilstm_crf-7-0.02", "--plot",
                       tmp_path / "cmp.png", "--format", "json", "--tracking-uri", uri)
    result = json.loads(out.split("\nlearning curves:")[0])
    assert code == 0 and result["differences"] == {"trainer.optimizer.lr": ["0.05", "0.02"]}
    assert [r["spec_hash"] for r in result["runs"]] == [first["spec_hash"], other_lr["spec_hash"]]
    unlogged = tmp_path / "unlogged"
    shutil.copytree(copied, unlogged)
    (unlogged / "spec_hash").write_text("0" * 64)
    code, out, err = cli(capsys, "compare", unlogged, "nosuchrun", copied, "--plot", tmp_path / "again.png",
                         "--tracking-uri", uri)
    assert code == 2 and out == "" and not (tmp_path / "again.png").exists()
    assert err.strip() == (f"error: {unlogged}: a run directory with no MLflow run in {uri} (trained with "
                           f"--no-tracking, or logged to another store?); `multigrain log {unlogged}` logs it\n"
                           f"nosuchrun: no run with this id, spec hash or name in {uri}")


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
    ('{"format": "other"}', 'not a multigrain leaderboard file (no "format": "multigrain-leaderboard")'),
    ('{"format": "multigrain-leaderboard", "version": 9, "runs": []}', "version 9; this multigrain reads version 1"),
    ('{"format": "multigrain-leaderboard", "version": 1, "runs": [{"id": "a", "experiment": "ner/x", "name": "",'
     ' "status": "FINISHED", "start_time": 1, "end_time": 2, "tags": {}, "metrics": {"test_f1": "high"}}]}',
     'runs[0] (id a): metrics.test_f1: expected a number, got "high"'),
])
def test_a_malformed_leaderboard_file_is_one_error_and_writes_nothing(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    code, _, err = cli(capsys, "leaderboard", "--import", bad, "--tracking-uri", f"sqlite:///{tmp_path / 'new.db'}")
    assert code == 2 and err.strip() == f"error: {bad}: {message}"
    assert not (tmp_path / "new.db").exists()


def test_unknown_runs_and_missing_stores_are_one_error(board, tmp_path, capsys):
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    code, _, err = cli(capsys, "compare", "0123456789abcdef", board["results"][0]["spec_hash"], "--plot",
                       tmp_path / "x.png", "--tracking-uri", board["uri"])
    assert code == 2 and f"0123456789abcdef: no run with this id, spec hash or name in {board['uri']}" in err
    assert not (tmp_path / "x.png").exists()
    for args in (["compare", "a1b2c3", "d4e5f6"], ["leaderboard", "--all", "--export", tmp_path / "e.json"],
                 ["ui", "--port", "5999"]):
        code, _, err = cli(capsys, *args, "--tracking-uri", missing)
        assert code == 2 and f"no MLflow store at {missing}" in err, args
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "e.json").exists()
    code, _, err = cli(capsys, "leaderboard", "--all", "--export", tmp_path / "nope" / "e.json", "--tracking-uri",
                       board["uri"])
    assert code == 2 and "the folder" in err and not (tmp_path / "nope").exists()
    code, _, err = cli(capsys, "leaderboard", "--tracking-uri", board["uri"])
    assert code == 2 and "give a TASK" in err


def test_a_classifier_run_carries_its_confusion_matrix(tmp_path):
    """Gold x predicted counts of the test split (20 ChnSentiCorp reviews): they sum to the examples
    and their diagonal is the test accuracy; drawn as a PNG."""
    from mlflow.tracking import MlflowClient

    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger
    lines = (DATA / "chnsenticorp" / "train.tsv").read_text(encoding="utf-8").splitlines()[:21]
    data = tmp_path / "twenty.tsv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = tiny_spec(sentence_model("classifier"), {"type": "chnsenticorp", "cache_dir": str(tmp_path)}, data, data,
                     data, epochs=3, lr=3e-3, batch_size=5, task="cls", validation_metric="+accuracy")
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    result = Run(spec, tmp_path / "run").train(logger=RunLogger(uri))
    confusion = result["test_confusion"]
    assert confusion["labels"] == ["0", "1"] and sum(map(sum, confusion["matrix"])) == 20
    assert (confusion["matrix"][0][0] + confusion["matrix"][1][1]) / 20 == pytest.approx(result["test"]["accuracy"])
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("cls/tiny").experiment_id])
    saved = json.loads(open(client.download_artifacts(run.info.run_id, "confusion_matrix.json", str(tmp_path))).read())
    assert saved == confusion
    with Image.open(client.download_artifacts(run.info.run_id, "confusion_matrix.png", str(tmp_path))) as png:
        assert png.format == "PNG" and png.size == (550, 400)
    samples = json.loads(open(client.download_artifacts(run.info.run_id, "sample_predictions.json", str(tmp_path))).read())
    assert len(samples) == 20 and all(s["label"] in ("0", "1") and s["gold_label"] in ("0", "1") for s in samples)
    # a backbone-only model: the encoder column names its backbone
    from multigrain.platform.leaderboard import leaderboard

    assert run.data.tags["encoder"] == "char_transformer"
    assert [row["encoder"] for row in leaderboard("cls/tiny", uri)] == ["char_transformer"]


def test_bleu_below_one_is_shown_as_points_and_fractions_as_percent():
    """sacrebleu's BLEU and chrF are points (0-100): an undertrained translator's 0.72 BLEU is 0.72, not
    72.00, in the table, the sweep summary and the run description; F1 0.9 is 90.00."""
    from multigrain.platform.artifacts import description
    from multigrain.platform.leaderboard import rows
    from multigrain.platform.scores import percent_scale
    from multigrain.platform.ray.sweep_report import _fmt

    def record(experiment, seed, metrics, metric):
        return {"id": f"{experiment}-{seed}", "run_id": f"{experiment}-{seed}", "experiment": experiment,
                "start_time": 0, "metrics": metrics,
                "tags": {"seed_group": experiment, "seed": str(seed), "leaderboard_metric": metric}}

    board = rows([record("mt/tvsub", 13, {"test_bleu": 0.5}, "test_bleu"),
                  record("mt/tvsub", 14, {"test_bleu": 0.72}, "test_bleu"),
                  record("ner/resume", 13, {"test_f1": 0.9}, "test_f1")])
    ours = {r["experiment"]: r["ours"] for r in board}
    assert ours == {"mt/tvsub": f"0.61 ± {statistics.stdev([0.5, 0.72]):.2f}", "ner/resume": "90.00"}
    assert percent_scale("test_wmt22_chrf", [0.3]) == percent_scale("test_bleu_cased", [0.3]) == 1.0
    assert percent_scale("test_accuracy", [0.3]) == 100.0 and percent_scale("validation_loss", [2.5]) == 1.0
    assert _fmt("test_bleu", 0.72, 0.1) == "0.72 ± 0.10" and _fmt("f1", 0.72, 0.01) == "72.00 ± 1.00"
    about = description({"leaderboard_metric": "test_bleu"}, {"test_bleu": 0.72}, None)
    assert "test bleu **0.72**" in about


def test_figures_with_chinese_labels_warn_once(tmp_path, monkeypatch):
    """Run names and tag sets in Chinese: drawn with an installed Chinese font when there is one; where
    none is, one warning naming the figure, not matplotlib's one line per missing glyph."""
    import warnings

    from multigrain.platform import artifacts
    from multigrain.platform.errors import PlotWarning

    confusion = {"labels": ["正面", "负面", "中性"], "matrix": [[5, 1, 0], [2, 7, 1], [0, 1, 3]]}
    curves = {"运行甲": {"train_loss": [[1, 2.0], [2, 1.0]], "validation_f1": [[1, 50.0], [2, 60.0]]},
              "运行乙": {"train_loss": [[1, 2.5], [2, 1.5]], "validation_f1": [[1, 40.0], [2, 55.0]]}}
    monkeypatch.setattr(artifacts, "_cjk_font", lambda: None)  # as on a machine without one
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        artifacts.plot_confusion(confusion, tmp_path / "confusion.png")
        artifacts.plot_curves(curves, tmp_path / "curves.png", "f1")
    assert [(w.category, str(w.message).split(":")[0]) for w in caught] == [
        (PlotWarning, "confusion.png"), (PlotWarning, "curves.png")]
    assert "glyphs of 5 characters" in str(caught[0].message)  # 正 面 负 中 性
    with Image.open(tmp_path / "curves.png") as png:
        assert png.size == (1100, 400)
