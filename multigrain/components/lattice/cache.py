"""Attach lattices to instances, caching them on disk per (data file, builder settings).

One cache file per key, ``<cache_dir>/<data sha256>-<builder+fields sha256>-<chars sha256>.npz``
(each hash cut to 16 hex digits); the last part hashes the characters of every instance, so
two readers that split the same file differently do not share (or thrash) an entry. The file
holds flat arrays, not pickled objects: per lattice its token count, character count and
number of segmentations; all spans (``int32 [sum T, 2]``), sources, word ids into one table
of distinct word texts (stored as UTF-8 bytes plus lengths), and the flattened seg_ids. The
full key is stored inside too and checked on load; an unreadable or mismatching file is
rebuilt with a warning. Writes go to a temporary file then ``os.replace``.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np

from multigrain.components.lattice.builder import LatticeBuilder, file_sha256, gc_paused
from multigrain.components.lattice.types import Lattice
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError, DataWarning
from multigrain.platform.progress import Stage

#: sentences per ``build_many`` call when building: at most, at first, and the seconds a chunk
#: may take before the next one is smaller (``build_in_chunks``)
CHUNK_SIZE = 8192
FIRST_CHUNK = 256
CHUNK_SECONDS = 2.0


def default_cache_dir() -> Path:
    """``$MULTIGRAIN_CACHE/lattices`` when that variable is set, else ``~/.cache/multigrain/lattices``."""
    root = os.environ.get("MULTIGRAIN_CACHE")
    return Path(root) / "lattices" if root else Path.home() / ".cache" / "multigrain" / "lattices"


def data_sha256(path: str) -> str:
    """sha256 of a file's bytes; for a directory, of its files' relative paths and hashes."""
    p = Path(path)
    if not p.is_dir():
        return file_sha256(str(p))
    h = hashlib.sha256()
    for f in sorted(q for q in p.rglob("*") if q.is_file()):
        h.update(f"{f.relative_to(p)}\0{file_sha256(str(f))}\n".encode())
    return h.hexdigest()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _char_lists(instances: Sequence[Instance], fields: dict[str, str]) -> list[Sequence[str]]:
    """The character sequences to build, instance-major then in ``fields`` order."""
    out = []
    for inst in instances:
        for char_field in fields:
            if char_field not in inst:
                path, line = inst.source if inst.source else ("<memory>", None)
                raise DataError(path, line, f"instance has no field {char_field!r} to build a lattice from")
            out.append(inst[char_field])
    return out


def with_lattices(
    instances: Iterable[Instance],
    data_path: str,
    builder: LatticeBuilder,
    fields: dict[str, str],
    cache_dir: Optional[str] = None,
) -> Iterator[Instance]:
    """Set ``instance[lattice_field] = Lattice`` for each ``char_field -> lattice_field`` of
    ``fields`` and yield the instances (all are read first: the cache covers the whole file).

    Lattices come from the cache when its key matches, else are built in chunks with
    ``builder.build_many`` and cached.
    """
    instances = list(instances)
    sentences = _char_lists(instances, fields)
    chars_sha = _sha("\x1e".join("\x1f".join(chars) for chars in sentences))
    spec_sha = _sha(builder.spec_key() + json.dumps(fields, sort_keys=True))
    key = f"{data_sha256(data_path)[:16]}-{spec_sha[:16]}-{chars_sha[:16]}"
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f"{key}.npz"

    lattices = None
    if path.exists():
        try:
            lattices = load_lattices(path, key, sentences)
        except Exception as e:  # any unreadable / inconsistent file is rebuilt
            warnings.warn(f"lattice cache {path} is unusable ({type(e).__name__}: {e}); rebuilding it", DataWarning)
    if lattices is None:
        lattices = build_in_chunks(builder, sentences)
        try:
            save_lattices(path, key, lattices)
        except OSError as e:
            warnings.warn(f"could not write the lattice cache {path}: {e}", DataWarning)

    lattice_fields = list(fields.values())
    it = iter(lattices)
    for inst in instances:
        for name in lattice_fields:
            inst[name] = next(it)
        yield inst


def build_in_chunks(builder: LatticeBuilder, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
    """``builder.build_many`` over ``sentences`` in chunks, as a named progress stage (the
    builder's ``stage_name``): chunks grow from ``FIRST_CHUNK`` to ``CHUNK_SIZE`` sentences while
    one takes under ``CHUNK_SECONDS``, so a slow segmenter still reports progress every few
    seconds and a fast lexicon builds in large chunks."""
    lattices: list[Lattice] = []
    size = FIRST_CHUNK
    with Stage(builder.stage_name, total=len(sentences), unit="sentences") as stage:
        i = 0
        while i < len(sentences):
            started = time.monotonic()
            lattices.extend(builder.build_many(sentences[i : i + size]))
            stage.update(min(size, len(sentences) - i))
            i += size
            if time.monotonic() - started < CHUNK_SECONDS:
                size = min(CHUNK_SIZE, 2 * size)
            else:
                size = max(FIRST_CHUNK, size // 2)
    return lattices


def save_lattices(path: Path, key: str, lattices: Sequence[Lattice]) -> None:
    """Write ``lattices`` compactly to ``path`` (atomically)."""
    table: dict[str, int] = {}
    word_ids = np.fromiter(
        (table.setdefault(w, len(table)) for lat in lattices for w in lat.token_text[lat.n_chars :]),
        dtype=np.int32,
    )
    words = list(table)
    segs = [lat.seg_ids for lat in lattices]
    empty = np.zeros(0, dtype=np.int64)
    arrays = {
        "key": np.frombuffer(key.encode(), dtype=np.uint8),
        "n_tokens": np.fromiter((lat.n_tokens for lat in lattices), np.int64, len(lattices)),
        "n_chars": np.fromiter((lat.n_chars for lat in lattices), np.int64, len(lattices)),
        "n_segs": np.fromiter((-1 if s is None else s.shape[0] for s in segs), np.int64, len(lattices)),
        "spans": np.concatenate([lat.spans for lat in lattices]) if lattices else np.zeros((0, 2), np.int32),
        "sources": _compact(np.concatenate([lat.sources for lat in lattices]) if lattices else empty),
        "word_ids": word_ids,
        "table_utf8": np.frombuffer("".join(words).encode("utf-8", "surrogatepass"), dtype=np.uint8),
        "table_lengths": np.fromiter(map(len, words), np.int64, len(words)),
        "seg_ids": np.concatenate([s.ravel() for s in segs if s is not None] or [empty]),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _compact(a: np.ndarray) -> np.ndarray:
    """The smallest unsigned dtype that holds ``a`` (sources are mostly 0 and a few bits)."""
    return a.astype(np.min_scalar_type(int(a.max()))) if len(a) and a.min() >= 0 else a


def load_lattices(path: Path, key: str, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
    """Read the lattices of ``sentences`` from ``path``; ValueError when it does not match."""
    with np.load(path, allow_pickle=False) as z:
        a = {name: z[name] for name in z.files}
    if a["key"].tobytes().decode() != key:
        raise ValueError("stored key differs")
    n_tokens, n_chars, n_segs = a["n_tokens"], a["n_chars"], a["n_segs"]
    K = len(sentences)
    if not (len(n_tokens) == len(n_chars) == len(n_segs) == K):
        raise ValueError(f"holds {len(n_tokens)} lattices, expected {K}")
    if np.any(n_chars != np.fromiter(map(len, sentences), np.int64, K)) or np.any(n_tokens < n_chars):
        raise ValueError("character counts differ")
    first_tok = np.concatenate([[0], np.cumsum(n_tokens)])
    first_word = np.concatenate([[0], np.cumsum(n_tokens - n_chars)])
    seg_sizes = np.where(n_segs < 0, 0, n_segs * n_chars)
    first_seg = np.concatenate([[0], np.cumsum(seg_sizes)])
    spans, word_ids, seg_flat = a["spans"], a["word_ids"], a["seg_ids"]
    sources = a["sources"].astype(np.int64)
    if spans.dtype != np.int32 or seg_flat.dtype != np.int64 or word_ids.dtype != np.int32:
        raise ValueError("arrays have the wrong dtype")
    if spans.shape != (first_tok[-1], 2) or sources.shape != (first_tok[-1],):
        raise ValueError("span arrays have the wrong size")
    if len(word_ids) != first_word[-1] or len(seg_flat) != first_seg[-1]:
        raise ValueError("word or segmentation arrays have the wrong size")
    nonempty = n_tokens > 0
    if len(spans) and (
        spans.min() < 0
        or np.any(spans[:, 0] > spans[:, 1])
        or np.any(np.maximum.reduceat(spans[:, 1], first_tok[:-1][nonempty]) >= n_chars[nonempty])
    ):
        raise ValueError("spans out of range")
    text = a["table_utf8"].tobytes().decode("utf-8", "surrogatepass")
    ends = np.cumsum(a["table_lengths"]).tolist()
    if (ends[-1] if ends else 0) != len(text):
        raise ValueError("word table is inconsistent")
    table = np.empty(len(ends), dtype=object)
    table[:] = [text[s:e] for s, e in zip([0] + ends[:-1], ends)]
    if len(word_ids) and (word_ids.min() < 0 or word_ids.max() >= len(table)):
        raise ValueError("word ids out of range")
    words = table[word_ids].tolist()
    for arr in (spans, sources, seg_flat):
        arr.flags.writeable = False

    ft, fw, fs = first_tok.tolist(), first_word.tolist(), first_seg.tolist()
    S, n = n_segs.tolist(), n_chars.tolist()
    out = []
    with gc_paused():
        for k, chars in enumerate(sentences):
            chars = tuple(chars)
            seg = None if S[k] < 0 else seg_flat[fs[k] : fs[k + 1]].reshape(S[k], n[k])
            out.append(
                Lattice(chars, spans[ft[k] : ft[k + 1]], chars + tuple(words[fw[k] : fw[k + 1]]),
                        sources[ft[k] : ft[k + 1]], seg)
            )
    return out
