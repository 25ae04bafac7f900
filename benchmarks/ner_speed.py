"""NER encoder speed and memory, written as the ``## NER speed`` section of benchmarks/RESULTS.md.

    python benchmarks/ner_speed.py [--quick] [--device cuda|cpu] [--threads N] [--results PATH]
        [--max-sentences N] [--sizes 128 256 ...] [--no-write]

On CUDA the section is ``## NER speed on a GPU`` (the CPU one is kept).

1. Test-time sentences/s on Resume test (477 sentences) for every NER spec's model
   (``jsonnet_configs/ner/resume_*.jsonnet``, untrained weights: speed does not depend on them)
   at batch size 1 and 32, plus Lattice LSTM in ``reference`` mode (batch size 1, the original's
   way); the PLTE / Lattice-LSTM-reference speed-up (the paper's Table 3 compares PLTE at batch
   16 with Lattice LSTM at batch 1). Timed: the model's forward and Viterbi decoding of
   pre-tensorized, length-bucketed batches already on the device (no data reading).
2. Attention time per character, one layer, d=128, 8 heads, batch 4, on real MSRA text cut into
   n-character chunks with their jieba-lexicon words: BiG's bipartite attention (``dense`` and
   ``gather``) against full self-attention over the n characters, n = 128 ... 2048.
3. PLTE peak memory at n = 256 characters, batch 16 (real MSRA chunks + lexicon words, the
   Resume spec's PLTE: d=128, 6 heads x 22, 2 layers): inference forward and a training
   forward + backward. CUDA: ``max_memory_allocated`` above the inputs; CPU: the process's
   peak resident memory above its level before the pass (``/proc/self/clear_refs`` resets it).

``--quick``: the first 160 test sentences, n up to 1024, one timing repeat (a smoke run).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from results_md import write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
SECTION = "## NER speed"
GPU_SECTION = "## NER speed on a GPU"  # a CUDA run keeps the CPU table and writes its own
ENCODERS = ["bilstm_crf", "transformer", "star", "lattice_lstm", "plte", "big"]


# ------------------------------------------------------------------------------- helpers
def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_line(device) -> str:
    import torch

    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    return f"CPU ({platform.machine()}, {torch.get_num_threads()} threads, {os.cpu_count()} cores visible)"


_DATA_CACHE: dict = {}


def resume_model(name: str, device, overrides: dict | None = None):
    """(model, test instances) of ``resume_<name>.jsonnet``, built by the platform's own code."""
    import json

    from multigrain.platform.config import build
    from multigrain.platform.specs import load_spec
    from multigrain.platform.experiment import Experiment, build_vocabulary, read_all

    spec = load_spec(str(ROOT / "jsonnet_configs" / "ner" / f"resume_{name}.jsonnet"))
    for path, value in (overrides or {}).items():
        node = spec
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    exp = build(Experiment, spec)
    key = json.dumps(spec["dataset_reader"], sort_keys=True)
    if key not in _DATA_CACHE:
        train = read_all(exp.dataset_reader, exp.train_data_path)
        test = read_all(exp.test_dataset_reader, exp.test_data_path)
        _DATA_CACHE[key] = (train, test)
    train, test = _DATA_CACHE[key]
    vocab = build_vocabulary(exp, exp.model_class(), train, [test])
    return exp.model.construct(vocab=vocab).to(device).eval(), test


def sentences_per_second(model, instances, batch_size: int, device, repeats: int) -> float:
    import torch

    from multigrain.platform.batching import BatchIterator
    from multigrain.platform.devices import move_to

    batches = [move_to({k: v for k, v in batch.items() if k != "tags"}, device)
               for _, batch in BatchIterator(instances, model.tensorize, model.instance_length, batch_size,
                                             shuffle=False).epoch(0)]
    with torch.inference_mode():
        for batch in batches[:2]:  # warm-up
            model(**batch)
        sync(device)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for batch in batches:
                model(**batch)
            sync(device)
            times.append(time.perf_counter() - start)
    return len(instances) / statistics.median(times)


def msra_chunks(n: int, count: int) -> list[list[str]]:
    """``count`` chunks of n consecutive characters of MSRA train text."""
    from multigrain.components.readers.ner import MsraNerReader

    chars: list[str] = []
    for inst in MsraNerReader().read(str(DATA / "msra_ner" / "train1.txt")):
        chars.extend(inst["chars"])
        if len(chars) >= n * count:
            break
    return [chars[k * n:(k + 1) * n] for k in range(count)]


