"""NIST-style multi-reference test sets (SGML ``.sgm`` or the same markup as XML).

Source: ``<srcset setid=.. srclang=..><doc docid=..><seg id=1>text</seg>...</doc></srcset>``;
each reference: ``<refset .. trglang=..><doc docid=.. sysid=ref1><seg id=1>...</seg>...``.
Segments are matched by (docid, seg id); other tags (``<p>``, ``<hl>``...) are ignored.
"""
from __future__ import annotations

import bisect
import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from multigrain.components.readers.files import read_text
from multigrain.components.readers.translation import TranslationReader
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader

_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)([^>]*)>")
_ATTRIBUTE = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))""")
_SEG_END = re.compile(r"</seg\s*>", re.I)
_ENTITY = re.compile(r"&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


@dataclass
class Segment:
    doc_id: str
    seg_id: str
    text: str
    line: int


@dataclass
class SgmFile:
    path: str
    set_line: int = 1
    segments: dict[tuple[str, str], Segment] = field(default_factory=dict)  # in file order
    doc_lines: dict[str, int] = field(default_factory=dict)
    #: the ``sysid`` of its docs (one system per SgmFile; "" when the docs name none)
    system: str = ""


def _unescape(text: str) -> str:
    def one(match: re.Match) -> str:
        name = match.group(1)
        if name in _NAMED:
            return _NAMED[name]
        return chr(int(name[2:], 16) if name[1] in "xX" else int(name[1:]))

    return _ENTITY.sub(one, text)


#: ``&amp; &lt; &gt; &quot; &apos; &#N; &#xN;`` decoded (the escapes of SGML files and Moses output)
unescape_entities = _unescape


def _attributes(text: str) -> dict[str, str]:
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTRIBUTE.finditer(text)}


def parse_sgm(path: str) -> SgmFile:
    """Every segment of a NIST source/reference file, keyed by (docid, seg id), with its line.

    Segment text: entities ``&amp; &lt; &gt; &quot; &apos; &#N;`` decoded, whitespace runs
    collapsed to one space, ends stripped. A file holding several references (docs with
    different ``sysid``s) is a DataError here: read it with ``parse_sgm_systems``.
    """
    systems = parse_sgm_systems(path)
    if len(systems) > 1:
        second = systems[1]
        raise DataError(path, next(iter(second.doc_lines.values())),
                        f"holds {len(systems)} systems (sysid {', '.join(repr(s.system) for s in systems)}); "
                        f"one reference per file expected here")
    return systems[0]


def parse_sgm_systems(path: str) -> list[SgmFile]:
    """The segments of a NIST file per system, in the order the systems first appear.

    A refset may hold several references in one file, each doc tagged with its ``sysid``
    (TVsub's ``test_trg.sgm``: docs SUB01, SUB02 of ``reference_1``, then of ``reference_2``...).
    Docs are keyed by (sysid, docid): the same docid may appear once per system. Segment text as
    in ``parse_sgm``.
    """
    text = read_text(path)
    newlines = [i for i, c in enumerate(text) if c == "\n"]

    def line_of(position: int) -> int:
        return bisect.bisect_left(newlines, position) + 1

    systems: dict[str, SgmFile] = {}
    parsed = SgmFile(path)
    set_line = 1
    doc_id: Optional[str] = None
    position = 0
    while True:
        tag = _TAG.search(text, position)
        if tag is None:
            break
        position = tag.end()
        closing, name, rest = tag.group(1) == "/", tag.group(2).lower(), tag.group(3)
        line = line_of(tag.start())
        if name in ("srcset", "refset", "tstset") and not closing:
            set_line = line
            for system in systems.values():
                system.set_line = line
        elif name == "doc" and not closing:
            if doc_id is not None:
                raise DataError(path, line, f"<doc> inside doc {doc_id!r} (missing </doc>)")
            attributes = _attributes(rest)
            doc_id = attributes.get("docid")
            if not doc_id:
                raise DataError(path, line, "<doc> without a docid attribute")
            system = attributes.get("sysid", "")
            if system not in systems:
                systems[system] = SgmFile(path, set_line, system=system)
            parsed = systems[system]
            if doc_id in parsed.doc_lines:
                of = f" of sysid {system!r}" if system else ""
                raise DataError(path, line, f"doc {doc_id!r}{of} appears twice (first at line {parsed.doc_lines[doc_id]})")
            parsed.doc_lines[doc_id] = line
        elif name == "doc":
            if doc_id is None:
                raise DataError(path, line, "</doc> without an open <doc>")
            doc_id = None
        elif name == "seg" and not closing:
            if doc_id is None:
                raise DataError(path, line, "<seg> outside any <doc>")
            seg_id = _attributes(rest).get("id")
            if not seg_id:
                raise DataError(path, line, "<seg> without an id attribute")
            end = _SEG_END.search(text, position)
            following = _TAG.search(text, position)
            if end is None or (following is not None and following.start() < end.start()
                               and following.group(2).lower() == "seg" and not following.group(1)):
                raise DataError(path, line, f"<seg id={seg_id}> of doc {doc_id!r} has no </seg>")
            key = (doc_id, seg_id)
            if key in parsed.segments:
                raise DataError(
                    path, line, f"doc {doc_id!r} has seg id {seg_id} twice (first at line {parsed.segments[key].line})"
                )
            content = " ".join(_unescape(text[position:end.start()]).split())
            if not content:
                raise DataError(path, line, f"<seg id={seg_id}> of doc {doc_id!r} is empty")
            parsed.segments[key] = Segment(doc_id, seg_id, content, line)
            position = end.end()
    if doc_id is not None:
        raise DataError(path, parsed.doc_lines[doc_id], f"doc {doc_id!r} is never closed (missing </doc>)")
    return list(systems.values()) or [SgmFile(path, set_line)]


def check_matches(source: SgmFile, reference: SgmFile) -> None:
    """DataError naming the reference file and line if its segment ids differ from the source's."""
    ids_of: dict[str, list[str]] = {}
    for doc_id, seg_id in source.segments:
        ids_of.setdefault(doc_id, []).append(seg_id)
    for (doc_id, seg_id), segment in reference.segments.items():
        if (doc_id, seg_id) not in source.segments:
            if doc_id not in ids_of:
                problem = f"doc {doc_id!r} is not in the source {source.path}"
            else:
                problem = (f"doc {doc_id!r} seg id {seg_id} is not in the source {source.path} "
                           f"(source seg ids: {_listing(ids_of[doc_id])})")
            raise DataError(reference.path, segment.line, problem)
    for (doc_id, seg_id), segment in source.segments.items():
        if (doc_id, seg_id) not in reference.segments:
            if doc_id not in reference.doc_lines:
                raise DataError(
                    reference.path, reference.set_line,
                    f"doc {doc_id!r} of the source ({source.path}:{source.doc_lines[doc_id]}) is missing",
                )
            raise DataError(
                reference.path, reference.doc_lines[doc_id],
                f"doc {doc_id!r} lacks seg id {seg_id} of the source ({source.path}:{segment.line})",
            )


def _listing(ids: list[str]) -> str:
    return ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")


@Reader.register("nist")
class NistReader(TranslationReader):
    """A NIST-style test set: ``read(path)`` of the source file, references found by
    ``references`` (paths or glob patterns; relative ones that match nothing from the working
    folder are tried next to the source), by default ``<stem>.ref*<ext>`` next to the source
    (``nist02.src.sgm`` -> ``nist02.ref*.sgm``), sorted by name. Any number of references.

    Fields: ``source`` (segment text), ``chars``, ``references: list[str]`` (one per reference
    file, in that order; a file holding several systems gives one per ``sysid``), ``doc_id``, ``seg_id``; ``source`` = (source file, line of the seg).
    A reference with a missing, extra or different segment id is a DataError naming the
    reference file and line. ``references: []`` reads the source alone (``references`` empty).
    """

    def __init__(self, references: Optional[list[str]] = None, **kwargs):
        super().__init__(**kwargs)
        self.references = references

    def reference_paths(self, path: str) -> list[str]:
        folder = Path(path).parent
        if self.references is None:
            name = Path(path).name
            stem = name.split(".src.")[0] if ".src." in name else Path(name).stem
            patterns = [str(folder / f"{stem}.ref*{Path(path).suffix}")]
        else:
            patterns = list(self.references)
        found: list[str] = []
        for pattern in patterns:
            matches = sorted(glob.glob(pattern))
            if not matches and not os.path.isabs(pattern):
                matches = sorted(glob.glob(str(folder / pattern)))
            if not matches:
                raise DataError(path, None, f"no reference file matches {pattern!r}")
            found.extend(m for m in matches if m not in found and os.path.abspath(m) != os.path.abspath(path))
        return found

    def _read(self, path: str) -> Iterator[Instance]:
        source = parse_sgm(path)
        references = [system for p in self.reference_paths(path) for system in parse_sgm_systems(p)]
        for reference in references:
            check_matches(source, reference)
        for key, segment in source.segments.items():
            instance = self._pair(path, segment.line, segment.text, [r.segments[key].text for r in references])
            instance["doc_id"], instance["seg_id"] = segment.doc_id, segment.seg_id
            yield instance
