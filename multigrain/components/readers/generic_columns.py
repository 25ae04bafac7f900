"""``conll``: sequence labelling data in CoNLL-style columns -> ``chars``, ``tags``.

One token per line, its columns separated by runs of spaces/TABs (``delimiter: null``, the
default) or by exactly ``delimiter`` (e.g. ``"\\t"``, so that a column may hold a space); a blank
line between sentences (the last one may lack it). ``token_column`` and ``tag_column`` pick the
columns (0-based; negative counts from the end: the default tag column is the last); every token
line has the column count of the file's first token line.

- ``-DOCSTART-`` lines (CoNLL 2003) end a sentence and are skipped.
- Comments: before a sentence's first token, a line starting with ``comment_prefix`` (``#``,
  as CoNLL-U's ``# text = ...``) is skipped unless it reads as a token line (its tag column
  holds a tag of the scheme: ``# O`` is the token ``#``). ``comment_prefix: null``: no comments.
- Tags: ``O`` or a prefix of the declared ``scheme`` (BIO, BIOES or BMES) and a type; any other
  tag is a DataError. A sequence that breaks the scheme (``I-X`` after ``O``...) is read as is
  and warned about once per sentence with its line, as the other NER readers do.
- Tokens longer than one character (``multi_char_tokens``): ``keep`` (default) keeps each as
  one token, as ``weibo_ner`` does, so the token count equals the tag count; ``split`` makes
  one token per character and spreads the tag over them (``B-X`` -> ``B-X I-X ...``, ``E-X`` ->
  ``I-X ... E-X``, ``S-X`` -> ``B-X ... E-X``; ``M-`` for ``I-`` in BMES); ``error`` refuses them.
  A control character in a token is a DataError.
"""
from __future__ import annotations

import warnings
from typing import Iterator, Literal, Optional

from multigrain.components.readers.files import read_lines, shorten
from multigrain.components.readers.ner import CharTagReader
from multigrain.components.tag_schemes import check_scheme, ill_formed_positions, in_scheme, parse_tag, scheme_prefixes
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError, DataWarning
from multigrain.platform.kinds import Reader

DOCSTART = "-DOCSTART-"


def spread_tag(tag: str, n: int, scheme: str) -> list[str]:
    """The tags of the ``n`` characters of a token tagged ``tag`` (see the module docstring)."""
    if n == 1 or tag == "O":
        return [tag] * n
    prefix, type_ = parse_tag(tag)
    inside = "M" if scheme == "BMES" else "I"
    first = "B" if prefix in "BS" else inside
    last = "E" if prefix in "ES" else inside
    if scheme == "BIO":
        last = "I"
    return [f"{first}-{type_}"] + [f"{inside}-{type_}"] * (n - 2) + [f"{last}-{type_}"]


@Reader.register("conll")
class ConllReader(CharTagReader):
    """CoNLL-style columns (see the module docstring)."""

    def __init__(
        self,
        scheme: Literal["BIO", "BIOES", "BMES"] = "BIO",
        token_column: int = 0,
        tag_column: int = -1,
        delimiter: Optional[str] = None,
        multi_char_tokens: Literal["keep", "split", "error"] = "keep",
        comment_prefix: Optional[str] = "#",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.scheme = check_scheme(scheme)
        if delimiter == "":
            raise ConfigurationError("delimiter must not be empty (null: runs of spaces and TABs)")
        if multi_char_tokens not in ("keep", "split", "error"):
            raise ConfigurationError(f"multi_char_tokens must be 'keep', 'split' or 'error', got {multi_char_tokens!r}")
        if token_column == tag_column:
            raise ConfigurationError(f"token_column and tag_column are both {token_column}")
        self.token_column, self.tag_column = token_column, tag_column
        self.delimiter = delimiter
        self.multi_char_tokens = multi_char_tokens
        self.comment_prefix = comment_prefix or None
        self.separator_name = "spaces/TABs" if delimiter is None else repr(delimiter)

    def _read(self, path: str) -> Iterator[Instance]:
        return self._char_sentences(path, self._token_lines(path))

    def _token_lines(self, path: str) -> Iterator[tuple[int, str]]:
        """The file's lines, with ``-DOCSTART-`` lines blank (sentence ends), comments dropped,
        and every token line's column count checked."""
        at_start, first = True, None
        for number, line in read_lines(path):
            columns = self._split(line)
            if not columns or columns[0] == DOCSTART:
                at_start = True
                yield number, ""
                continue
            if at_start and self.comment_prefix and line.startswith(self.comment_prefix) \
                    and not self._is_token_line(columns):
                continue
            at_start = False
            first = first or (len(columns), number)
            if len(columns) != first[0]:
                raise DataError(path, number, f"expected {first[0]} columns separated by {self.separator_name} (as "
                                              f"on line {first[1]}), found {len(columns)}")
            yield number, line

    def _split(self, line: str) -> list[str]:
        if self.delimiter is None:
            return line.split()
        return line.split(self.delimiter) if line.strip() else []

    def _is_token_line(self, columns: list[str]) -> bool:
        try:
            return in_scheme(columns[self.tag_column], self.scheme) and bool(columns[self.token_column])
        except IndexError:
            return False

    def _sentence(self, path: str, block: list[tuple[int, str]]) -> Instance:
        chars, tags, lines = [], [], []
        for number, line in block:
            token, tag = self._token_and_tag(path, number, line)
            n = len(token) if self.multi_char_tokens == "split" else 1
            chars += list(token) if n > 1 else [token]
            tags += spread_tag(tag, n, self.scheme)
            lines += [number] * n
        bad = ill_formed_positions(tags, self.scheme)
        if bad:
            at = bad[0]
            previous = shorten(tags[at - 1]) if at else "the sentence start"
            end = " ending the sentence" if at == len(tags) - 1 else ""
            warnings.warn(f"{path}:{lines[at]}: tag {shorten(tags[at])} after {previous}{end} breaks the {self.scheme} "
                          f"scheme; read as is", DataWarning)
        return Instance({"chars": chars, "tags": tags}, source=(path, block[0][0]))

    def _token_and_tag(self, path: str, number: int, line: str) -> tuple[str, str]:
        columns = self._split(line)
        try:
            if len(columns) < 2:  # one column would be both the token and the tag: the whole line
                raise IndexError
            token, tag = columns[self.token_column], columns[self.tag_column]
        except IndexError:
            raise DataError(path, number, f"token_column {self.token_column} / tag_column {self.tag_column}: the "
                                          f"line has {len(columns)} column{'s' if len(columns) != 1 else ''}") from None
        if not token:
            raise DataError(path, number, f"empty token in column {self.token_column}")
        if not in_scheme(tag, self.scheme):
            raise DataError(path, number, f"unknown tag {shorten(tag)}: the {self.scheme} scheme has O and "
                                          f"{'/'.join(p + '-' for p in scheme_prefixes(self.scheme))}TYPE "
                                          f"(declare the file's scheme with scheme: BIO|BIOES|BMES)")
        if len(token) > 1 and self.multi_char_tokens == "error":
            raise DataError(path, number, f"a token of {len(token)} characters {shorten(token)} "
                                          f"(multi_char_tokens: 'keep' or 'split' reads it)")
        for char in token:
            self._char(path, number, char)
        return token, tag
