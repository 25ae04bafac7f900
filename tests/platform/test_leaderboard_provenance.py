"""What a leaderboard row says about how its run was made (issue 42, items 1-3 and 11): a run
extended twice (``train --resume`` with more epochs) carries its current spec hash, epochs and the
date of its last epoch, keeps its earlier hashes, and ``compare`` finds it by its run directory's
hash; a row scored on a subset of the test file says so in every format and ``--full-test-only``
hides it; two ext-var variants of one spec file have two names; a pre-training run (no test
evaluation) is ranked by its validation score and labelled so. Real tiny trainings through the CLI."""
import csv
import io
import json
import time

import pytest

from multigrain.platform.commands import main as cli_main
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def board(capsys, uri, *extra):
    code, out, err = cli(capsys, "leaderboard", "ner/resume", "--format", "json", "--tracking-uri", uri, *extra)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("provenance")
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", folder / "train.bmes", 12)
    return folder, train


def write_spec(folder, name, spec) -> str:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def test_an_extended_run_carries_its_current_hash_epochs_and_date_and_keeps_its_history(data, capsys):
    from multigrain.platform.specs import spec_hash

    folder, train = data
    uri, run_dir = f"sqlite:///{folder / 'extend.db'}", folder / "run-extend"
    specs = {n: tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, epochs=n, task="ner",
                          dataset="resume") for n in (2, 3, 4)}
    hashes = {n: spec_hash(s) for n, s in specs.items()}
    paths = {n: write_spec(folder, f"extend_e{n}", s) for n, s in specs.items()}
    code, _, err = cli(capsys, "train", paths[2], "-s", run_dir, "--tracking-uri", uri)
    assert code == 0, err
    (first,) = board(capsys, uri)
    assert first["spec_hash"] == hashes[2] and first["epochs"] == first["num_epochs"] == 2
    assert first["spec_hash_history"] == []
    ended = []
    for n in (3, 4):
        time.sleep(1.1)  # dates in whole seconds: each extension ends later
        code, _, err = cli(capsys, "train", paths[n], "-s", run_dir, "--resume", "--tracking-uri", uri)
        assert code == 0, err
        (row,) = board(capsys, uri)
        ended.append(row["date"])
        assert row["spec_hash"] == hashes[n] and row["epochs"] == row["num_epochs"] == n
        assert row["run_id"] == first["run_id"]
        assert row["spec_hash_history"] == [hashes[m] for m in range(2, n)]
    from mlflow.tracking import MlflowClient

    run = MlflowClient(uri).get_run(first["run_id"])
    result = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert result["spec_hash"] == hashes[4] and result["epochs_completed"] == 4
    assert row["value"] == result["test"]["f1"]
    assert time.strftime("%Y-%m-%d %H:%M", time.localtime(run.info.end_time / 1000)) == row["date"]
    assert run.info.end_time >= run.info.start_time and ended[0] <= ended[1]
    assert run.data.tags["seed_group"] != "" and hashes[4][:8] in run.info.run_name
    assert json.loads(run.data.tags["spec_changes"]) == {"trainer.num_epochs": "4"}
    assert run.data.tags["num_epochs"] == "4" and run.data.params["trainer.num_epochs"] == "2"  # params: immutable
    last = time.strftime("%Y-%m-%d %H:%M", time.gmtime(run.info.end_time / 1000))
    assert run.data.tags["last_epoch_at"][:16] <= last and run.data.tags["last_epoch_at"].endswith(" UTC")
    # compare by the run directory's hash (its spec_hash file) and by an earlier hash
    current = (run_dir / "spec_hash").read_text().strip()
    other = write_spec(folder, "other", tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train,
                                                   epochs=1, lr=0.02, task="ner", dataset="resume"))
    assert cli(capsys, "train", other, "-s", folder / "run-other", "--tracking-uri", uri)[0] == 0
    code, out, err = cli(capsys, "compare", current, spec_hash(json.loads(open(other).read())), "--plot",
                         folder / "cmp.png", "--format", "json", "--tracking-uri", uri)
    assert code == 0, err
    result_cmp = json.loads(out.split("\nlearning curves:")[0])
    assert result_cmp["runs"][0]["spec_hash"] == hashes[4]
    assert result_cmp["differences"]["trainer.num_epochs"] == ["4", "1"]
    code, out, _ = cli(capsys, "compare", hashes[2][:10], current, "--plot", folder / "cmp.png", "--format",
                       "json", "--tracking-uri", uri)
    assert code == 0 and json.loads(out.split("\nlearning curves:")[0])["runs"][0]["run_id"] == first["run_id"]
    code, out, _ = cli(capsys, "leaderboard", "ner/resume", "--format", "csv", "--tracking-uri", uri)
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["run id"] == first["run_id"])
    assert row["spec hash"] == hashes[4] and row["epochs"] == "4" and row["spec hash history"] == \
        f"{hashes[2]} {hashes[3]}"


