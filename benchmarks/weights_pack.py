"""Pre-trained models brought back from a device machine, which returns at most 8 files of at most
16 MiB each: the weights only (``best.pt``, no optimizer state), floating tensors in bf16, split
into parts of at most ``max_bytes``, with each run's small text files (``config.json``,
``metrics.json``, ``spec_hash``, ``vocabulary/``) in the first part.

    pack({"lattice_bert": RUN_A, "char_bert": RUN_B}, OUT)   # OUT/lb_weights-00-of-03.pt, ...
    unpack(OUT, DEST)      # DEST/lattice_bert/{best.pt, vocabulary/, ...}: a `pretrained` run directory

A part is a ``torch.save`` of plain values and tensors: ``{"format", "part", "parts", "pieces":
[[key, index, count, tensor], ...], "manifest" (part 0: key -> [dtype, shape]), "files" (part 0:
"run/relative/path" -> text)}``, loaded with ``torch.load(weights_only=True)``
(``multigrain.platform.weights.load_weights``). A tensor larger than a part is cut along its first
dimension into ``count`` pieces (each one a copy, so that ``torch.save`` does not write the whole
storage of a view). ``unpack`` checks that every part of the set is there, that every tensor is
complete and has its recorded shape, and writes fp32 (the recorded dtype) tensors: a
``pretrained`` run directory of ``jsonnet_configs/lib/lattice_bert.libsonnet``'s fine-tuning specs.
"""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FORMAT = "multigrain-weights-pack/1"
MAX_BYTES = 16 * 2**20
MAX_FILES = 8
STEM = "lb_weights"
#: room for torch.save's framing (zip entries, the pickle) in each part
OVERHEAD = 256 * 1024
TEXT = ("config.json", "metrics.json", "spec_hash")


class PackError(ValueError):
    """The models do not fit the limits, or a pack is incomplete or damaged."""


def run_files(run_dir: Path) -> dict[str, str]:
    files = {name: (run_dir / name).read_text(encoding="utf-8") for name in TEXT if (run_dir / name).is_file()}
    for path in sorted((run_dir / "vocabulary").glob("*")):
        if path.is_file():
            files[f"vocabulary/{path.name}"] = path.read_text(encoding="utf-8")
    return files


