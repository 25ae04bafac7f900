"""The spec library's entry points for a data set of one's own: ``ner.dataset`` and
``sentence.dataset`` give ``spec()`` the readers and paths, the test reader included."""
from __future__ import annotations

import pytest

from multigrain.platform.errors import SpecError
from multigrain.platform.specs import load_spec
from tests.conftest import ROOT

LIB = ROOT / "jsonnet_configs" / "lib"


def evaluate(tmp_path, body: str) -> dict:
    path = tmp_path / "spec.jsonnet"
    path.write_text(f"local ner = import '{LIB}/ner.libsonnet';\n"
                    f"local models = import '{LIB}/ner_models.libsonnet';\n"
                    f"local sentence = import '{LIB}/sentence.libsonnet';\n{body}", encoding="utf-8")
    return load_spec(path)


def test_ner_dataset_readers_default_to_the_training_reader_not_to_each_other(tmp_path):
    spec = evaluate(tmp_path, """
        ner.spec(ner.dataset('mine', { type: 'conll', scheme: 'BIOES' }, 'a.txt', 'b.txt', test='c.txt',
                             validation_reader={ type: 'conll', scheme: 'BIOES', split: 'dev' }),
                 ner.bilstm_crf)""")
    assert spec["task"] == "ner" and spec["dataset"] == "mine"
    assert (spec["train_data_path"], spec["validation_data_path"], spec["test_data_path"]) == ("a.txt", "b.txt", "c.txt")
    assert spec["dataset_reader"] == spec["test_dataset_reader"] == {"type": "conll", "scheme": "BIOES"}
    assert spec["validation_dataset_reader"]["split"] == "dev"
    no_test = evaluate(tmp_path, "ner.spec(ner.dataset('mine', { type: 'conll' }, 'a.txt', 'b.txt'), ner.bilstm_crf)")
    assert "test_data_path" not in no_test and "test_dataset_reader" not in no_test


def test_a_split_reader_without_its_other_readers_is_an_error(tmp_path):
    with pytest.raises(SpecError) as caught:
        evaluate(tmp_path, """
            ner.spec(ner.dataset('mine', { type: 'jsonl_spans', split: 'train' }, 'a', 'a', test='a'), ner.bilstm_crf)""")
    assert "the reader keeps split 'train'; give validation_reader and test_reader" in str(caught.value)


def test_ner_models_take_a_dataset_of_ones_own(tmp_path):
    spec = evaluate(tmp_path, "models.spec(ner.dataset('mine', { type: 'jsonl_spans' }, 'a', 'b', test='c'), 'plte')")
    assert spec["model"]["head"]["hidden_size"] == 100 and spec["trainer"]["num_epochs"] == 30
    assert spec["dataset_reader"]["lattice_builder"] == {"type": "lexicon"}
    assert spec["test_dataset_reader"] == spec["dataset_reader"]


@pytest.mark.parametrize("task, model", [("cls", "classifier"), ("pair", "pair_classifier"), ("mrc", "span_reader")])
def test_sentence_dataset_gives_the_task_model_and_the_test_reader(tmp_path, task, model):
    spec = evaluate(tmp_path, f"""
        sentence.spec(sentence.dataset('{task}', 'mine', {{ type: 'table', text_columns: ['t'] }}, 'a', 'b',
                                       test='c', test_reader={{ type: 'table', text_columns: ['t'], split: 'test',
                                                               test_fraction: 0.2 }}), 'backbone')""")
    assert (spec["task"], spec["dataset"], spec["model"]["type"]) == (task, "mine", model)
    assert spec["test_dataset_reader"]["split"] == "test" and spec["test_data_path"] == "c"
    assert spec["validation_dataset_reader"] == spec["dataset_reader"]
    assert "labels" not in spec["model"] and spec["model"]["max_length"] == 128
    with_labels = evaluate(tmp_path, f"""
        sentence.spec(sentence.dataset('{task}', 'mine', {{ type: 'squad' }}, 'a', 'b', labels=['x']), 'big')""")
    assert with_labels["model"].get("labels") == (None if task == "mrc" else ["x"])
    assert with_labels["dataset_reader"]["lattice_builder"] == {"type": "lexicon"}
