"""NER readers: char-per-line BMES (Resume, MSRA), Weibo's BIO with NAM/NOM, SIGHAN chunks (MSRA).

Every Instance has ``chars: list[str]`` and ``tags: list[str]`` of equal length. A tag sequence
that breaks its scheme (``I-``/``M-`` without an opening tag, a type change inside an entity,
an entity left open) is read as is, like seqeval's strict mode would later score it, and warned
about once per sentence: ``warnings.warn("path:line: ...")``. An unknown tag or a wrong column
count is a DataError.
"""
from __future__ import annotations

import itertools
import re
import unicodedata
import warnings
from typing import Iterator, Literal, Optional

from multigrain.components.readers.base import FileReader
from multigrain.components.readers.files import read_lines, shorten
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError, DataWarning
from multigrain.platform.kinds import Reader

_BMES_TAG = re.compile(r"O|[BMES]-\S+")
_WEIBO_TAG = re.compile(r"O|[BI]-[^.\s]+\.(?:NAM|NOM)")
_WEIBO_TOKEN = re.compile(r"(.+?)([0-9]+)", re.S)  # char, then its position in its jieba word
_WEIBO_MANGLED = "\ufffd\ufffd"  # an emoji mangled upstream: one token of two characters (see WeiboNerReader)
_NOT_A_CHARACTER = re.compile("[\x00-\x20\x7f-\x9f\ud800-\udfff]")  # control characters, surrogates, space


def _character_problem(text: str) -> Optional[str]:
    """What in ``text`` (characters a file gives as a sentence's) is no text character, or None."""
    match = _NOT_A_CHARACTER.search(text)
    if match is None:
        return None
    return "a space" if match.group() == " " else f"a control character U+{ord(match.group()):04X}"


def bmes_violation(tags: list[str]) -> Optional[int]:
    """Index of the first tag breaking the BMES scheme, or None.

    ``M-X``/``E-X`` must follow ``B-X``/``M-X``; after ``B-X``/``M-X`` only ``M-X``/``E-X`` may
    come; the last tag must not leave an entity open (the last index is returned then).
    """
    open_type = None
    for i, tag in enumerate(tags):
        prefix, kind = tag[0], tag[2:]
        if open_type is None:
            if prefix in "ME":
                return i
        elif prefix not in "ME" or kind != open_type:
            return i
        open_type = kind if prefix in "BM" else None
    return len(tags) - 1 if open_type is not None else None


def bio_violation(tags: list[str]) -> Optional[int]:
    """Index of the first ``I-X`` not preceded by ``B-X`` or ``I-X``, or None."""
    previous = None
    for i, tag in enumerate(tags):
        kind = None if tag == "O" else tag[2:]
        if tag[0] == "I" and kind != previous:
            return i
        previous = kind
    return None


class CharTagReader(FileReader):
    """One ``char SEPARATOR tag`` per line, a blank line between sentences."""

    separator = " "
    separator_name = "SPACE"
    scheme = "BMES"

    def _read(self, path: str) -> Iterator[Instance]:
        return self._char_sentences(path, read_lines(path))

    def _char_sentences(self, path: str, lines: Iterator[tuple[int, str]]) -> Iterator[Instance]:
        block: list[tuple[int, str]] = []
        for number, line in lines:
            if line.strip():
                block.append((number, line))
            elif block:
                yield self._sentence(path, block)
                block = []
        if block:  # the last sentence may lack its terminating blank line
            yield self._sentence(path, block)

    def _sentence(self, path: str, block: list[tuple[int, str]]) -> Instance:
        chars, tags = [], []
        for number, line in block:
            columns = line.split(self.separator)
            if len(columns) != 2 or not columns[0] or not columns[1]:
                raise DataError(
                    path, number,
                    f"expected 2 columns (character {self.separator_name} tag), found {_columns(columns)}"
                    f"{_other_separator(line, self.separator)}",
                )
            chars.append(self._char(path, number, columns[0]))
            tags.append(self._tag(path, number, columns[1]))
        violation = (bmes_violation if self.scheme == "BMES" else bio_violation)(tags)
        if violation is not None:
            self._warn_scheme(path, block[violation][0], tags, violation)
        return Instance(self._fields(chars, tags), source=(path, block[0][0]))

    def _warn_scheme(self, path: str, number: int, tags: list[str], at: int) -> None:
        tag = tags[at]
        if tag[0] in "BM" and at == len(tags) - 1:
            problem = f"the sentence ends inside an entity (last tag {shorten(tag)})"
        else:
            previous = shorten(tags[at - 1]) if at else "the sentence start"
            problem = f"tag {shorten(tag)} after {previous}"
        warnings.warn(f"{path}:{number}: {problem} breaks the {self.scheme} scheme; read as is", DataWarning)

    def _char(self, path: str, number: int, token: str) -> str:
        """One character, not a control character: the character column of BMES files."""
        if len(token) != 1:
            raise DataError(path, number, f"expected one character in the character column, found {len(token):,}: "
                                          f"{shorten(token)}")
        if unicodedata.category(token) in ("Cc", "Cs"):
            raise DataError(path, number, f"a control character U+{ord(token):04X} in the character column")
        return token

    def _tag(self, path: str, number: int, tag: str) -> str:
        if not _BMES_TAG.fullmatch(tag):
            raise DataError(path, number, f"unknown tag {shorten(tag)}: expected O or B-/M-/E-/S-TYPE")
        return tag

    def _fields(self, chars: list[str], tags: list[str]) -> dict:
        return {"chars": chars, "tags": tags}