def test_a_subset_row_says_so_in_every_format_and_full_test_only_hides_it(data, capsys):
    folder, train = data
    uri = f"sqlite:///{folder / 'subset.db'}"
    full = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, task="ner", dataset="resume")
    cut = {**full, "test_dataset_reader": {"type": "resume_ner", "max_instances": 5}}
    for name, spec in (("full", full), ("cut", cut)):
        assert cli(capsys, "train", write_spec(folder, name, spec), "-s", folder / f"run-{name}", "--tracking-uri",
                   uri)[0] == 0
    rows = {r["name"]: r for r in board(capsys, uri)}
    assert rows["cut"]["scored_on"] == "test, first 5" and rows["cut"]["subset"] is True
    assert rows["full"]["scored_on"] == "test" and rows["full"]["subset"] is False
    assert [r["name"] for r in board(capsys, uri, "--full-test-only")] == ["full"]
    for fmt in ("md", "csv", "table"):
        code, out, _ = cli(capsys, "leaderboard", "ner/resume", "--format", fmt, "--tracking-uri", uri)
        assert code == 0 and "scored on" in out and "test, first 5" in out, fmt
        code, out, _ = cli(capsys, "leaderboard", "ner/resume", "--format", fmt, "--full-test-only",
                           "--tracking-uri", uri)
        assert "first 5" not in out, fmt


def test_ext_var_variants_of_one_spec_file_have_two_names(data, capsys):
    folder, train = data
    uri = f"sqlite:///{folder / 'variants.db'}"
    spec = folder / "variants.jsonnet"
    base = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, task="ner", dataset="resume")
    spec.write_text(f"local base = {json.dumps(base)};\n"
                    "base + {trainer+: {optimizer+: {lr: std.parseJson(std.extVar('lr'))}}}\n", encoding="utf-8")
    for lr in ("0.01", "0.02"):
        code, _, err = cli(capsys, "train", spec, "--ext-var", f"lr={lr}", "-s", folder / f"run-lr{lr}",
                           "--tracking-uri", uri)
        assert code == 0, err
        assert json.loads((folder / f"run-lr{lr}" / "metrics.json").read_text())["ext_vars"] == {"lr": lr}
    # trained elsewhere (--no-tracking), logged later: its ext-vars travel in metrics.json
    run_dir = folder / "run-lr0.03"
    assert cli(capsys, "train", spec, "--ext-var", "lr=0.03", "-s", run_dir, "--no-tracking")[0] == 0
    result = json.loads((run_dir / "metrics.json").read_text())
    (run_dir / "metrics.json").write_text(json.dumps({**result, "ext_vars": {"lr": 0.03}}))
    code, _, err = cli(capsys, "log", run_dir, "--tracking-uri", uri)
    assert code == 2 and "ext_vars: expected an object of NAME: VALUE strings" in err
    (run_dir / "metrics.json").write_text(json.dumps(result))
    assert cli(capsys, "log", run_dir, "--tracking-uri", uri)[0] == 0
    names = sorted(r["name"] for r in board(capsys, uri))
    assert names == ["variants lr=0.01", "variants lr=0.02", "variants lr=0.03"]
    code, out, _ = cli(capsys, "leaderboard", "ner/resume", "--format", "md", "--tracking-uri", uri)
    assert "| variants lr=0.01 |" in out and "| variants lr=0.02 |" in out


