"""Several named test sets per run (``test_sets``, platform/test_sets.py): a tiny tagger trained
once is scored on two extra files; each set gets one leaderboard row in its own experiment
``<task>/<name>`` with the scores an independent evaluation of the archive gives; the model's
``tracking_tags()`` tag the run and the rows; ``multigrain log`` (replay) and evaluate-all's
recording give the same rows; bad names and missing files are spec errors."""
from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.kinds import Model
from multigrain.platform.leaderboard import leaderboard
from multigrain.platform.ray.evaluate import split_data_arguments
from multigrain.platform.specs import spec_hash
from multigrain.platform.tracking import record_test_sets
from multigrain.testing import copy_sentences
from tests.conftest import DATA, resume_tagger_spec

TAGS = {"scorer": "seqeval-like span F1", "data_version": "resume-dev"}


def numbered_tags():
    """``tracking_tags`` whose ``call`` tag counts its calls: the run's tags are taken after its own
    evaluations, each set's right after that set's evaluation (a translator's sacrebleu signature
    names the reference count of the set just scored)."""
    calls = []

    def tracking_tags(self):
        calls.append(1)
        return {**TAGS, "call": str(len(calls))}

    return tracking_tags


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger

    folder = tmp_path_factory.mktemp("test_sets")
    spec = resume_tagger_spec(folder / "data")
    plain_hash = spec_hash(spec)
    source = DATA / "resume_ner" / "dev.char.bmes"
    extra_a = copy_sentences(source, folder / "data" / "a.bmes", 26, start=16)
    extra_b = copy_sentences(source, folder / "data" / "b.bmes", 40, start=26)
    spec["test_sets"] = {"extra_a": {"path": extra_a},
                         "extra_b": {"path": extra_b, "reader": {"type": "resume_ner"}}}
    uri = f"sqlite:///{folder / 'm.db'}"
    tagger = Model.by_name("tagger")
    tagger.tracking_tags = numbered_tags()
    try:
        run = Run(spec, folder / "run")
        result = run.train(logger=RunLogger(uri))
        independent = {name: run.evaluate(path)[0] for name, path in (("extra_a", extra_a), ("extra_b", extra_b))}
    finally:
        del tagger.tracking_tags
    return {"folder": folder, "spec": spec, "uri": uri, "result": result, "independent": independent,
            "run": run, "plain_hash": plain_hash, "paths": {"extra_a": extra_a, "extra_b": extra_b}}


def rows_of(uri, experiment):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id])


def test_each_test_set_is_scored_into_metrics_json(trained):
    result, independent = trained["result"], trained["independent"]
    saved = json.loads((trained["folder"] / "run" / "metrics.json").read_text(encoding="utf-8"))
    assert saved["test_sets"]["extra_a"]["examples"] == 10 and saved["test_sets"]["extra_b"]["examples"] == 14
    for name in ("extra_a", "extra_b"):
        assert set(independent[name]) >= {"f1", "precision", "recall"}
        for metric, value in independent[name].items():
            assert saved[f"test_{name}_{metric}"] == pytest.approx(value, abs=1e-9)
    # taken after each evaluation: validation (call 1), test (2), extra_a (3), extra_b (4); the run has
    # each under the evaluation's name, and the plain tags of its own test split (its leaderboard row)
    calls = {"validation": "1", "test": "2", "extra_a": "3", "extra_b": "4"}
    scoped = {f"{key}.{name}": value for name, call in calls.items() for key, value in {**TAGS, "call": call}.items()}
    assert saved["tracking_tags"] == {**TAGS, "call": "2", **scoped}
    assert [saved["test_sets"][n]["tracking_tags"]["call"] for n in ("extra_a", "extra_b")] == ["3", "4"]
    assert [saved["test_sets"][n]["leaderboard_metric"] for n in ("extra_a", "extra_b")] == ["f1", "f1"]
    assert result["test"] != independent["extra_b"]  # another file, other scores (the run's own test split)


