"""``lattice_tokens``'s check of a pre-training run's files (``check_same_inputs``): a damaged
``config.json`` is no crash (it only tells which encoder the run used), a damaged vocabulary is one
error naming its file."""
import json

import pytest

from multigrain.components.embedders.lattice_tokens import check_same_inputs
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.vocab import Vocabulary

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deeply_nested_config_json_is_read_as_no_config(tmp_path):
    (tmp_path / "config.json").write_text(DEEP, encoding="utf-8")
    vocab = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "甲"]})
    assert check_same_inputs(vocab, str(tmp_path), words=False) is None  # no RecursionError


def test_a_damaged_vocabulary_of_the_run_names_its_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model": {"embedder": {"type": "lattice_tokens",
                                                                                "words": False}}}), encoding="utf-8")
    (tmp_path / "vocabulary").mkdir()
    saved = tmp_path / "vocabulary" / "vocabulary.json"
    saved.write_text(DEEP, encoding="utf-8")
    vocab = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "甲"]})
    with pytest.raises(ConfigurationError, match=rf"^{saved}: damaged vocabulary \(nested deeper than 200 levels"):
        check_same_inputs(vocab, str(tmp_path), words=False)
