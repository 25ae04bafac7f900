"""``SentenceReader``, the shared part of the readers of whole sentences (classification, pairs,
MRC, translation, raw text)."""
from __future__ import annotations

from multigrain.components.readers.base import FileReader
from multigrain.platform.errors import DataError


class SentenceReader(FileReader):
    """Adds the option ``keep_latin_words`` (see ``multigrain.components.text.split_chars``)."""

    def __init__(self, keep_latin_words: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.keep_latin_words = keep_latin_words

    def _non_empty(self, path: str, number: int, text: str, what: str = "text") -> str:
        """``text``; a DataError naming the line when it is blank."""
        if not text.strip():
            raise DataError(path, number, f"empty {what}")
        return text