def test_one_leaderboard_row_per_test_set_in_its_own_experiment(trained):
    result, uri = trained["result"], trained["uri"]
    for name, call in (("extra_a", "3"), ("extra_b", "4")):
        (row,) = rows_of(uri, f"ner/{name}")
        tags, metrics = row.data.tags, row.data.metrics
        assert row.info.status == "FINISHED"
        assert tags["leaderboard"] == "true" and tags["test_set"] == name and tags["evaluated_on"] == name
        assert tags["spec_hash"] == result["spec_hash"] and tags["leaderboard_metric"] == "test_f1"
        assert {k: tags[k] for k in (*TAGS, "call")} == {**TAGS, "call": call}
        assert metrics["test_f1"] == pytest.approx(trained["independent"][name]["f1"], abs=1e-9)
        (board_row,) = leaderboard(f"ner/{name}", uri)
        assert board_row["value"] == pytest.approx(trained["independent"][name]["f1"], abs=1e-9)
        assert board_row["experiment"] == f"ner/{name}" and board_row["metric"] == "test_f1"
    (main,) = rows_of(uri, "ner/tiny")
    assert main.data.metrics["test_extra_a_f1"] == pytest.approx(trained["independent"]["extra_a"]["f1"], abs=1e-9)
    assert {k: main.data.tags[k] for k in (*TAGS, "call", "call.extra_a")} == {**TAGS, "call": "2", "call.extra_a": "3"}
    # recording again (a resume after a kill between the rows and FINISHED) adds no row
    record_test_sets(trained["spec"], result, uri)
    assert [len(rows_of(uri, f"ner/{n}")) for n in ("extra_a", "extra_b")] == [1, 1]


def test_replay_of_a_run_trained_without_tracking_records_the_rows(trained, tmp_path):
    from multigrain.platform.tracking import replay

    uri = f"sqlite:///{tmp_path / 'other.db'}"
    replay(trained["result"], trained["spec"], uri)
    for name in ("extra_a", "extra_b"):
        (row,) = rows_of(uri, f"ner/{name}")
        assert row.data.metrics["test_f1"] == pytest.approx(trained["independent"][name]["f1"], abs=1e-9)


def test_evaluate_all_on_a_test_set_name(trained, tmp_path):
    """evaluate-all's actor code and recording, without Ray: ``--data extra_b`` scores the set with
    its own reader and adds a row to ``ner/extra_b``."""
    from multigrain.platform.ray.evaluate import ArchiveEvaluator, record_evaluations

    run_dir = str(trained["folder"] / "run")
    assert split_data_arguments([run_dir], ["extra_b", trained["paths"]["extra_a"]]) == \
           ([trained["paths"]["extra_a"]], ["extra_b"])
    with pytest.raises(ConfigurationError, match="--data wmt99: no such file, and no test set of that name"):
        split_data_arguments([run_dir], ["wmt99"])
    row = ArchiveEvaluator().evaluate(run_dir, "extra_b", test_set="extra_b")
    assert row["examples"] == 14 and row["data"] == trained["paths"]["extra_b"]
    assert row["metrics"]["f1"] == pytest.approx(trained["independent"]["extra_b"]["f1"], abs=1e-9)
    uri = f"sqlite:///{tmp_path / 'eval.db'}"
    record_evaluations([row], uri)
    (logged,) = rows_of(uri, "ner/extra_b")
    assert logged.data.tags["test_set"] == "extra_b"
    assert logged.data.metrics["test_f1"] == pytest.approx(row["metrics"]["f1"], abs=1e-9)


def test_bad_test_set_names_and_missing_files_are_spec_errors(trained, tmp_path):
    from multigrain.platform.runs import Run

    spec = json.loads(json.dumps(trained["spec"]))
    spec["test_sets"] = {"wmt-22": {"path": trained["paths"]["extra_a"]},
                         "gone": {"path": str(tmp_path / "nowhere.bmes")},
                         "typo": {"path": trained["paths"]["extra_a"], "reder": {"type": "resume_ner"}}}
    with pytest.raises(SpecError) as caught:
        Run(spec, tmp_path / "run")
    paths = {p.path for p in caught.value.problems}
    assert paths == {"test_sets.wmt-22", "test_sets.gone.path", "test_sets.typo.reder"}, str(caught.value)


def test_the_key_leaves_other_spec_hashes_alone(trained):
    spec = json.loads(json.dumps(trained["spec"]))
    del spec["test_sets"]
    assert spec_hash(spec) == trained["plain_hash"]