def lattice_batch(chunks, device):
    from multigrain.components.lattice.lexicon import LexiconBuilder
    from multigrain.components.lattice.types import LatticeBatch

    lattices = LexiconBuilder().build_many(chunks)
    return LatticeBatch.collate(lattices, lambda t, c: 2).to(device)


def timed(fn, device, repeats: int) -> float:
    fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ------------------------------------------------------------------------------- parts
def part_throughput(device, max_sentences, repeats):
    rows = []
    speeds = {}
    for name in ENCODERS + ["lattice_lstm@reference"]:
        base, _, mode = name.partition("@")
        overrides = {"model.encoder.mode": mode} if mode else None
        model, test = resume_model(base, device, overrides)
        test = test[:max_sentences] if max_sentences else test
        sizes = [1] if mode == "reference" else [1, 32] + ([16] if base == "plte" else [])
        for bs in sizes:
            speeds[(name, bs)] = sentences_per_second(model, test, bs, device, repeats)
            print(f"{name:24s} batch {bs:3d}: {speeds[(name, bs)]:9.1f} sentences/s", flush=True)
        rows.append(name)
    return rows, speeds


def part_attention(device, sizes, repeats, d=128, heads=8, batch=4):
    import torch

    from multigrain.components.encoders.big import BigEncoder, BipartiteWords
    from multigrain.components.nn.attention import MultiHeadAttention

    out = []
    full = MultiHeadAttention(d, heads).to(device).eval()
    big = BigEncoder(d, d, num_layers=1, num_heads=heads, dropout=0.0, attention_dropout=0.0).to(device).eval()
    layer = big.layers[0]
    for n in sizes:
        lb = lattice_batch(msra_chunks(n, batch), device)
        h = torch.randn(batch, n, d, device=device)
        mask = lb.char_mask
        words = BipartiteWords.from_lattice(lb)
        containment = big.containment({"lattice": lb}, words, mask)
        containing = words.containing(n)
        pairs = words.pairs(n)
        with torch.inference_mode():
            t_full = timed(lambda: full(h, key_mask=mask), device, repeats)
            t_dense = timed(lambda: layer.attend(h, mask, words, "dense", containment=containment), device, repeats)
            t_gather = timed(lambda: layer.attend(h, mask, words, "gather", containing=containing), device, repeats)
            t_ragged = timed(lambda: layer.attend(h, mask, words, "ragged", containing=pairs), device, repeats)
        chars = batch * n
        m = int(words.mask.sum()) / batch
        K = containing[0].shape[2]
        row = dict(n=n, words=m, K=K, full=t_full / chars * 1e6, dense=t_dense / chars * 1e6,
                   gather=t_gather / chars * 1e6, ragged=t_ragged / chars * 1e6, pairs=pairs[0].numel() / chars)
        print(f"n={n:5d} words/sent={m:7.1f} K={K:2d} pairs/char={row['pairs']:.2f}  us/char: full {row['full']:.3f}  "
              f"BiG dense {row['dense']:.3f}  BiG gather {row['gather']:.3f}  BiG ragged {row['ragged']:.3f}",
              flush=True)
        out.append(row)
    return out


