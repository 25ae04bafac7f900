"""Vocabularies: one token <-> index table per namespace, saved with the model.

Token namespaces reserve index 0 for padding and 1 for out-of-vocabulary tokens; label
namespaces (names ending in ``labels`` or ``tags``) have neither.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Optional

from multigrain.platform.errors import ConfigurationError, DataError, Problem
from multigrain.platform.paths import is_there, not_found

PAD, OOV = "@@PAD@@", "@@UNK@@"


def is_label_namespace(name: str) -> bool:
    return name.endswith("labels") or name.endswith("tags")


class Vocabulary:
    """Token <-> index tables by namespace; ``source``: the ``vocabulary.json`` it was loaded from
    (None when built here), named when a model asks it for a namespace it lacks."""

    def __init__(self, tokens: dict[str, list[str]] | None = None):
        self._itos: dict[str, list[str]] = {}
        self._stoi: dict[str, dict[str, int]] = {}
        self.source: Optional[Path] = None
        for ns, toks in (tokens or {}).items():
            self._set(ns, toks)

    def _set(self, namespace: str, tokens: list[str]) -> None:
        self._itos[namespace] = list(tokens)
        self._stoi[namespace] = {t: i for i, t in enumerate(tokens)}

    @classmethod
    def from_counters(cls, counters: dict[str, Counter], min_count: dict[str, int] | None = None,
                      max_size: dict[str, int] | None = None,
                      extra_tokens: dict[str, Iterable[str]] | None = None) -> "Vocabulary":
        """Deterministic: most frequent first, ties broken by the token itself."""
        min_count = min_count or {}
        max_size = max_size or {}
        vocab = cls()
        for ns in sorted(set(counters) | set(extra_tokens or {})):
            counter = counters.get(ns, Counter())
            if is_label_namespace(ns):
                toks = sorted(counter, key=lambda t: (t != "O", t))  # "O" first when present
            else:
                floor = min_count.get(ns, 1)
                kept = sorted((t for t, c in counter.items() if c >= floor), key=lambda t: (-counter[t], t))
                if ns in max_size:
                    kept = kept[: max_size[ns]]
                toks = [PAD, OOV] + kept
            seen = set(toks)
            for t in (extra_tokens or {}).get(ns, ()):
                if t not in seen:
                    toks.append(t)
                    seen.add(t)
            vocab._set(ns, toks)
        return vocab

    # lookups --------------------------------------------------------------
    def with_namespaces_of(self, other: "Vocabulary") -> "Vocabulary":
        """This vocabulary with every namespace of ``other`` replaced by (or added as) ``other``'s."""
        merged = Vocabulary({ns: self.tokens(ns) for ns in self.namespaces()})
        for ns in other.namespaces():
            merged._set(ns, other.tokens(ns))
        return merged

    def namespaces(self) -> list[str]:
        return sorted(self._itos)

    def size(self, namespace: str) -> int:
        return len(self._itos.get(namespace, ()))

    def tokens(self, namespace: str) -> list[str]:
        return list(self._itos[namespace] if namespace in self._itos else self._missing(namespace))

    def _table(self, namespace: str) -> dict[str, int]:
        return self._stoi[namespace] if namespace in self._stoi else self._missing(namespace)

    def _missing(self, namespace: str):
        """Raises for a namespace this vocabulary lacks: a KeyError, or for a loaded vocabulary
        (a run directory's) a DataError naming its file and the namespace."""
        if self.source is None:
            raise KeyError(namespace)
        raise DataError(self.source, None, f"no {namespace!r} namespace, which the model needs (the file has "
                                           f"{', '.join(map(repr, self.namespaces())) or 'none'})")

    def index(self, namespace: str, token: str) -> int:
        table = self._table(namespace)
        if token in table:
            return table[token]
        if is_label_namespace(namespace):
            raise KeyError(f"label {token!r} is not in the {namespace!r} vocabulary "
                           f"({', '.join(self._itos[namespace][:20])})")
        return 1  # OOV

    def index_of(self, namespace: str) -> Callable[[str], int]:
        """``token -> index`` of ``namespace``, as ``index`` gives it (a label namespace refuses an
        unknown label; elsewhere an unknown token is OOV), with the table looked up once."""
        if is_label_namespace(namespace):
            return lambda token: self.index(namespace, token)
        table = self._table(namespace)
        return lambda token: table.get(token, 1)

    def indices(self, namespace: str, tokens: Iterable[str]) -> list[int]:
        table = self._table(namespace)
        if is_label_namespace(namespace):
            return [self.index(namespace, t) for t in tokens]
        return [table.get(t, 1) for t in tokens]

    def token(self, namespace: str, index: int) -> str:
        return (self._itos[namespace] if namespace in self._itos else self._missing(namespace))[index]

    def contains(self, namespace: str, token: str) -> bool:
        return token in self._stoi.get(namespace, {})

    # persistence ----------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """``directory/vocabulary.json``, written in full or not at all: the text is encoded before
        any file is opened (a token that is no Unicode text, a lone surrogate, is a
        ConfigurationError naming its namespace), then goes through a temporary file beside it that
        replaces the old one (and is removed when writing fails: no empty or partial file)."""
        import os
        import tempfile

        directory = Path(directory)
        try:
            data = json.dumps(self._itos, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(f"cannot save the vocabulary: {self._unencodable()} (no valid Unicode text; "
                                     f"the reader should refuse it)") from None
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".vocabulary.json.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, directory / "vocabulary.json")
        except BaseException:
            os.unlink(tmp)
            raise

    def _unencodable(self) -> str:
        """Where the first token that UTF-8 cannot encode is: ``namespace 'chars', token 7``."""
        for ns, tokens in self._itos.items():
            for i, token in enumerate([ns, *tokens]):
                try:
                    token.encode("utf-8")
                except UnicodeEncodeError as e:
                    what = "its name" if i == 0 else f"token {i - 1}"
                    return f"namespace {ns.encode('utf-8', 'replace').decode()!r}, {what}, holds a lone surrogate " \
                           f"U+{ord(e.object[e.start]):04X}"
        return "a token"

    @classmethod
    def load(cls, directory: str | Path) -> "Vocabulary":
        """The vocabulary saved in ``directory/vocabulary.json`` (``source``): an object of namespace ->
        list of string tokens; anything else (bad or too deeply nested JSON, a list, a token that is
        no string) is a ConfigurationError naming the file (and the namespace)."""
        from multigrain.platform import jsonio

        path = Path(directory) / "vocabulary.json"
        data = jsonio.read_object(path, "damaged vocabulary", ", not an object of namespace -> list of tokens")
        for ns, tokens in data.items():
            if not isinstance(tokens, list):
                raise ConfigurationError(f"{path}: damaged vocabulary (namespace {ns!r}: a {type(tokens).__name__}, "
                                         f"not a list of tokens)")
            bad = next((i for i, t in enumerate(tokens) if not isinstance(t, str)), None)
            if bad is not None:
                raise ConfigurationError(f"{path}: damaged vocabulary (namespace {ns!r}: token {bad} is "
                                         f"{json.dumps(tokens[bad])[:40]}, not a string)")
            if len(set(tokens)) < len(tokens):  # its later indices would not be what the model learned
                first: dict[str, int] = {}
                again = next(i for i, t in enumerate(tokens) if first.setdefault(t, i) != i)
                raise ConfigurationError(f"{path}: damaged vocabulary (namespace {ns!r}: token {again} repeats "
                                         f"token {first[tokens[again]]}, {json.dumps(tokens[again])[:40]})")
        vocab = cls(data)
        vocab.source = path
        return vocab

    def __repr__(self):
        return "Vocabulary(" + ", ".join(f"{ns}={self.size(ns)}" for ns in self.namespaces()) + ")"


NO_VOCABULARY = "{} holds no vocabulary.json (give a run's vocabulary folder)"


def spec_problems(section) -> list[Problem]:
    """The files a new spec's ``vocabulary`` section names that are not there (``directory``,
    ``pretrained_files``), each at its spec path. A run directory's spec is not asked: its
    vocabulary is saved with it."""
    if not isinstance(section, dict):
        return []
    out = []
    directory = section.get("directory")
    if isinstance(directory, str) and not is_there(Path(directory) / "vocabulary.json", "file"):
        out.append(Problem("vocabulary.directory", NO_VOCABULARY.format(directory), "file"))
    files = section.get("pretrained_files")
    for ns, path in sorted(files.items()) if isinstance(files, dict) else ():
        if isinstance(path, str) and not is_there(path, "file"):
            out.append(Problem(f"vocabulary.pretrained_files.{ns}", not_found(path), "file"))
    return out


class VocabularyConfig:
    """The ``vocabulary`` section of a spec.

    ``pretrained_files`` ``{namespace: path}`` (word2vec text format, one token per line first):
    tokens of *any* split (dev and test included, as AllenNLP and the Lattice LSTM code do) that
    the file has a vector for join that namespace, so the embedder can load their vectors; a
    token seen only outside training and not in the file stays out of vocabulary. The
    embedder still needs the same file in its own ``*_pretrained_file`` argument.

    ``directory``: a saved vocabulary (a run's ``vocabulary/`` folder, e.g. of the run whose
    weights a model starts from): every namespace it holds is taken from it as it is, row for row;
    only the namespaces it lacks (a task's labels) are built from the data."""

    def __init__(self, min_count: Optional[dict[str, int]] = None, max_size: Optional[dict[str, int]] = None,
                 pretrained_files: Optional[dict[str, str]] = None, directory: Optional[str] = None):
        self.min_count = min_count or {}
        self.max_size = max_size or {}
        self.pretrained_files = pretrained_files or {}
        self.directory = directory  # read by a fresh run only (``fixed``): a run directory has its own vocabulary

    def fixed(self) -> Optional["Vocabulary"]:
        """The vocabulary of ``directory`` (None without one); a missing or damaged file is a ConfigurationError."""
        if self.directory is None:
            return None
        if not is_there(Path(self.directory) / "vocabulary.json", "file"):
            raise ConfigurationError(f"vocabulary.directory: {NO_VOCABULARY.format(self.directory)}")
        try:
            return Vocabulary.load(self.directory)
        except ConfigurationError as e:  # names the file
            raise ConfigurationError(f"vocabulary.directory: {e}") from None

    def pretrained_tokens(self, counters: dict[str, Counter]) -> dict[str, list[str]]:
        """Per namespace with a pretrained file: the tokens of ``counters`` (all splits) that the
        file holds, most frequent first."""
        out = {}
        for ns, path in sorted(self.pretrained_files.items()):
            if not is_there(path, "file"):
                raise ConfigurationError(f"vocabulary.pretrained_files.{ns}: {not_found(path)}")
            known = vec_tokens(path)
            counter = counters.get(ns, Counter())
            out[ns] = sorted((t for t in counter if t in known), key=lambda t: (-counter[t], t))
        return out


def _umask() -> int:
    """The process's umask (mkstemp's files are private; a saved vocabulary is readable like any file)."""
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def vec_tokens(path: str | Path) -> set[str]:
    """The tokens of a ``.vec`` file."""
    from multigrain.platform.vec import vec_rows

    return {fields[0] for _, fields in vec_rows(path)}
