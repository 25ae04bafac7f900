"""``vocabulary.directory``: the namespaces of a saved vocabulary are taken row for row; the others
(a task's labels) are built from the data; a folder without a vocabulary is one clear error."""
from collections import Counter

import pytest

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.vocab import Vocabulary, VocabularyConfig


def test_saved_namespaces_win_and_missing_ones_come_from_the_data(tmp_path):
    saved = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "乙", "甲"], "words": ["@@PAD@@", "@@UNK@@", "甲乙"]})
    saved.save(tmp_path / "vocabulary")
    built = Vocabulary.from_counters({"chars": Counter("甲甲丙"), "tags": Counter(["O", "B-X"])})
    merged = built.with_namespaces_of(VocabularyConfig(directory=str(tmp_path / "vocabulary")).fixed())
    assert merged.tokens("chars") == ["@@PAD@@", "@@UNK@@", "乙", "甲"]  # not the data's order, no 丙
    assert merged.tokens("words") == ["@@PAD@@", "@@UNK@@", "甲乙"]
    assert merged.tokens("tags") == ["O", "B-X"]
    assert built.tokens("chars") == ["@@PAD@@", "@@UNK@@", "甲", "丙"]  # the data's vocabulary is left as it was


def test_a_folder_without_a_vocabulary_is_an_error(tmp_path):
    with pytest.raises(ConfigurationError, match="holds no vocabulary.json"):
        VocabularyConfig(directory=str(tmp_path))
    (tmp_path / "vocabulary.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="is not a vocabulary"):
        VocabularyConfig(directory=str(tmp_path)).fixed()
