"""Characters <-> word pieces: every character gets exactly one backbone position.

A WordPiece tokenizer does not keep one piece per character. Over ``text = c_0 .. c_{n-1}`` it
returns pieces ``p_0 .. p_{m-1}`` with character spans ``[s_k, e_k)``, and

- *merges*: one piece covers several characters (``2017``, ``ok``, an unknown Latin word as one
  ``[UNK]``);
- *splits*: several pieces cover one character (byte-level tokenizers; not WordPiece);
- *drops*: no piece covers a character (spaces, zero-width and control characters).

:func:`align` turns the pieces into the sequence the backbone reads and a map ``char_to_position
[n]`` into it: a merged character points at its piece, a split one at its first piece, and a
dropped one gets a placeholder position of its own (the caller puts ``[UNK]`` there), inserted
where the character stands, so that it still gets a contextual state. :func:`piece_place` tells
the characters of one piece apart (single / first / inside / last), which the embedder adds as a
learned vector: without it every character of ``2017`` would get the same state, and a tagger
could not put B- and E- tags inside it.
"""
from __future__ import annotations

from typing import Sequence

SINGLE, FIRST, INSIDE, LAST = 0, 1, 2, 3


def align(n_chars: int, spans: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """``(sequence, char_to_position)``.

    ``spans[k] = (s_k, e_k)``: piece k covers characters ``s_k .. e_k - 1`` (``e_k > s_k``).
    ``sequence`` lists, in text order, ``k >= 0`` for piece k and ``-1 - i`` for a placeholder of the
    dropped character i; ``char_to_position[i]`` is the index in ``sequence`` of character i's
    position (its first covering piece, or its placeholder)."""
    first_piece = [-1] * n_chars
    for k, (s, e) in enumerate(spans):
        if not 0 <= s < e <= n_chars:
            raise ValueError(f"piece {k} spans [{s}, {e}), outside the text's {n_chars} characters")
        for i in range(s, e):
            if first_piece[i] < 0:
                first_piece[i] = k
    # (character where the item starts, 0 for a piece / 1 for a placeholder, its index)
    items = sorted([(s, 0, k) for k, (s, _) in enumerate(spans)]
                   + [(i, 1, i) for i in range(n_chars) if first_piece[i] < 0])
    sequence = [k if kind == 0 else -1 - k for _, kind, k in items]
    where = {item: j for j, item in enumerate(sequence)}
    char_to_position = [where[first_piece[i]] if first_piece[i] >= 0 else where[-1 - i] for i in range(n_chars)]
    return sequence, char_to_position


def piece_place(char_to_position: Sequence[int]) -> list[int]:
    """Per character: SINGLE when it has its position alone, else FIRST / INSIDE / LAST of the
    characters sharing it (in text order)."""
    n = len(char_to_position)
    out = []
    for i, p in enumerate(char_to_position):
        before = i > 0 and char_to_position[i - 1] == p
        after = i + 1 < n and char_to_position[i + 1] == p
        out.append(INSIDE if before and after else LAST if before else FIRST if after else SINGLE)
    return out


def char_spans(chars: Sequence[str], offsets: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """String offsets ``[start, end)`` over ``"".join(chars)`` -> character index spans (a "character"
    may be several code points; a piece inside one character covers that character)."""
    owner = [i for i, c in enumerate(chars) for _ in c]
    total = len(owner)
    spans = []
    for s, e in offsets:
        if e <= s or s >= total:
            spans.append((-1, -1))  # an empty piece (none in WordPiece); dropped by the caller
            continue
        spans.append((owner[s], owner[min(e, total) - 1] + 1))
    return spans
