"""``lexicon``: every substring of the sentence that is a lexicon word, via one Aho-Corasick pass.

Sentences of a ``build_many`` call are joined (separated by a newline, which no lexicon word
contains) into one string, the automaton runs once over it, and the matches are mapped back to
(sentence, start char, end char) with numpy. A "character" may span several code points (a
Latin word kept whole, an emoji sequence): a match counts only when it starts at the first code
point of a character and ends at the last code point of one, so no character is ever split.
Word lengths (``min_length``, ``max_length``) count lattice characters, not code points.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from multigrain.components.lattice.builder import LatticeBuilder, assemble, char_offsets, file_sha256
from multigrain.components.lattice.types import Lattice
from multigrain.platform.vec import is_vec_header
from multigrain.platform.digits import whole_number
from multigrain.platform.data import read_lines
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.paths import input_problem

_SEP = "\n"
# Characters that start no lexicon word but are frequent in text: pyahocorasick finds a node's
# child by a linear scan in insertion order, so every text character not in the root's children
# costs a scan of all of them. Giving these a dead-end child up front (key c + _NEVER, value -1)
# makes them cheap; the same reason orders the words by character frequency below.
_FREQUENT_NON_WORD = _SEP + "，。、“”：；！？（）《》—…·．％／" + "".join(chr(c) for c in range(0xFF10, 0xFF1A))
_NEVER = "\ue000"  # a private-use character that never follows in real text


def default_lexicon_path() -> str:
    """The ``dict.txt`` shipped inside the installed jieba package (about 350k words)."""
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        raise ConfigurationError("the default lexicon is jieba's dict.txt, but jieba is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "dict.txt")
    if not os.path.exists(path):
        raise ConfigurationError(f"jieba's dict.txt is missing from the installed package: {path}")
    return path


def read_word_list(path: str) -> tuple[list[str], list[int]]:
    """First whitespace-separated token of each line, and the integer in column 2 when there is
    one (jieba's frequency; else 1). A ``.vec`` header line "count dim" is skipped."""
    words, freqs = [], []
    for number, line in read_lines(path):  # UTF-8, no NUL, bounded lines: a DataError naming the line
        parts = line.split(maxsplit=2)
        if not parts:
            continue
        if number == 1 and is_vec_header(parts):
            continue
        words.append(parts[0])
        frequency = whole_number(parts[1]) if len(parts) > 1 else None
        freqs.append(1 if frequency is None else frequency)
    return words, freqs


@dataclass
class _Lexicon:
    automaton: object
    words: np.ndarray  # object [V]: word text by automaton value
    lengths: np.ndarray  # int64 [V]: code points per word


_LEXICONS: dict[tuple, _Lexicon] = {}


def _load_lexicon(path: str, vocabulary_path: Optional[str], min_code_points: int) -> _Lexicon:
    import ahocorasick

    key = (file_sha256(path), file_sha256(vocabulary_path), min_code_points)
    if key in _LEXICONS:
        return _LEXICONS[key]
    words, freqs = read_word_list(path)
    if vocabulary_path is not None:
        keep = set(read_word_list(vocabulary_path)[0])
        pairs = [(w, f) for w, f in zip(words, freqs) if w in keep]
        words, freqs = [p[0] for p in pairs], [p[1] for p in pairs]
    weight: Counter = Counter()
    for w, f in zip(words, freqs):
        for c in w:
            weight[c] += f
    rank = {c: r for r, (c, _) in enumerate(weight.most_common())}
    unique = [w for w in dict.fromkeys(words) if len(w) >= min_code_points and _SEP not in w]
    unique.sort(key=lambda w: (rank[w[0]], rank[w[1]] if len(w) > 1 else -1))
    automaton = ahocorasick.Automaton(ahocorasick.STORE_INTS)
    for c in _FREQUENT_NON_WORD:
        automaton.add_word(c + _NEVER, -1)
    for i, w in enumerate(unique):
        automaton.add_word(w, i)
    automaton.make_automaton()
    lex = _Lexicon(automaton, np.asarray(unique, dtype=object), np.fromiter(map(len, unique), np.int64, len(unique)))
    _LEXICONS[key] = lex
    return lex


@LatticeBuilder.register("lexicon")
class LexiconBuilder(LatticeBuilder):
    """Words = every occurrence of a lexicon word of ``min_length..max_length`` characters.

    - ``lexicon_path``: one word per line, or a ``.vec`` file (first token per line, optional
      "count dim" header); default jieba's ``dict.txt`` (first column), read in place.
    - ``min_length`` (default 2): single-character words are dropped by default because every
      character is already a token of the lattice.
    - ``vocabulary_path``: keep only lexicon words also listed there (e.g. words that have an
      embedding: pass the ``.vec`` file).
    """

    input_files = ("lexicon_path", "vocabulary_path")

    def __init__(
        self,
        lexicon_path: Optional[str] = None,
        min_length: int = 2,
        max_length: int = 10,
        vocabulary_path: Optional[str] = None,
    ):
        if min_length < 1 or max_length < min_length:
            raise ConfigurationError(f"lexicon: need 1 <= min_length <= max_length, got {min_length}, {max_length}")
        for p in (lexicon_path, vocabulary_path):
            if p is not None and (problem := input_problem(p, "word list file")):  # a FIFO would block
                raise ConfigurationError(f"lexicon: {problem}")
        self.lexicon_path = lexicon_path
        self.min_length = min_length
        self.max_length = max_length
        self.vocabulary_path = vocabulary_path

    def _lexicon(self) -> _Lexicon:
        # a word of fewer code points than min_length characters can never be kept
        return _load_lexicon(self.lexicon_path or default_lexicon_path(), self.vocabulary_path, self.min_length)

    def spec_key(self) -> str:
        return self._spec(
            lexicon=file_sha256(self.lexicon_path or default_lexicon_path()),
            vocabulary=file_sha256(self.vocabulary_path),
            min_length=self.min_length,
            max_length=self.max_length,
        )

    def find(self, sentences: Sequence[Sequence[str]]):
        """Flat matches of all sentences: ``(sent, start, end, word_text, first_char)``, numpy
        arrays [M] (spans inclusive, sentence-relative; word_text an object array) and the ``[B+1]`` offsets."""
        lex = self._lexicon()
        text, c_start, c_end, sent_of_char, first_char = char_offsets(sentences, _SEP)
        if len(c_start) and np.any(c_end == c_start):
            raise ValueError("a character of the input is the empty string")
        flat = np.fromiter(itertools.chain.from_iterable(lex.automaton.iter(text)), dtype=np.int64)
        end_pos, value = flat[0::2], flat[1::2]
        value_ok = value >= 0
        end_pos, value = end_pos[value_ok], value[value_ok]
        start_pos = end_pos - lex.lengths[value] + 1
        start_char_at = np.full(len(text) + 1, -1, dtype=np.int64)
        start_char_at[c_start] = np.arange(len(c_start))
        end_char_at = np.full(len(text) + 1, -1, dtype=np.int64)
        end_char_at[c_end - 1] = np.arange(len(c_end))
        cs, ce = start_char_at[start_pos], end_char_at[end_pos]
        ok = (cs >= 0) & (ce >= 0)
        cs, ce, value = cs[ok], ce[ok], value[ok]
        sent = sent_of_char[cs]
        n_chars = ce - cs + 1
        ok = (sent_of_char[ce] == sent) & (n_chars >= self.min_length) & (n_chars <= self.max_length)
        sent, cs, ce, value = sent[ok], cs[ok], ce[ok], value[ok]
        offset = first_char[sent]
        return sent, cs - offset, ce - offset, lex.words[value], first_char

    def build_many(self, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
        sent, start, end, text, first_char = self.find(sentences)
        return assemble(sentences, first_char, sent, start, end, text)