def pieces_of(key: str, tensor, budget: int) -> list:
    """``[key, index, count, piece]`` for ``tensor`` cut along dim 0 into pieces of at most
    ``budget`` bytes (one piece when it fits)."""
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes <= budget:
        return [[key, 0, 1, tensor.clone()]]
    if tensor.dim() == 0 or tensor.shape[0] < 2:
        raise PackError(f"{key}: {nbytes} bytes in one row, over a part of {budget} bytes")
    row = nbytes // tensor.shape[0]
    rows = max(1, budget // row)
    chunks = list(tensor.split(rows, dim=0))
    return [[key, i, len(chunks), c.clone()] for i, c in enumerate(chunks)]


def pack(runs: dict[str, Path], out: Path, stem: str = STEM, max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES,
         dtype: str = "bfloat16") -> list[Path]:
    """Writes the parts of ``runs`` (name -> run directory with ``best.pt``) into ``out`` and
    returns their paths; a PackError, before anything is written, when they need more than
    ``max_files`` files."""
    import torch

    from multigrain.platform.weights import load_weights, save_weights, tensor_dict

    cast = getattr(torch, dtype)
    budget = max_bytes - OVERHEAD
    files = {f"{name}/{rel}": text for name, run_dir in runs.items() for rel, text in run_files(Path(run_dir)).items()}
    manifest, pieces = {}, []
    for name, run_dir in runs.items():
        path = Path(run_dir) / "best.pt"
        state = load_weights(path)
        state = state["model"] if isinstance(state.get("model"), dict) else state
        for tensor_name, tensor in tensor_dict(state, path).items():
            if not isinstance(tensor, torch.Tensor):
                continue  # an *_extra_state entry: not a weight
            key = f"{name}/{tensor_name}"
            manifest[key] = [str(tensor.dtype).removeprefix("torch."), list(tensor.shape)]
            stored = tensor.detach().cpu().contiguous()
            pieces += pieces_of(key, stored.to(cast) if stored.is_floating_point() else stored, budget)
    text_bytes = sum(len(t.encode("utf-8")) for t in files.values()) + sum(len(k) + 64 for k in manifest)
    if text_bytes > budget:
        raise PackError(f"the runs' text files and manifest take {text_bytes} bytes, over a part of {budget}")
    parts: list[list] = [[]]
    room = [budget - text_bytes]
    for piece in sorted(pieces, key=lambda p: -p[3].numel() * p[3].element_size()):  # first fit, largest first
        size = piece[3].numel() * piece[3].element_size() + len(piece[0]) + 64
        for i in range(len(parts)):
            if size <= room[i]:
                break
        else:
            parts.append([])
            room.append(budget)
            i = len(parts) - 1
        parts[i].append(piece)
        room[i] -= size
    if len(parts) > max_files:
        raise PackError(f"{len(pieces)} pieces of {', '.join(runs)} need {len(parts)} files of at most {max_bytes} "
                        f"bytes, over the limit of {max_files} files")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, chosen in enumerate(parts):
        payload = {"format": FORMAT, "part": i, "parts": len(parts), "pieces": chosen}
        if i == 0:
            payload.update(manifest=manifest, files=files)
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        if buffer.tell() > max_bytes:
            raise PackError(f"part {i} is {buffer.tell()} bytes, over the limit of {max_bytes}")
        path = out / f"{stem}-{i:02d}-of-{len(parts):02d}.pt"
        save_weights(payload, path)
        written.append(path)
    return written


PART = re.compile(r"-(\d{2})-of-(\d{2})\.pt$")


def unpack(pack_dir: Path, dest: Path, stem: str = STEM) -> dict[str, Path]:
    """The runs of the pack in ``pack_dir`` written as ``dest/<name>/`` (``best.pt`` in the
    recorded dtypes, the text files); returns name -> run directory. A missing part, a piece
    missing from a tensor, or a shape that differs from the manifest is a PackError naming it."""
    import torch

    from multigrain.platform.weights import load_weights, save_weights

    found = sorted(Path(pack_dir).glob(f"{stem}-*-of-*.pt"))
    if not found:
        raise PackError(f"{pack_dir}: no {stem}-NN-of-NN.pt files")
    counts = {int(PART.search(p.name).group(2)) for p in found if PART.search(p.name)}
    if len(counts) != 1:
        raise PackError(f"{pack_dir}: parts of different packs ({sorted(counts)} parts)")
    parts = {}
    for path in found:
        payload = load_weights(path, "weights pack")
        if payload.get("format") != FORMAT:
            raise PackError(f"{path}: not a {FORMAT} part")
        parts[payload["part"]] = payload
    total = counts.pop()
    missing = [i for i in range(total) if i not in parts]
    if missing:
        raise PackError(f"{pack_dir}: part(s) {missing} of {total} missing")
    manifest, files = parts[0]["manifest"], parts[0]["files"]
    grouped: dict[str, dict] = {}
    for payload in parts.values():
        for key, index, count, tensor in payload["pieces"]:
            grouped.setdefault(key, {})[index] = (count, tensor)
    states: dict[str, dict] = {}
    for key, (dtype, shape) in manifest.items():
        got = grouped.get(key, {})
        count = next(iter(got.values()))[0] if got else 1
        if sorted(got) != list(range(count)):
            raise PackError(f"{pack_dir}: {key} has {len(got)} of its {count} pieces")
        tensor = torch.cat([got[i][1] for i in range(count)], dim=0) if count > 1 else got[0][1]
        if list(tensor.shape) != shape:
            raise PackError(f"{pack_dir}: {key} has shape {list(tensor.shape)}, the manifest says {shape}")
        name, tensor_name = key.split("/", 1)
        states.setdefault(name, {})[tensor_name] = tensor.to(getattr(torch, dtype))
    runs = {}
    for name, state in states.items():
        run_dir = Path(dest) / name
        (run_dir / "vocabulary").mkdir(parents=True, exist_ok=True)
        for rel_key, text in files.items():
            owner, rel = rel_key.split("/", 1)
            if owner == name:
                if ".." in Path(rel).parts or Path(rel).is_absolute():
                    raise PackError(f"{pack_dir}: file name {rel_key!r} leaves the run directory")
                (run_dir / rel).write_text(text, encoding="utf-8")
        save_weights(state, run_dir / "best.pt")
        runs[name] = run_dir
    return runs
