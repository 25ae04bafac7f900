"""Tag schemes for sequence labelling: BIO (IOB2), BIOES and BMES.

A label is ``"O"`` or ``<prefix>-<type>`` where the prefix is one letter and the type is any
non-empty string (``"PER.NAM"`` is the type ``PER.NAM``). Prefixes per scheme:

- ``BIO``:   B- (begin), I- (inside)
- ``BIOES``: B-, I-, E- (end), S- (single)
- ``BMES``:  B-, M- (middle), E-, S-  (BIOES with M- in place of I-)

Spans follow seqeval's *strict* mode: in BIO an entity is B-x followed by the longest run of
I-x; in BIOES/BMES it is S-x, or B-x, I-x/M-x..., E-x with one type throughout. Tags that do
not fit (I-x after O, E-x without B-x, a type change inside an entity) belong to no entity.
"""
from __future__ import annotations

from typing import Optional

import torch

from multigrain.platform.errors import ConfigurationError

SCHEMES = ("BIO", "BIOES", "BMES")
_PREFIXES = {"BIO": "BI", "BIOES": "BIES", "BMES": "BMES"}
_INSIDE = {"BIO": "I", "BIOES": "I", "BMES": "M"}


def parse_tag(tag: str) -> tuple[str, Optional[str]]:
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", None)``; anything else raises."""
    if tag == "O":
        return "O", None
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIMES":
        return tag[0], tag[2:]
    raise ConfigurationError(
        f"tag {tag!r} is not 'O' or one of B-/I-/M-/E-/S- followed by a type (e.g. 'B-PER')"
    )


def check_scheme(scheme: str) -> str:
    """``scheme`` when it is one of ``SCHEMES``; a ConfigurationError otherwise."""
    if scheme not in SCHEMES:
        raise ConfigurationError(f"unknown tag scheme {scheme!r}; valid choices: {', '.join(SCHEMES)}")
    return scheme


def detect_scheme(labels: list[str]) -> str:
    """The scheme a label set is written in: ``"BMES"`` if it has M- tags, ``"BIOES"`` if it
    has E- or S- tags, else ``"BIO"`` (so a set with only B- and O counts as BIO)."""
    bad = []
    prefixes = set()
    for label in labels:
        try:
            prefixes.add(parse_tag(label)[0])
        except ConfigurationError:
            bad.append(label)
    if bad:
        raise ConfigurationError(
            f"labels {bad[:10]} match no tag scheme: expected 'O' or B-/I-/E-/S- (BIO, BIOES) "
            f"or B-/M-/E-/S- (BMES) followed by a type"
        )
    if "M" in prefixes:
        if "I" in prefixes:
            raise ConfigurationError("labels mix M- and I- tags: no scheme (BIO, BIOES, BMES) has both")
        return "BMES"
    if prefixes & {"E", "S"}:
        return "BIOES"
    return "BIO"


def in_scheme(tag: str, scheme: str) -> bool:
    """Whether ``tag`` is ``O`` or a prefix of ``scheme`` followed by a type (``M-PER`` is not BIO)."""
    check_scheme(scheme)
    try:
        return _scheme_parse(tag, scheme)[0] != "?"
    except ConfigurationError:
        return False


def scheme_prefixes(scheme: str) -> str:
    """The prefixes ``scheme`` writes, e.g. ``"BI"`` for BIO."""
    return _PREFIXES[check_scheme(scheme)]


def _scheme_parse(tag: str, scheme: str) -> tuple[str, Optional[str]]:
    """Like :func:`parse_tag` but the inside prefix is normalised to ``"I"``; a prefix the
    scheme lacks comes back as ``"?"``."""
    prefix, type_ = parse_tag(tag)
    if prefix == "O":
        return prefix, type_
    if prefix not in _PREFIXES[scheme]:
        return "?", type_
    return ("I" if prefix == _INSIDE[scheme] else prefix), type_


def _may_start(prefix: str) -> bool:
    return prefix in ("O", "B", "S")


def _may_end(prefix: str, scheme: str) -> bool:
    return scheme == "BIO" and prefix != "?" or prefix in ("O", "E", "S")


def _may_follow(prev: tuple[str, Optional[str]], cur: tuple[str, Optional[str]], scheme: str) -> bool:
    (pp, pt), (cp, ct) = prev, cur
    if "?" in (pp, cp):
        return False
    continues = cp == "I" or cp == "E"  # cur needs an open entity of its own type before it
    if continues:
        return pp in ("B", "I") and pt == ct
    # cur opens an entity or is O: in BIO anything may precede; in BIOES/BMES the previous
    # entity must be closed
    return scheme == "BIO" or pp in ("O", "E", "S")


