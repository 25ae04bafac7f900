"""``tvsub``: the DCU-Tencent TV-subtitle zh-en corpus (``shared/data/tvsub_zh_en``, see its
SOURCES.md row): training pairs one file pair per episode, dev and test line-aligned, the test's
3 references in a NIST SGML refset."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, Optional

from multigrain.components.readers.files import read_lines
from multigrain.components.readers.parallel import LineAlignedReader
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader

_ID = re.compile(r"[\w.-]{1,30}")  # an episode id as the listing gives it (the shipped ones are numbers)


@Reader.register("tvsub")
class TvsubReader(LineAlignedReader):
    """What ``read(path)`` gives depends on the file:

    - ``EPISODES.txt`` (any file not ending in ``.zh``): a listing of episode ids, one per line;
      the training pairs of each episode, from ``<episodes_dir>/<id>.zh`` and ``<id>.en``
      (``episodes_dir`` relative to the listing's folder, default ``train``), in listing order and
      line order (consecutive pairs are consecutive subtitles). The two files of an episode must
      have the same number of lines (else a DataError naming both files and both counts).
      Shipped: 592 episodes, 429,501 pairs. The English side is raw text, read as it is.
    - a ``.zh`` file (``dev/dev.orignal.zh``: 1,086 pairs; ``test/test.orignal.zh``: 1,154): the
      source lines and their references, by default the ``.en`` file beside it; ``references``
      names others, e.g. ``processed/test/test_trg.sgm``, the test set's 3 references (lower-cased,
      one per ``sysid``, matched to the source lines in file order; see ``parallel_refs``). These
      references are Moses-tokenised (``it &apos;s``); ``detokenize_references`` (default on)
      turns them back into plain text like the training targets (``it's``).

    Fields: ``source``, ``chars``, ``references``; training pairs also ``episode`` (its id).
    ``max_instances`` keeps the first pairs in this order.
    """

    def __init__(self, references: Optional[list[str]] = None, episodes_dir: str = "train",
                 detokenize_references: bool = True, **kwargs):
        super().__init__(references, detokenize_references, **kwargs)
        self.episodes_dir = episodes_dir

    def reference_patterns(self, path: str) -> list[str]:
        return [str(Path(path).with_suffix(".en"))]

    def _read(self, path: str) -> Iterator[Instance]:
        if Path(path).suffix == ".zh":
            yield from super()._read(path)
            return
        folder = Path(path).parent / self.episodes_dir
        for number, line in read_lines(path):
            episode = line.strip()
            if not episode:
                continue
            zh, en = folder / f"{episode}.zh", folder / f"{episode}.en"
            for file in (zh, en):
                if not file.is_file():
                    # the line is the id: shown when it looks like one, not like a line of another file
                    shown = f"episode {episode!r}: no file {file}" if _ID.fullmatch(episode) else \
                        f"no file {file.parent}/<the episode id on this line>{file.suffix}"
                    raise DataError(path, number, shown)
            sources, targets = list(read_lines(str(zh))), list(read_lines(str(en)))
            if len(sources) != len(targets):
                raise DataError(str(zh), None, f"{len(sources):,} lines, but {en} has {len(targets):,}: the two "
                                               f"files of episode {episode!r} must be line-aligned")
            for (line_number, text), (_, target) in zip(sources, targets):
                if not target.strip():
                    raise DataError(str(en), line_number, "empty reference")
                instance = self._pair(str(zh), line_number, text, [target])
                instance["episode"] = episode
                yield instance
