"""Lattice building speed on MSRA NER train (46,364 sentences, 2,169,879 characters).

Measures, and writes as the ``## Lattice build`` section of benchmarks/RESULTS.md:
- lexicon builder (jieba's dict.txt) throughput in characters/s (target >= 1.5 M chars/s),
  median of 3 passes over the whole file, plus the one-time automaton construction;
- each segmenter's throughput (jieba on the whole file; snownlp and lac on a subset: slow);
- ``with_lattices``: a cold build (build + cache write) and a cached re-read in a fresh process
  (target < 1 s), median of 3.

Usage: ``.venv/bin/python benchmarks/lattice_build.py [--quick]`` (``--quick``: smaller subsets).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results_md import write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MSRA_TRAIN = DATA / "msra_ner" / "train1.txt"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Lattice build"


def read_msra(path: Path):
    from multigrain.components.readers.ner import MsraNerReader

    return list(MsraNerReader().read(str(path)))


def timed(fn, repeat: int = 1):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def reread(cache_dir: str) -> dict:
    """Run in a fresh process: parse MSRA train, then time the cached ``with_lattices``."""
    from multigrain.components.lattice import lexicon as lexicon_module
    from multigrain.components.lattice.cache import with_lattices
    from multigrain.components.lattice.lexicon import LexiconBuilder

    instances, parse_s = timed(lambda: read_msra(MSRA_TRAIN))
    builder = LexiconBuilder()
    t = time.perf_counter()
    out = list(with_lattices(instances, str(MSRA_TRAIN), builder, {"chars": "lattice"}, cache_dir))
    hit_s = time.perf_counter() - t
    built = bool(lexicon_module._LEXICONS)  # a hit must not need the automaton
    return {"parse_s": parse_s, "reread_s": hit_s, "lattices": len(out), "automaton_built": built,
            "words": sum(i["lattice"].n_words for i in out)}


def run(quick: bool) -> dict:
    from multigrain.components.lattice.cache import with_lattices
    from multigrain.components.lattice.lexicon import LexiconBuilder
    from multigrain.components.lattice.segmenters import SegmenterBuilder

    instances, parse_s = timed(lambda: read_msra(MSRA_TRAIN))
    sentences = [inst["chars"] for inst in instances]
    n_chars = sum(map(len, sentences))
    r: dict = {"sentences": len(sentences), "chars": n_chars, "parse_s": parse_s}

    lexicon = LexiconBuilder()
    _, r["automaton_s"] = timed(lexicon._lexicon)
    lattices, r["lexicon_s"] = timed(lambda: lexicon.build_many(sentences), repeat=3)
    r["lexicon_words"] = sum(lat.n_words for lat in lattices)
    del lattices

    subsets = {"jieba": len(sentences), "snownlp": 300 if quick else 2000, "lac": 300 if quick else 2000}
    if quick:
        subsets["jieba"] = 5000
    r["segmenters"] = {}
    for name, count in subsets.items():
        part = sentences[:count]
        seg = SegmenterBuilder(name)
        timed(lambda: seg.build_many(part[:20]))  # load the model once, outside the timing
        _, secs = timed(lambda: seg.build_many(part))
        r["segmenters"][name] = {"sentences": count, "chars": sum(map(len, part)), "s": secs}

    with tempfile.TemporaryDirectory() as cache_dir:
        fresh = LexiconBuilder()
        _, r["cold_s"] = timed(
            lambda: list(with_lattices(instances, str(MSRA_TRAIN), fresh, {"chars": "lattice"}, cache_dir))
        )
        r["cache_bytes"] = sum(f.stat().st_size for f in Path(cache_dir).iterdir())
        rereads = []
        for _ in range(3):
            proc = subprocess.run([sys.executable, __file__, "--reread", cache_dir], capture_output=True, text=True,
                                  check=True, cwd=ROOT)
            rereads.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        r["reread_s"] = statistics.median(x["reread_s"] for x in rereads)
        r["reread_parse_s"] = statistics.median(x["parse_s"] for x in rereads)
        assert all(x["words"] == r["lexicon_words"] and x["lattices"] == len(sentences) for x in rereads)
        assert not any(x["automaton_built"] for x in rereads), "the cached re-read rebuilt lattices"
    return r


def section(r: dict) -> str:
    mcs = lambda chars, s: f"{chars / s / 1e6:.2f} M"  # noqa: E731
    lines = [
        SECTION,
        "",
        f"MSRA NER train (`msra_ner/train1.txt`): {r['sentences']:,} sentences, {r['chars']:,} characters. "
        f"`{sys.executable.split('/')[-1]} benchmarks/lattice_build.py` on {platform.machine()}, "
        f"{os.cpu_count()} CPU cores (shared), Python {platform.python_version()}; single process, CPU only.",
        "",
        "| what | time | throughput (chars/s) | target |",
        "|---|---|---|---|",
        f"| lexicon (jieba dict.txt, min 2 / max 10 chars), `build_many` over all sentences, median of 3 "
        f"| {r['lexicon_s']:.2f} s | {mcs(r['chars'], r['lexicon_s'])} | >= 1.5 M |",
        f"| lexicon automaton construction (once per process) | {r['automaton_s']:.2f} s | | |",
    ]
    for name, s in r["segmenters"].items():
        lines.append(
            f"| segmenter `{name}` ({s['sentences']:,} sentences, {s['chars']:,} chars) "
            f"| {s['s']:.2f} s | {s['chars'] / s['s'] / 1e3:.0f} k | |"
        )
    lines += [
        f"| `with_lattices` cold: lexicon build + cache write (automaton already built) "
        f"| {r['cold_s']:.2f} s | | |",
        f"| `with_lattices` cached re-read, fresh process, median of 3 | {r['reread_s']:.2f} s | "
        f"{mcs(r['chars'], r['reread_s'])} | < 1 s |",
        f"| (reader parse of the file, for scale, not included above) | {r['reread_parse_s']:.2f} s | | |",
        "",
        f"Lexicon words found: {r['lexicon_words']:,} ({r['lexicon_words'] / r['chars']:.2f} per character). "
        f"Cache file: {r['cache_bytes'] / 2**20:.1f} MiB (flat arrays: spans int32, sources, word ids, "
        f"one word table).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reread", metavar="CACHE_DIR")
    args = parser.parse_args()
    if args.reread:
        print(json.dumps(reread(args.reread)))
        return 0
    r = run(args.quick)
    text = section(r)
    print(text)
    if not args.quick:
        write_section(SECTION, text, RESULTS)
    ok = r["chars"] / r["lexicon_s"] >= 1.5e6 and r["reread_s"] < 1.0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