@Reader.register("resume_ner")
class ResumeNerReader(CharTagReader):
    """Resume NER (Zhang & Yang 2018): ``char SPACE BMES-tag`` per line.

    Shipped: train 3,821 / dev 463 / test 477 sentences (124,099 / 13,890 / 15,100 chars).
    Fields: ``chars``, ``tags`` (``B-NAME`` ... ``O``).
    """


@Reader.register("weibo_ner")
class WeiboNerReader(CharTagReader):
    """Weibo NER (2nd version): ``char+position-digit TAB BIO-tag.NAM|NOM`` per line.

    The position digit(s) of the jieba word are stripped from the character (``科0`` -> ``科``,
    ``310`` -> ``3``). ``entity_kind``: ``"all"`` keeps ``B-PER.NAM``/``B-PER.NOM``;
    ``"NAM"`` keeps named mentions as ``B-PER`` and maps nominal tags to ``O``; ``"NOM"`` the
    converse. Shipped: train 1,350 / dev 270 / test 270 messages (73,778 / 14,509 / 14,842
    chars). A few tokens are two U+FFFD characters (emoji mangled upstream); they stay one
    token so that the token count equals the tag count.
    """

    separator = "\t"
    separator_name = "TAB"
    scheme = "BIO"

    def __init__(self, entity_kind: Literal["all", "NAM", "NOM"] = "all", **kwargs):
        super().__init__(**kwargs)
        if entity_kind not in ("all", "NAM", "NOM"):
            raise ConfigurationError(f"entity_kind must be 'all', 'NAM' or 'NOM', got {entity_kind!r}")
        self.entity_kind = entity_kind

    def _char(self, path: str, number: int, token: str) -> str:
        match = _WEIBO_TOKEN.fullmatch(token)
        if match is None or (len(match.group(1)) != 1 and match.group(1) != _WEIBO_MANGLED):
            raise DataError(
                path, number, f"expected a character followed by its position digit(s), found {shorten(token)}"
            )
        if problem := _character_problem(match.group(1)):
            raise DataError(path, number, f"{problem} in the character column")
        return match.group(1)

    def _tag(self, path: str, number: int, tag: str) -> str:
        if not _WEIBO_TAG.fullmatch(tag):
            raise DataError(path, number, f"unknown tag {shorten(tag)}: expected O or B-/I-TYPE.NAM or .NOM")
        return tag

    def _fields(self, chars: list[str], tags: list[str]) -> dict:
        if self.entity_kind != "all":
            suffix = "." + self.entity_kind
            tags = [tag[:-4] if tag.endswith(suffix) else "O" for tag in tags]
        return {"chars": chars, "tags": tags}


_SIGHAN_TYPES = {"nr": "NR", "ns": "NS", "nt": "NT"}


