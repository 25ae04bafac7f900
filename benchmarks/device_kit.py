"""Packs what a lent GPU machine (the workplace's `device` tool) needs to run
``benchmarks/device_session.sh`` into ``.device/`` (git-ignored), checks that the working tree and
the kit fit what travels (64 MiB), and prints the call to make.

    python benchmarks/device_kit.py [--parts checks speed mt lb] [--python-version 3.12]
    python benchmarks/device_kit.py --merge FILES_AT/results.tar.gz [--export runs/device/mt_export.json]

That machine's image holds Python 3.12 with PyTorch (CUDA), transformers, tokenizers, sacrebleu,
numpy, tqdm and rich; it has no network. What multigrain needs beyond that travels as wheels for
CPython 3.12 (``.device/wheels``: the versions pinned in pyproject.toml; jieba has no wheel on PyPI
and is built here, pure Python). MLflow and Ray stay behind: the session trains with
``--no-tracking`` in one process, and ``multigrain log RUN_DIR`` logs its runs here afterwards.
The data travels as one archive of ../shared/data's folders (``.device/data.tar.gz``), unpacked
there as ../shared/data (the specs' paths are relative to the repository root).

``--merge`` turns what the call brought back into the leaderboard file of issue 40: the finished
runs in ``results.tar.gz`` (``runs/device/mt/*``: metrics.json, config.json) are logged
(``multigrain log``) into a scratch MLflow store and exported from it (``leaderboard --export``:
every run, its mt/tvsub, mt/wmt22 and mt/tatoeba rows), refused above 16 MiB; then
``multigrain leaderboard --import FILE`` merges them into the project's store.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / ".device"
DATA = ROOT.parent / "shared" / "data"
LIMIT = 64 * 2 ** 20  # what the device tool carries: working tree + carried paths
EXPORT_LIMIT = 16 * 2 ** 20  # a file the device tool brings back
#: the image lacks these (binary wheels for cp312 on manylinux x86-64, or built here when PyPI has none)
WHEELS = ("jsonnet", "pyahocorasick", "pytorch-crf")
BUILT = ("jieba",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
#: the ../shared/data folders each part reads (the Lattice-BERT corpus reads every Chinese source)
CORPUS = ("resume_ner", "weibo_ner", "msra_ner", "chnsenticorp", "bq_corpus", "cmrc2018", "tatoeba_cmn_eng",
          "tvsub_zh_en")
FOLDERS = {
    "checks": CORPUS,
    "speed": (),
    "mt": ("tvsub_zh_en", "wmt22_generaltest_zh_en", "wmt_newstest_zh_en", "tatoeba_cmn_eng"),
    "lb": CORPUS + ("thucnews_titles",),
    "ner": ("resume_ner", "weibo_ner", "msra_ner"),  # device_ner.sh (helper H3: a backbone travels its own way)
    "throughput": ("tvsub_zh_en", "resume_ner"),  # train_throughput.py's translators and PLTE
}
FOLDERS["lbert"] = FOLDERS["lb"]  # device_session.sh's alias


def pins() -> dict[str, str]:
    """name -> ``name==version`` of pyproject.toml's pinned dependencies."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    found = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", dep)
        if m:
            found[m.group(1).lower()] = f"{m.group(1)}=={m.group(2)}"
    return found


def fetch_wheels(target: Path, python_version: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.whl"):
        old.unlink()
    pinned = pins()
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                    "--implementation", "cp", *platforms, "-d", str(target), *(pinned[n] for n in WHEELS)],
                   check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(target), *(pinned[n] for n in BUILT)], check=True)


def pack_data(folders: list[str], archive: Path) -> None:
    missing = [f for f in folders if not (DATA / f).is_dir()]
    if missing:
        raise SystemExit(f"{DATA}: missing {', '.join(missing)}")
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for folder in folders:
            tar.add(DATA / folder, arcname=f"data/{folder}")
    tmp.replace(archive)


def travelling_bytes() -> int:
    """Tracked and untracked-not-ignored files of the working tree, plus the kit."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    tree = sum((ROOT / p).stat().st_size for p in listed if p and (ROOT / p).is_file())
    return tree + sum(p.stat().st_size for p in KIT.rglob("*") if p.is_file())


def merge(archive: Path, export: Path, pattern: str = "runs/device/mt/*") -> int:
    """Log the finished runs of ``archive`` matching ``pattern`` into a scratch store, export them
    to ``export`` (at most ``EXPORT_LIMIT`` bytes). Returns the exit status."""
    multigrain = [sys.executable, "-c", "import sys; from multigrain.platform.cli import main; sys.exit(main())"]
    with tempfile.TemporaryDirectory(prefix="device-merge-") as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        runs = sorted(p for p in Path(tmp).glob(pattern) if (p / "metrics.json").is_file())
        if not runs:
            print(f"{archive}: no run directory under {pattern}", file=sys.stderr)
            return 2
        store = f"sqlite:///{tmp}/merge.db"
        subprocess.run([*multigrain, "log", *map(str, runs), "--tracking-uri", store], check=True, cwd=ROOT)
        export.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*multigrain, "leaderboard", "--all", "--tracking-uri", store, "--export", str(export)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    size = export.stat().st_size
    print(f"{export}: {len(runs)} runs, {size / 2 ** 20:.2f} MiB; merge with: multigrain leaderboard --import {export}")
    if size > EXPORT_LIMIT:
        print(f"{export}: larger than {EXPORT_LIMIT // 2 ** 20} MiB", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=list(FOLDERS), default=list(FOLDERS))
    parser.add_argument("--python-version", default="3.12", help="the machine's Python (3.12 there)")
    parser.add_argument("--merge", metavar="RESULTS_TAR_GZ", help="no kit: export the runs a call brought back")
    parser.add_argument("--export", default=str(ROOT / "runs" / "device" / "mt_export.json"))
    args = parser.parse_args(argv)
    if args.merge:
        return merge(Path(args.merge), Path(args.export))
    fetch_wheels(KIT / "wheels", args.python_version)
    folders = sorted({f for part in args.parts for f in FOLDERS[part]})
    pack_data(folders, KIT / "data.tar.gz")
    size = travelling_bytes()
    print(f"{KIT}: wheels {', '.join(sorted(p.name for p in (KIT / 'wheels').glob('*.whl')))}; "
          f"data {', '.join(folders)}; with the working tree {size / 2 ** 20:.1f} MiB of {LIMIT / 2 ** 20:.0f}")
    if size > LIMIT:
        print("too large to travel: fewer --parts", file=sys.stderr)
        return 2
    # one call: a machine goes back 30 s after a call and a session has 15 minutes of it (2026-11)
    env = []
    if "mt" in args.parts:  # issue 40's recipe (tvsub_*_small_gpu) on every pair; with the checks first,
        # the pairs are sized from their plan_mt line (~350 pairs per token batch)
        env += ["SESSION_S=570", *(["MT_PAIRS=auto", "MT_BATCH_PAIRS=350"] if "checks" in args.parts else []),
                "MT_SEEDS=3"]
    if {"lb", "lbert"} & set(args.parts):
        env += ["LB_CHARS=N", "LB_S=S"]
    print(f'device run: command "{" ".join([*env, "bash benchmarks/device_session.sh", *args.parts])}", '
          f'carry [".device"], timeout_s 590 (device_session.sh names each setting; N, S: what the time allows)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