def allowed_transitions(labels: list[str], scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Allowed start tags ``[K]``, end tags ``[K]`` and transitions ``[K, K]`` (row = from,
    column = to), all bool, in ``labels`` order."""
    check_scheme(scheme)
    parsed = [_scheme_parse(label, scheme) for label in labels]
    foreign = [label for label, (p, _) in zip(labels, parsed) if p == "?"]
    if foreign:
        raise ConfigurationError(f"labels {foreign[:10]} do not belong to the {scheme} scheme")
    start = torch.tensor([_may_start(p) for p, _ in parsed], dtype=torch.bool)
    end = torch.tensor([_may_end(p, scheme) for p, _ in parsed], dtype=torch.bool)
    trans = torch.tensor([[_may_follow(a, b, scheme) for b in parsed] for a in parsed], dtype=torch.bool)
    return start, end, trans.reshape(len(labels), len(labels))


def ill_formed_positions(tags: list[str], scheme: str) -> list[int]:
    """Indices of tags that break ``scheme``: a tag that may not follow the previous one
    (I-x after O, E-x after B-y, O after B-x in BIOES...), may not start the sentence, or (the
    last index) may not end it, or whose prefix or form the scheme lacks."""
    check_scheme(scheme)
    bad = []
    prev = None
    for i, tag in enumerate(tags):
        try:
            cur = _scheme_parse(tag, scheme)
        except ConfigurationError:
            cur = ("?", None)
        if cur[0] == "?" or (not _may_start(cur[0]) if prev is None else not _may_follow(prev, cur, scheme)):
            bad.append(i)
        prev = ("O", None) if cur[0] == "?" else cur  # judge the next tag as after O
    if tags and not _may_end(prev[0], scheme) and bad[-1:] != [len(tags) - 1]:
        bad.append(len(tags) - 1)
    return bad


def extract_spans(tags: list[str], scheme: str) -> list[tuple[str, int, int]]:
    """Entities ``(type, start, end)`` with ``end`` inclusive, in order, by strict rules."""
    check_scheme(scheme)
    parsed = []
    for tag in tags:
        prefix, type_ = _scheme_parse(tag, scheme)
        if prefix == "?":
            raise ConfigurationError(f"tag {tag!r} does not belong to the {scheme} scheme")
        parsed.append((prefix, type_))
    spans = []
    n = len(parsed)
    i = 0
    while i < n:
        prefix, type_ = parsed[i]
        if prefix == "S":
            spans.append((type_, i, i))
            i += 1
        elif prefix == "B":
            j = i + 1
            while j < n and parsed[j] == ("I", type_):
                j += 1
            if scheme == "BIO":
                spans.append((type_, i, j - 1))
                i = j
            elif j < n and parsed[j] == ("E", type_):
                spans.append((type_, i, j))
                i = j + 1
            else:
                i = j  # unfinished entity: nothing; parsed[j] may open the next one
        else:
            i += 1
    return spans


def spans_to_tags(n: int, spans: list[tuple[str, int, int]], scheme: str) -> list[str]:
    """The tags of ``n`` tokens holding the entities ``(type, start, end)`` (``end`` inclusive,
    no two overlapping) in ``scheme``; the inverse of :func:`extract_spans`. A one-token entity
    is ``S-x`` in BIOES/BMES and ``B-x`` in BIO; a longer one ``B-x`` then the inside prefix
    (``I-``/``M-``), the last token ``E-x`` in BIOES/BMES."""
    check_scheme(scheme)
    inside = _INSIDE[scheme]
    tags = ["O"] * n
    for type_, start, end in spans:
        if not 0 <= start <= end < n:
            raise ValueError(f"entity ({type_!r}, {start}, {end}) outside 0..{n - 1}")
        if any(tag != "O" for tag in tags[start:end + 1]):
            raise ValueError(f"entity ({type_!r}, {start}, {end}) overlaps another one")
        if scheme != "BIO" and start == end:
            tags[start] = "S-" + type_
            continue
        tags[start] = "B-" + type_
        tags[start + 1:end + 1] = [f"{inside}-{type_}"] * (end - start)
        if scheme != "BIO":
            tags[end] = "E-" + type_
    return tags