@Reader.register("msra_ner")
class MsraNerReader(CharTagReader):
    """MSRA NER (SIGHAN 2006), from either shipped format; ``format="auto"`` looks at the first
    non-blank line.

    - ``sighan`` (``train1.txt``, ``testright1.txt``): one sentence per line of space-separated
      ``text/tag`` chunks, tag ``o`` | ``nr`` | ``ns`` | ``nt``; a typed chunk becomes
      BMES tags of type NR/NS/NT over its characters, an ``o`` chunk ``O`` per character.
    - ``char`` (``test.char.bmes``): ``char SPACE BMES-tag`` per line, blank line between sentences.

    Both test files give the same 4,365 sentences (172,601 chars); train has 46,364
    (2,169,879 chars). There is no official dev set: ``split="train"``/``"dev"`` cut one out of
    whatever file is read, deterministically, putting a sentence in dev when
    ``zlib.crc32(sentence.encode()) % 1000 < dev_fraction * 1000`` (identical sentences land
    together; the ``split`` option every reader has, ``readers/base.py``). With the default
    ``dev_fraction=0.1`` on ``train1.txt``: train 41,641 / dev 4,723 sentences (on
    ``testright1.txt``: 3,901 / 464).
    """

    def __init__(self, format: Literal["auto", "sighan", "char"] = "auto", **kwargs):
        super().__init__(**kwargs)
        if format not in ("auto", "sighan", "char"):
            raise ConfigurationError(f"format must be 'auto', 'sighan' or 'char', got {format!r}")
        self.format = format

    def _read(self, path: str) -> Iterator[Instance]:
        lines = read_lines(path)
        first = []
        for number, line in lines:
            first.append((number, line))
            if line.strip():
                break
        fmt = self.format
        if fmt == "auto":
            columns = first[-1][1].split(" ") if first else []
            fmt = "char" if len(columns) == 2 and columns[1] and "/" not in columns[1] else "sighan"
        rest = itertools.chain(first, lines)
        if fmt == "char":
            yield from self._char_sentences(path, rest)
        else:
            yield from self._sighan_sentences(path, rest)

    def _sighan_sentences(self, path: str, lines) -> Iterator[Instance]:
        for number, line in lines:
            if not line.strip():
                continue
            chars: list[str] = []
            tags: list[str] = []
            for chunk in line.split(" "):
                if not chunk:  # the line's trailing space, or two spaces
                    continue
                text, _, tag = chunk.rpartition("/")
                if not text or "/" in text:
                    raise DataError(path, number, f"expected space-separated text/tag chunks (one '/' after a "
                                                  f"non-empty text), found {_chunk(chunk, line)}")
                if problem := _character_problem(text):
                    raise DataError(path, number, f"{problem} in the text of chunk {shorten(chunk)}")
                n = len(text)
                chars.extend(text)
                if tag == "o":
                    tags += ["O"] * n
                elif tag in _SIGHAN_TYPES:
                    kind = _SIGHAN_TYPES[tag]
                    if n == 1:
                        tags.append("S-" + kind)
                    else:
                        tags.append("B-" + kind)
                        tags.extend(["M-" + kind] * (n - 2))
                        tags.append("E-" + kind)
                else:
                    where = "" if chunk.strip() == line.strip() else f" in chunk {shorten(chunk)}"
                    raise DataError(path, number, f"unknown tag {shorten(tag)}{where}: expected o, nr, ns or nt")
            yield Instance({"chars": chars, "tags": tags}, source=(path, number))


def _columns(columns: list[str]) -> str:
    """How a line's columns are wrong, without quoting the line: ``1 column``, ``an empty tag``."""
    if len(columns) != 2:
        return f"{len(columns)} column{'s' if len(columns) != 1 else ''}"
    return "an empty character" if not columns[0] else "an empty tag"


def _other_separator(line: str, separator: str) -> str:
    """A hint when the line's columns are split by the other separator (a TAB-separated file read by
    a SPACE reader, or the converse)."""
    names = {" ": "SPACE", "\t": "TAB"}
    other = "\t" if separator == " " else " "
    if other not in line.strip():
        return ""
    return f" (the line holds a {names[other]}; this reader's columns are separated by one {names[separator]})"


def _chunk(chunk: str, line: str) -> str:
    """What is wrong with a chunk (no ``/``, several, nothing before it) and the chunk quoted (at
    most 30 characters), unless it is the whole line: a file that is no MSRA data (``/etc/passwd``)
    is not shown."""
    slashes = chunk.count("/")
    problem = ("no '/'" if not slashes else "nothing before its '/'" if chunk.startswith("/") and slashes == 1
               else f"{slashes} '/'" if slashes > 1 else "")
    problem = f"a chunk with {problem}" if problem else "a chunk"
    if chunk.strip() == line.strip():
        return f"{problem} (the whole line)"
    return f"{shorten(chunk)} ({problem})"