def peak_rss_mb() -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def part_memory(device, n=256, batch=16):
    import torch

    from multigrain.components.encoders.plte import PlteEncoder

    lb = lattice_batch(msra_chunks(n, batch), device)
    T = lb.mask.shape[1]
    enc = PlteEncoder(128, 128, num_layers=2, num_heads=6, head_dim=22, ffn_dim=512, dropout=0.3).to(device)
    x = torch.randn(batch, T, 128, device=device, requires_grad=True)
    results = {"T": T, "btTd": batch * T * T * 128 * 4 / 2**20}

    def measure(fn):
        sync(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            fn()
            sync(device)
            return (torch.cuda.max_memory_allocated(device) - before) / 2**20
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            return float("nan")
        before, _ = peak_rss_mb()
        fn()
        return peak_rss_mb()[1] - before

    def infer():
        enc.eval()
        with torch.inference_mode():
            enc(x, lb.mask, {"lattice": lb})

    def train():
        enc.train()
        enc(x, lb.mask, {"lattice": lb}).sum().backward()

    infer(), train()  # warm-up (allocator pools, lazy initialisation)
    results["inference"] = measure(infer)
    results["training"] = measure(train)
    print(f"PLTE n={n} B={batch} T={T}: inference {results['inference']:.1f} MiB, "
          f"forward+backward {results['training']:.1f} MiB (one [B,T,T,d] float tensor: {results['btTd']:.0f} MiB)")
    return results


# ------------------------------------------------------------------------------- report
def report(args, device, rows, speeds, attention, memory, n_test) -> list[str]:
    body = ["", f"`python benchmarks/ner_speed.py {' '.join(sys.argv[1:])}` on {device_line(device)}, "
                f"{time.strftime('%Y-%m-%d')}. Untrained weights of the `resume_*` specs."]
    if args.quick:
        body.append("**Quick run (`--quick`): reduced sizes, one repeat; indicative only.**")
    body += ["", f"Test-time speed on Resume test ({n_test} sentences), sentences/s (forward + Viterbi):", "",
             "| model | batch 1 | batch 32 |", "|---|---|---|"]
    for name in rows:
        one, many = speeds.get((name, 1)), speeds.get((name, 32))
        label = "lattice_lstm (reference mode, the original's batch size 1)" if name.endswith("@reference") else name
        body.append(f"| {label} | {one:.1f} | {f'{many:.1f}' if many else '–'} |")
    ref = speeds[("lattice_lstm@reference", 1)]
    p1, p16, p32 = speeds[("plte", 1)], speeds[("plte", 16)], speeds[("plte", 32)]
    body += ["", f"PLTE ÷ Lattice LSTM (reference, batch 1): {p1 / ref:.1f}x at batch 1, {p16 / ref:.1f}x at batch 16 "
                 f"(the paper's setting; it reports 9.68x on Resume), {p32 / ref:.1f}x at batch 32. "
                 f"Batched Lattice LSTM at 32 vs reference: {speeds[('lattice_lstm', 32)] / ref:.1f}x."]
    body += ["", "Attention time per character (µs), one layer, d=128, 8 heads, batch 4, MSRA text chunks with their "
                 "jieba-lexicon words (K = most words over one character; P = (character, word) pairs). "
                 "`big` uses dense up to 64 characters and ragged beyond (`attention: auto`):", "",
             "| n | words/sentence | K | P / n | full self-attention | BiG dense [n, m+1] | BiG gather [n, K] "
             "| BiG ragged [P] |",
             "|---|---|---|---|---|---|---|---|"]
    for r in attention:
        body.append(f"| {r['n']} | {r['words']:.0f} | {r['K']} | {r['pairs']:.2f} | {r['full']:.3f} | "
                    f"{r['dense']:.3f} | {r['gather']:.3f} | {r['ragged']:.3f} |")
    base = attention[0]
    body += ["", "Per-character time at the largest n over its n=" + str(base["n"]) + " value: "
             + ", ".join(f"{name} {attention[-1][key] / base[key]:.2f}x" for name, key in
                         (("full", "full"), ("dense", "dense"), ("gather", "gather"), ("ragged", "ragged")))
             + " (target for BiG: <= 1.3x)."]
    if device.type == "cuda":
        body += ["", "On a GPU these attention sizes (batch 4) are launch-bound: the per-character time of every variant "
                     "falls as n grows, so the scaling comparison is read from the CPU table (`## NER speed`)."]
    body += ["", f"PLTE peak memory, n=256 characters, batch 16 (T={memory['T']} lattice tokens), d=128, 6x22 heads, "
                 f"2 layers: inference forward {memory['inference']:.1f} MiB, training forward + backward "
                 f"{memory['training']:.1f} MiB (one [B, T, T, d] float tensor would be {memory['btTd']:.0f} MiB)."]
    return body


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads on CPU")
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    import torch

    os.chdir(ROOT)  # the specs' data paths are relative to the repository root
    os.environ.setdefault("MULTIGRAIN_QUIET", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    max_sentences = args.max_sentences or (160 if args.quick else None)
    sizes = args.sizes or ([128, 256, 512, 1024] if args.quick else [128, 256, 512, 1024, 2048])
    repeats = args.repeats or (1 if args.quick else 3)
    torch.manual_seed(0)

    rows, speeds = part_throughput(device, max_sentences, repeats)
    attention = part_attention(device, sizes, repeats)
    memory = part_memory(device)
    n_test = max_sentences or 477
    body = report(args, device, rows, speeds, attention, memory, min(n_test, 477))
    print("\n".join(body))
    if not args.no_write:
        write_section(GPU_SECTION if device.type == "cuda" else SECTION, body, Path(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
