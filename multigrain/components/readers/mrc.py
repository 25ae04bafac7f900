"""Span-extraction MRC readers for SQuAD-style JSON (CMRC 2018, DRCD): one Instance per question.

Fields: ``id``, ``question``, ``context`` (raw), ``answers: list[{"text", "answer_start"}]``
(every one satisfies ``context[start:start+len(text)] == text``; usable as a training span),
``answer_texts: list[str]`` (every answer text as given, for EM/F1 evaluation), and
``question_chars`` / ``context_chars`` (``split_chars``; map ``answer_start`` to a token with
``token_starts``, both in ``multigrain.components.text``). ``source`` line: the line of the
question's ``"question"`` key.

What the shipped files contain, and why ``on_bad_answer`` defaults to ``"fix"``:
``cmrc2018_train.json`` has 21 answers whose ``answer_start`` is off by 1-2 characters,
``cmrc2018_trial.json`` 5 such; ``cmrc2018_dev.json`` has 7 such plus 193 answers with
``answer_start = -1`` whose text does not occur in the context at all (free-form answers); DRCD
has none. ``"fix"`` moves an answer to the occurrence of its text nearest the given start and
drops it from ``answers`` (keeping it in ``answer_texts``) when the text does not occur; so every
dev question keeps its references for evaluation and may have fewer span answers (on the
shipped files every question keeps at least one).
``"skip"`` drops every mismatching answer from ``answers``; ``"error"`` raises DataError.
``cmrc2018_trial.json`` has 2 questions with an empty ``question``: a DataError by default
(``on_empty_question="error"``), or ``"skip"``/``"keep"`` them.
"""
from __future__ import annotations

import json
import re
import warnings
from typing import Any, Iterator, Literal, Optional

from multigrain.components.readers.files import read_text, shorten
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError, DataWarning
from multigrain.platform.jsonio import MAX_DEPTH, JsonTextError, loads, nesting_depth, too_long_number_line
from multigrain.platform.kinds import Reader

_JSON_STRING = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")\s*(:)?')
_SURROGATE = re.compile("[\ud800-\udfff]")


def key_lines(text: str, keys: set[str]) -> dict[str, list[int]]:
    """The 1-based line of every occurrence of each object key in ``keys``, in document order.

    Scans JSON string tokens left to right (so a key-like text inside a string value is never
    taken for a key); a token followed by ``:`` is a key.
    """
    found: dict[str, list[int]] = {key: [] for key in keys}
    quoted = {json.dumps(key): key for key in keys}
    line, at = 1, 0
    for match in _JSON_STRING.finditer(text):
        if match.group(2) is None:
            continue
        key = quoted.get(match.group(1))
        if key is not None:
            line += text.count("\n", at, match.start())
            at = match.start()
            found[key].append(line)
    return found


