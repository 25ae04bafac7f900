"""``vocabulary.directory``: the namespaces of a saved vocabulary are taken row for row; the others
(a task's labels) are built from the data; a folder without a vocabulary is one clear error."""
from collections import Counter
from pathlib import Path

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
    from multigrain.platform.errors import Problem
    from multigrain.platform.vocab import spec_problems

    assert spec_problems({"directory": str(tmp_path), "pretrained_files": {"chars": str(tmp_path / "c.vec")}}) == [
        Problem("vocabulary.directory", f"{tmp_path} holds no vocabulary.json (give a run's vocabulary folder)",
                "file"),
        Problem("vocabulary.pretrained_files.chars",
                f"file not found: {tmp_path / 'c.vec'} (paths are relative to {Path.cwd()})", "file")]
    with pytest.raises(ConfigurationError, match="vocabulary.directory: .* holds no vocabulary.json"):
        VocabularyConfig(directory=str(tmp_path)).fixed()  # a run directory's spec builds without it
    (tmp_path / "vocabulary.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ConfigurationError) as e:
        VocabularyConfig(directory=str(tmp_path)).fixed()
    assert str(e.value) == (f"vocabulary.directory: {tmp_path / 'vocabulary.json'}: damaged vocabulary "
                            f"(bad JSON: Expecting ',' delimiter (column 6))")


def test_a_namespace_a_loaded_vocabulary_lacks_names_its_file(tmp_path):
    from multigrain.platform.errors import DataError

    Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "甲"]}).save(tmp_path)
    loaded = Vocabulary.load(tmp_path)
    assert loaded.source == tmp_path / "vocabulary.json" and loaded.tokens("chars") == ["@@PAD@@", "@@UNK@@", "甲"]
    for ask in (lambda v: v.tokens("tags"), lambda v: v.index("tags", "O"), lambda v: v.indices("words", ["甲"]),
                lambda v: v.token("tags", 0), lambda v: v.index_of("words")):
        with pytest.raises(DataError) as e:
            ask(loaded)
        assert str(e.value).startswith(f"{tmp_path / 'vocabulary.json'}: no '")
        assert str(e.value).endswith("' namespace, which the model needs (the file has 'chars')")
        with pytest.raises(KeyError):  # a vocabulary built here has no file to name
            ask(Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "甲"]}))