def test_a_run_without_test_evaluation_is_ranked_by_its_validation_score(data, capsys):
    folder, train = data
    uri = f"sqlite:///{folder / 'validation.db'}"
    spec = {**tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, task="ner", dataset="resume"),
            "evaluate_on_test": False}
    assert cli(capsys, "train", write_spec(folder, "devonly", spec), "-s", folder / "run-devonly",
               "--tracking-uri", uri)[0] == 0
    result = json.loads((folder / "run-devonly" / "metrics.json").read_text())
    (row,) = board(capsys, uri)
    assert row["metric"] == "best_validation_f1" and row["scored_on"] == "validation"
    assert row["value"] == result["validation"]["f1"]
    assert board(capsys, uri, "--full-test-only") == []
    from mlflow.tracking import MlflowClient

    run = MlflowClient(uri).get_run(row["run_id"])
    assert run.data.metrics["leaderboard_score"] == result["validation"]["f1"]


def test_a_test_set_row_of_an_extended_run_replaces_its_earlier_row(tmp_path):
    """One row per run directory and test set: the row recorded after an extension (new spec hash)
    retires the earlier one (``leaderboard=false``, ``superseded_by``)."""
    from mlflow.tracking import MlflowClient

    from multigrain.platform.leaderboard import leaderboard
    from multigrain.platform.tracking import record_test_set_row

    uri = f"sqlite:///{tmp_path / 'sets.db'}"
    ident = {"task": "mt", "dataset": "tiny", "model": "translator", "encoder": "big"}
    spec = {"task": "mt", "trainer": {"num_epochs": 2}}
    first = record_test_set_row(spec, ident, "a" * 64, tmp_path / "run", "tvsub", "test.zh", {"bleu": 1.5}, "bleu",
                                {}, uri)
    spec["trainer"]["num_epochs"] = 4
    again = record_test_set_row(spec, ident, "b" * 64, tmp_path / "run", "tvsub", "test.zh", {"bleu": 2.5}, "bleu",
                                {}, uri)
    other = record_test_set_row({"task": "mt", "trainer": {"num_epochs": 3}}, ident, "c" * 64, tmp_path / "other",
                                "tvsub", "test.zh", {"bleu": 0.5}, "bleu", {}, uri)
    tags = MlflowClient(uri).get_run(first).data.tags
    assert tags["leaderboard"] == "false" and tags["superseded_by"] == again
    assert [(r["run_id"], r["value"], r["epochs"]) for r in leaderboard("mt/tvsub", uri)] == [(again, 2.5, 4),
                                                                                             (other, 0.5, 3)]


def record(run_id, seed, value, ended, **tags):
    return {"id": run_id, "run_id": run_id, "experiment": "ner/x", "start_time": 0, "end_time": ended,
            "tags": {"leaderboard_metric": "test_f1", "seed_group": "g", "seed": str(seed), **tags},
            "metrics": {"test_f1": value}, "params": {}}


def test_a_seed_has_one_row_its_latest_run_and_summary_rows_show_their_seeds():
    from multigrain.platform.leaderboard import rows

    (row,) = rows([record("old13", 13, 0.95, 100), record("new13", 13, 0.93, 200), record("s14", 14, 0.91, 150)])
    assert row["values"] == [0.93, 0.91] and row["run_ids"] == ["new13", "s14"] and row["seeds"] == 2
    summary = record("sum", 13, 0.8961, 5, summary_seeds="3", summary_std='{"test_f1": 0.0049}', seed_group="")
    (row,) = rows([summary])
    assert row["seeds"] == 3 and row["std"] == 0.0049 and row["ours"] == "89.61 ± 0.49"