class SquadReader(SentenceReader):
    """SQuAD v1-style JSON (``{"data": [{"paragraphs": [{"context", "qas": [{"id", "question",
    "answers": [{"text", "answer_start"}]}]}]}]}``), see the module docstring. ``split`` keys
    on the context, so the questions of one paragraph stay in one split."""

    lattice_fields = {"context_chars": "lattice"}
    split_key_fields = ("context_chars",)

    def __init__(
        self,
        on_bad_answer: Literal["error", "skip", "fix"] = "fix",
        on_empty_question: Literal["error", "skip", "keep"] = "error",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if on_bad_answer not in ("error", "skip", "fix"):
            raise ConfigurationError(f"on_bad_answer must be 'error', 'skip' or 'fix', got {on_bad_answer!r}")
        if on_empty_question not in ("error", "skip", "keep"):
            raise ConfigurationError(f"on_empty_question must be 'error', 'skip' or 'keep', got {on_empty_question!r}")
        self.on_bad_answer = on_bad_answer
        self.on_empty_question = on_empty_question

    def _read(self, path: str) -> Iterator[Instance]:
        text = read_text(path)
        if not text.strip():
            return
        document = _document(path, text)
        lines = key_lines(text, {"question", "context"})
        data = document.get("data") if isinstance(document, dict) else None
        if not isinstance(data, list):
            raise DataError(path, 1, 'expected a JSON object with a "data" list (SQuAD format)')
        paragraphs = [p for article in data for p in _list(path, None, article, "paragraphs")]
        questions = [qa for p in paragraphs for qa in _list(path, None, p, "qas")]
        paragraph_lines = lines["context"] if len(lines["context"]) == len(paragraphs) else None
        question_lines = lines["question"] if len(lines["question"]) == len(questions) else None
        stats = {"moved": 0, "dropped": 0}
        seen: set[str] = set()
        q = 0
        for p, paragraph in enumerate(paragraphs):
            p_line = paragraph_lines[p] if paragraph_lines else None
            context = _field(path, p_line, paragraph, "context", str)
            if not context.strip():
                raise DataError(path, p_line, "empty context")
            context_chars = split_chars(context, self.keep_latin_words)
            for qa in paragraph["qas"]:
                line = question_lines[q] if question_lines else p_line
                q += 1
                instance = self._question(path, line, qa, context, context_chars, stats, seen)
                if instance is not None:
                    yield instance
        if stats["moved"] or stats["dropped"]:
            warnings.warn(
                f"{path}: on_bad_answer={self.on_bad_answer!r}: {stats['moved']} answers moved to where "
                f"their text occurs, {stats['dropped']} not found at their answer_start dropped from "
                f"'answers' (still in 'answer_texts')", DataWarning
            )

    def _question(self, path, line, qa, context, context_chars, stats, seen) -> Optional[Instance]:
        if not isinstance(qa, dict):
            raise DataError(path, line, f"expected a question object, found {type(qa).__name__}")
        qa_id = str(_field(path, line, qa, "id", (str, int)))
        if qa_id in seen:
            raise DataError(path, line, f"question id {_cut(qa_id)} appears twice")
        seen.add(qa_id)
        question = _field(path, line, qa, "question", str)
        if not question.strip():
            if self.on_empty_question == "error":
                raise DataError(path, line, f"empty question (id {_cut(qa_id)})")
            if self.on_empty_question == "skip":
                return None
        answers, texts = [], []
        for answer in _field(path, line, qa, "answers", list):
            if not isinstance(answer, dict):
                raise DataError(path, line, f"question {_cut(qa_id)}: expected answer objects, found "
                                            f"{type(answer).__name__}")
            text = _field(path, line, answer, "text", str)
            start = _field(path, line, answer, "answer_start", int)
            texts.append(text)
            located = self._locate(path, line, qa_id, context, text, start, stats)
            if located is not None:
                answers.append({"text": text, "answer_start": located})
        return Instance(
            {
                "id": qa_id,
                "question": question,
                "context": context,
                "answers": answers,
                "answer_texts": texts,
                "question_chars": split_chars(question, self.keep_latin_words),
                "context_chars": list(context_chars),
            },
            source=(path, line),
        )

    def _locate(self, path, line, qa_id, context, text, start, stats) -> Optional[int]:
        if text and 0 <= start and context[start:start + len(text)] == text:
            return start
        if self.on_bad_answer == "error":
            where = "outside its context" if not 0 <= start < len(context) else "does not match its context"
            found = context[start:start + len(text)] if 0 <= start else ""
            raise DataError(
                path, line,
                f"question {_cut(qa_id)}: answer {shorten(text)} at answer_start={start} {where} "
                f"(context there: {shorten(found)}; context length {len(context)})",
            )
        if self.on_bad_answer == "fix" and text:
            occurrences = _occurrences(context, text)
            if occurrences:
                stats["moved"] += 1
                return min(occurrences, key=lambda i: (abs(i - start), i))
        stats["dropped"] += 1
        return None


def _document(path: str, text: str) -> Any:
    """The JSON document of a SQuAD file by ``jsonio.loads`` (no nesting deeper than ``MAX_DEPTH``, no
    lone surrogate); a DataError names the line of the problem."""
    try:
        return loads(text)
    except JsonTextError as e:
        raise DataError(path, _problem_line(text), str(e)) from None


def _problem_line(text: str) -> Optional[int]:
    """The line where ``loads`` failed on ``text`` (found again only on this error path): where the
    nesting passes ``MAX_DEPTH``, the line of a syntax error, or of the first string (key or value)
    that holds a lone surrogate."""
    if nesting_depth(text) > MAX_DEPTH:  # the shortest prefix that is too deep (deepest-so-far grows)
        low, high = 0, len(text)
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if nesting_depth(text[:middle + 1]) > MAX_DEPTH else (middle + 1, high)
        return text.count("\n", 0, low) + 1
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return e.lineno
    except RecursionError:
        return None
    except ValueError:
        return too_long_number_line(text)
    for match in _JSON_STRING.finditer(text):
        try:
            value = json.loads(match.group(1))
        except ValueError:
            continue
        if _SURROGATE.search(value):
            return text.count("\n", 0, match.start()) + 1
    return None


def _cut(text: str, limit: int = 30) -> str:
    """``text`` (an id) unquoted, cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else text[:limit] + "..."


def _occurrences(context: str, text: str) -> list[int]:
    """Every start of ``text`` in ``context``, overlapping ones included."""
    found, at = [], context.find(text)
    while at >= 0:
        found.append(at)
        at = context.find(text, at + 1)
    return found


def _field(path: str, line: Optional[int], obj: Any, key: str, kind) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise DataError(path, line, f"expected key {key!r} in {_describe(obj)}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise DataError(path, line, f"{key!r}: expected {names}, found {type(value).__name__} {shorten(str(value))}")
    return value


def _list(path: str, line: Optional[int], obj: Any, key: str) -> list:
    return _field(path, line, obj, key, list)


def _describe(obj: Any) -> str:
    if isinstance(obj, dict):
        return "object with keys " + ", ".join(shorten(k)[1:-1] for k in sorted(map(str, obj))[:6])
    return type(obj).__name__


@Reader.register("squad")
class SquadFormatReader(SquadReader):
    """Any SQuAD v1-style file (the generic name of the format: a new MRC data set needs no code).
    Offsets ``answer_start`` count characters (Python code points) of the context; a question
    with ``"answers": []`` is read (predicted, not scored). Options: ``on_bad_answer``,
    ``on_empty_question``, ``keep_latin_words`` and every reader's ``split``."""


@Reader.register("cmrc2018")
class Cmrc2018Reader(SquadReader):
    """CMRC 2018 (simplified Chinese). Shipped: train 10,142 / dev 3,219 / trial 1,002 questions
    (2,403 / 848 / 256 paragraphs); the trial file needs ``on_empty_question="keep"`` (or
    ``"skip"``: 1,000). See the module docstring for the answers that do not match."""


@Reader.register("drcd")
class DrcdReader(SquadReader):
    """DRCD (traditional Chinese; one-line JSON, so every ``source`` line is 1). Shipped:
    dev 3,524 / test 3,493 questions; every answer matches its context."""
