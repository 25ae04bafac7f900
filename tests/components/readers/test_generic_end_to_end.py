"""Specs over generic readers only, written with the spec library's entry points for a data set
of one's own (``ner.dataset``, ``sentence.dataset``), train a tiny NER model and a tiny pair
model through the CLI; each is scored on its own training file and must have learnt it."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from tests.components.readers.generic_data import ner_records, pair_rows, write_ner, write_pairs
from tests.conftest import ROOT, run_cli

LIB = ROOT / "jsonnet_configs" / "lib"

NER_SPEC = """
local ner = import '%(lib)s/ner.libsonnet';
local data = ner.dataset('tiny_people',
  reader={ type: 'jsonl_spans', scheme: 'BIOES' },
  train='%(train)s', validation='%(train)s', test='%(train)s',
  validation_reader={ type: 'jsonl_spans', scheme: 'BIOES', split: 'dev', dev_fraction: 0.5 });
ner.spec(data, {
  type: 'tagger',
  embedder: { type: 'char_bigram', char_dim: 16, bigram_dim: 16, dropout: 0.0 },
  encoder: { type: 'bilstm', hidden_size: 32 },
  head: { type: 'crf' },
}, trainer=ner.trainer(epochs=12, lr=0.03), batch_size=4)
"""

PAIR_SPEC = """
local sentence = import '%(lib)s/sentence.libsonnet';
local reader = { type: 'table', text_columns: ['sentence1', 'sentence2'], label_map: { '0': 'other', '1': 'same' } };
local data = sentence.dataset('pair', 'tiny_questions', reader, train='%(train)s', validation='%(train)s',
                              test='%(train)s', max_length=40);
sentence.spec(data, 'backbone', batch_size=5) + {
  model+: { embedder: { type: 'char_transformer', hidden_size: 32, num_layers: 2, num_heads: 2, max_length: 64,
                        dropout: 0.0, attention_dropout: 0.0 } },
  trainer: { num_epochs: 30, optimizer: { type: 'adam', lr: 3e-3 }, validation_metric: '+accuracy', patience: 8 },
  seed: 3,
}
"""


def train(tmp_path, name: str, template: str, data: str) -> dict:
    spec = tmp_path / f"{name}.jsonnet"
    spec.write_text(template % {"lib": LIB, "train": data}, encoding="utf-8")
    result = run_cli("train", spec, "-s", tmp_path / name, "--no-tracking", cwd=tmp_path,
                     env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((tmp_path / name / "metrics.json").read_text(encoding="utf-8"))


def test_generic_readers_train_a_tagger_and_a_pair_classifier_through_the_cli(tmp_path):
    people = write_ner(tmp_path / "people.jsonl", ner_records(24))
    questions = write_pairs(tmp_path / "questions.tsv", pair_rows())
    with ThreadPoolExecutor(2) as pool:  # two independent trainings, side by side
        ner, pairs = pool.map(train, [tmp_path] * 2, ["ner", "pairs"], [NER_SPEC, PAIR_SPEC], [people, questions])

    config = json.loads((tmp_path / "ner" / "config.json").read_text(encoding="utf-8"))
    assert config["dataset"] == "tiny_people"
    assert config["test_dataset_reader"] == {"type": "jsonl_spans", "scheme": "BIOES"}  # not the dev reader's split
    assert config["validation_dataset_reader"]["split"] == "dev"
    assert ner["task"] == "ner" and ner["test"]["f1"] >= 0.9, ner["test"]

    assert pairs["task"] == "pair" and pairs["test"]["accuracy"] >= 0.9, pairs["test"]
    vocabulary = json.loads((tmp_path / "pairs" / "vocabulary" / "vocabulary.json").read_text(encoding="utf-8"))
    assert vocabulary["labels"] == ["other", "same"]  # the label_map's names