def test_the_committed_board_has_one_row_per_seed_and_true_seed_counts():
    """benchmarks/results/leaderboard.json: ``[seedN]`` runs are seeds of their spec (no ``config``),
    the first seed-13 run of a series that ran seed 13 again is superseded, summary rows stand for
    their seed count with its std; RESULTS.md keeps its labels (``results_key``)."""
    from multigrain.platform.leaderboard import rows
    from multigrain.platform.portable import read_board
    from tests.conftest import ROOT

    runs = read_board(ROOT / "benchmarks" / "results" / "leaderboard.json")
    board_runs = [{"run_id": r["id"], **r} for r in runs if r["tags"].get("leaderboard") == "true"]
    assert not [r["id"] for r in runs if (r["tags"].get("config") or "").startswith("seed")]
    seen = {}
    for r in board_runs:
        if r["tags"].get("seed_group"):
            key = (r["experiment"], r["tags"].get("evaluated_on", ""), r["tags"]["seed_group"], r["tags"]["seed"])
            assert key not in seen, (r["id"], seen.get(key))
            seen[key] = r["id"]
    superseded = {r["id"]: r["tags"]["superseded_by"] for r in runs if r["tags"].get("superseded_by")}
    assert superseded == {"results/ner/resume_plte_vec": "results/ner/resume_plte_vec[seed13]",
                          "results/ner/weibo_plte_vec": "results/ner/weibo_plte_vec[seed13]"}
    by_name = {(r["experiment"], r["name"]): r for r in rows(board_runs)}
    plte = by_name[("ner/resume", "resume_plte_vec")]
    assert plte["seeds"] == 3 and plte["run_ids"] == ["results/ner/resume_plte_vec[seed13]",
                                                      "results/ner/resume_plte_vec[seed14]",
                                                      "results/ner/resume_plte_vec[seed15]"]
    assert plte["paper"] == "95.40 (PLTE Tab. 1)" and by_name[("ner/resume", "resume_bilstm_big")]["seeds"] == 5
    summary = by_name[("cls/chnsenticorp", "chnsenticorp_hrmf [small]")]
    assert summary["seeds"] == 3 and summary["ours"] == "90.83 ± 0.22"
    assert by_name[("cls/chnsenticorp", "chnsenticorp_big [bs32-e10]")]["seeds"] == 1


def test_compare_shows_one_run_alone_with_its_identity(data, capsys):
    folder, train = data
    uri = f"sqlite:///{folder / 'alone.db'}"
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, task="ner", dataset="resume")
    assert cli(capsys, "train", write_spec(folder, "alone [small]", spec), "-s", folder / "run-alone",
               "--tracking-uri", uri)[0] == 0
    digest = (folder / "run-alone" / "spec_hash").read_text().strip()
    code, out, err = cli(capsys, "compare", digest, "--plot", folder / "alone.png", "--tracking-uri", uri)
    assert code == 0, err
    result = json.loads((folder / "run-alone" / "metrics.json").read_text())
    assert digest in out and "alone [small]" in out and f"{result['test']['f1']:.4f}" in out
    assert "spec key (differs)" not in out and (folder / "alone.png").stat().st_size > 0


def test_ui_brings_older_experiments_to_model_training_with_a_leaderboard_view(tmp_path, capsys):
    """An experiment made before experiments were tagged (no ``mlflow.experimentKind``) gets the kind
    and the ``leaderboard`` saved view (the UI's envelope: name, times, state as a JSON string) whose
    columns are ``leaderboard_score`` and the ranking metric; ``ui`` prints its link."""
    from mlflow.tracking import MlflowClient

    from multigrain.platform.commands.ui import print_views
    from multigrain.platform.tracking import open_store

    uri = f"sqlite:///{tmp_path / 'old.db'}"
    open_store(uri)
    client = MlflowClient(uri)
    exp = client.create_experiment("pretrain/corpus")
    run = client.create_run(exp, tags={"leaderboard": "true", "leaderboard_metric": "test_msp_accuracy"})
    client.log_metric(run.info.run_id, "best_validation_msp_accuracy", 0.61)  # pre-training: no test scores
    client.set_terminated(run.info.run_id, "FINISHED")
    print_views(uri, "127.0.0.1", 5999)
    tags = client.get_experiment(exp).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    envelope = json.loads(tags["mlflow.sharedViewState.leaderboard"])
    assert envelope["name"] == "leaderboard" and isinstance(envelope["createdAt"], int)
    assert json.loads(envelope["state"]) == {
        "selectedColumns": ["metrics.`leaderboard_score`", "metrics.`best_validation_msp_accuracy`"],
        "orderByKey": "metrics.`leaderboard_score`", "orderByAsc": False}
    out = capsys.readouterr().out
    assert out == (f"pretrain/corpus: http://127.0.0.1:5999/#/experiments/{exp}/runs?viewStateShareKey=leaderboard"
                   "&workflowType=machine_learning\n")
