"""``evaluate``, ``predict --use-dataset-reader`` and evaluate-all read a data file with the spec's
TEST reader (or ``--reader``) and say how many instances were read and scored: a validation reader
that keeps only a hash bucket of its file (``split: 'dev'``) no longer decides what is scored."""
import json
import zlib

import pytest

from multigrain.platform.runs import Run
from multigrain.testing import bilstm_tagger, copy_sentences, read_sentences, tiny_spec
from tests.conftest import DATA

SENTENCES = 30
DEV_FRACTION = 0.3


def in_dev(sentence_block: str) -> bool:
    """The MSRA reader's documented dev bucket, computed here independently."""
    text = "".join(line.split(" ")[0] for line in sentence_block.split("\n"))
    return zlib.crc32(text.encode("utf-8")) % 1000 < DEV_FRACTION * 1000


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 1-epoch tagger whose train and validation readers keep complementary hash buckets of one
    file of 30 MSRA sentences; the test reader (``test_dataset_reader``) keeps all of it."""
    folder = tmp_path_factory.mktemp("evaluate_split")
    data = copy_sentences(DATA / "msra_ner" / "test.char.bmes", folder / "msra30.bmes", SENTENCES)
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "msra_ner", "split": "train",
                                                       "dev_fraction": DEV_FRACTION},
                     data, data, data, task="ner", dataset="msra")
    spec["validation_dataset_reader"] = {"type": "msra_ner", "split": "dev", "dev_fraction": DEV_FRACTION}
    spec["test_dataset_reader"] = {"type": "msra_ner"}
    Run(spec, folder / "run").train(epoch_lines=False)
    blocks = read_sentences(data)
    assert len(blocks) == SENTENCES
    return {"run": folder / "run", "data": data, "spec": spec, "dev": sum(map(in_dev, blocks)),
            "train": sum(not in_dev(b) for b in blocks)}


def test_evaluate_scores_every_instance_with_the_test_reader(trained):
    run = Run.open(trained["run"])
    scores = run.score(trained["data"])
    assert (scores.read, scores.scored, scores.reader, scores.reader_type) == (SENTENCES, SENTENCES, "test", "msra_ner")
    assert run.evaluate(trained["data"]) == (scores.metrics, SENTENCES)
    assert not (trained["run"] / "plugins.json").exists()  # built-in components only: nothing to record
    # the other readers keep their buckets: what the old evaluate scored (validation) and the rest
    assert 0 < trained["dev"] < SENTENCES
    assert run.score(trained["data"], reader="validation").scored == trained["dev"]
    assert run.score(trained["data"], reader="train").scored == trained["train"]


def test_the_test_reader_falls_back_to_the_validation_reader(trained, tmp_path):
    spec = dict(trained["spec"])
    del spec["test_dataset_reader"]
    spec["validation_dataset_reader"] = {"type": "msra_ner"}
    exp = Run(spec, tmp_path / "run").experiment
    assert exp.reader_for("test") is exp.validation_dataset_reader is not exp.dataset_reader
    del spec["validation_dataset_reader"]
    spec["dataset_reader"] = {"type": "msra_ner"}
    exp = Run(spec, tmp_path / "run").experiment
    assert exp.reader_for("test") is exp.reader_for("validation") is exp.dataset_reader


@pytest.mark.parametrize("inherited", ["validation_dataset_reader", "dataset_reader"])
def test_a_test_file_left_to_a_bucket_keeping_reader_is_refused(trained, tmp_path, inherited):
    """No test reader, and the reader it would fall back to keeps a hash bucket: the test file
    would be scored on that bucket only. A new spec is refused, naming the key; a run directory
    trained that way still opens (its spec is loaded as it was trained)."""
    from multigrain.platform.errors import SpecError

    spec = dict(trained["spec"])
    del spec["test_dataset_reader"]
    if inherited == "dataset_reader":
        del spec["validation_dataset_reader"]
    with pytest.raises(SpecError) as caught:
        Run(spec, tmp_path / "run")
    message = str(caught.value)
    assert "test_data_path" in message and f"read by {inherited}, which keeps split" in message
    assert "test_dataset_reader" in message
    assert not (tmp_path / "run").exists()
    spec["test_dataset_reader"] = {"type": "msra_ner", "split": "test", "test_fraction": 0.2}
    Run(spec, tmp_path / "run")  # a bucket of a shared file, asked for by name: accepted
    archived = json.loads((trained["run"] / "config.json").read_text(encoding="utf-8"))
    del archived["test_dataset_reader"]
    Run(archived, trained["run"], check_data_paths=False)


def test_the_cli_prints_the_count_and_json_carries_it(trained, capsys):
    from multigrain.platform.commands import main

    assert main(["evaluate", str(trained["run"]), trained["data"], "--json"]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["instances_read"] == report["instances_scored"] == SENTENCES
    assert report["reader"] == "test" and report["reader_type"] == "msra_ner"
    assert report["metrics"] == Run.open(trained["run"]).score(trained["data"]).metrics
    assert f"msra30.bmes: {SENTENCES} instances read with the test reader (msra_ner), {SENTENCES} scored" in out.err


def test_predict_with_the_dataset_reader_and_a_reader_choice(trained, capsys):
    from multigrain.platform.commands import main

    assert main(["predict", str(trained["run"]), trained["data"], "--use-dataset-reader"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == SENTENCES
    assert f"{SENTENCES} instances read with the test reader (msra_ner), {SENTENCES} predicted" in out.err
    assert main(["predict", str(trained["run"]), trained["data"], "--reader", "validation"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == trained["dev"]
    assert f"{trained['dev']} instances read with the validation reader (msra_ner)" in out.err
    assert main(["evaluate", str(trained["run"]), trained["data"], "--reader", "validation"]) == 0
    assert "scored; the reader keeps only its split 'dev' of the file" in capsys.readouterr().err


def test_evaluate_all_actors_use_the_same_reader_choice(trained):
    from multigrain.platform.ray.evaluate import ArchiveEvaluator

    actor = ArchiveEvaluator()  # the class the Ray actors run, called in this process
    row = actor.evaluate(str(trained["run"]), trained["data"])
    assert (row["examples"], row["reader"]) == (SENTENCES, "test")
    assert row["metrics"] == Run.open(trained["run"]).score(trained["data"]).metrics
    assert actor.evaluate(str(trained["run"]), trained["data"], reader="validation")["examples"] == trained["dev"]
