"""Translation decoding speed: our batched beam search (``nmt_decoder`` + ``components/nn/
beam_search.py``, behind the char ``transformer`` encoder) against ``transformers``'
``MarianMTModel.generate`` with a random-weight Marian of the same size.

Same size: d_model, encoder/decoder layers, heads, FFN size, one vocabulary of ``--vocab``
entries (Marian shares it between source and target; ours has a source character table and the
target subword table of that size), post-LayerNorm, sinusoidal positions, scaled embeddings,
tied output projection, ReLU. ``--batch`` sources of ``--source-length`` tokens each (no
padding), beam 4 and greedy (beam 1), no sampling.

Equal output lengths: every hypothesis is made exactly ``--target-length`` (T) decoder steps
long. Marian: ``min_new_tokens = max_new_tokens = T`` (EOS suppressed until then, so T steps);
ours: EOS is masked (log-probability -inf) at every step before the last one by wrapping the
decoder's step function, and ``max_lengths = T - 1`` (T - 1 tokens, then the forced EOS: T
steps). Both: no gradients, eval mode, ``torch.set_num_threads(--threads)`` (default 1).
Reported: sentences per second (batch / median time of one batch over ``--repeats`` runs,
alternating the two systems each round), measured in ``--processes`` fresh processes (Marian's
speed moves by ~10 % from one process to the next; ours by ~3 %): the table gives the process
with the median ratio and every process's ratio.

    python benchmarks/mt_speed.py [--device cpu|cuda] [--d-model 256 --layers 3 ...] [--no-write]
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

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from multigrain.components.encoders.transformer import TransformerEncoder  # noqa: E402
from multigrain.components.heads.nmt_decoder import NmtDecoder  # noqa: E402
from multigrain.components.nn.beam_search import beam_search  # noqa: E402

SECTION = "## Translation decoding speed"
PAD, BOS, EOS = 0, 2, 3


class Ours(torch.nn.Module):
    """What the translator runs at prediction: source embeddings -> transformer encoder ->
    nmt_decoder beam search."""

    def __init__(self, a):
        super().__init__()
        self.embedding = torch.nn.Embedding(a.vocab, a.d_model, padding_idx=PAD)
        self.encoder = TransformerEncoder(a.d_model, a.d_model, a.layers, a.heads, a.ffn, dropout=0.0,
                                          attention_dropout=0.0)
        self.decoder = NmtDecoder(a.d_model, a.vocab, PAD, BOS, EOS, a.layers, a.heads, a.ffn, dropout=0.0,
                                  label_smoothing=0.0)

    def translate(self, source: torch.Tensor, beam: int, steps: int) -> torch.Tensor:
        mask = source != PAD
        states = self.encoder(self.embedding(source), mask)
        decoder = self.decoder

        def step_without_eos(state, tokens, t):  # equal lengths: no EOS before the last step
            log_probs, state = decoder.step(state, tokens, t)
            if t < steps - 1:
                log_probs[:, EOS] = float("-inf")
            return log_probs, state

        max_lengths = torch.full((source.shape[0],), steps - 1, dtype=torch.long, device=source.device)
        state = decoder.start(states, mask, beam, reuse_buffers=True)  # as decoder.decode
        found = beam_search(step_without_eos, decoder.reorder, state, source.shape[0], beam, max_lengths, BOS, EOS,
                            PAD, alpha=0.6)
        return found.best


def marian(a):
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(vocab_size=a.vocab, d_model=a.d_model, encoder_layers=a.layers, decoder_layers=a.layers,
                          encoder_attention_heads=a.heads, decoder_attention_heads=a.heads, encoder_ffn_dim=a.ffn,
                          decoder_ffn_dim=a.ffn, activation_function="relu", scale_embedding=True, dropout=0.0,
                          attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=512,
                          pad_token_id=PAD, eos_token_id=EOS, forced_eos_token_id=None, decoder_start_token_id=BOS,
                          bos_token_id=BOS)
    return MarianMTModel(config)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def median_times(fns, repeats: int) -> list[float]:
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:  # warm-up
        fn()
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--source-length", type=int, default=20)
    p.add_argument("--target-length", type=int, default=24)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--processes", type=int, default=3,
                   help="measure in this many fresh processes (a process's allocator state moves "
                        "Marian's speed by ~10 %%): the table gives the median process, and the range")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)  # one process's measurement, as JSON to this file
    a = p.parse_args()
    if a.child:
        Path(a.child).write_text(json.dumps(measure(a)))
        return
    load_at_start = os.getloadavg()[0]
    runs = []
    for k in range(a.processes):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.json"
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", str(out)], check=True)
            runs.append(json.loads(out.read_text()))
        print(f"process {k + 1}: " + ", ".join(f"beam {b} x{o / t:.2f}" for b, o, t in runs[-1]), flush=True)
    device = torch.device(a.device)
    hardware = (torch.cuda.get_device_name(device) if device.type == "cuda"
                else f"{cpu_name()}, {os.cpu_count()} cores shared with other processes, {a.threads} torch "
                     f"thread(s), load average {load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    T = a.target_length
    body = [f"{a.batch} sources of {a.source_length} tokens, {T} decoder steps each (EOS held back so both "
            f"systems decode equally long), d_model {a.d_model}, {a.layers}+{a.layers} layers, {a.heads} heads, "
            f"FFN {a.ffn}, vocabulary {a.vocab}, random weights; median of {a.repeats} batches in each of "
            f"{a.processes} fresh processes, the table's row from the process with the median ratio. "
            f"Device: {a.device} ({hardware}); torch {torch.__version__}. `python benchmarks/mt_speed.py` "
            f"(`--device cuda` on a GPU).", "",
            "| beam | ours (sent/s) | Marian `generate` (sent/s) | ours / Marian | ratio in each process |",
            "|---|---|---|---|---|"]
    rows = []
    for i, (beam, _, _) in enumerate(runs[0]):
        per_process = sorted((run[i][1] / run[i][2], run[i]) for run in runs)
        _, (_, o, t) = per_process[len(per_process) // 2]
        rows.append((beam, o, t))
        body.append(f"| {beam} | {o:.1f} | {t:.1f} | {o / t:.2f}x | "
                    f"{', '.join(f'{r:.2f}x' for r, _ in per_process)} |")
    four, one = rows[0], rows[1]
    body += ["", f"Beam 4 vs greedy: ours {four[1] / one[1]:.2f}x the greedy speed, Marian {four[2] / one[2]:.2f}x."]
    print("\n".join(body))
    if not a.no_write:
        from results_md import write_section

        section = SECTION if device.type == "cpu" else SECTION + " on a GPU"
        write_section(section, body)


def measure(a) -> list[tuple[int, float, float]]:
    """``[(beam, ours sent/s, Marian sent/s)]`` for beam 4 and greedy, in this process."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    device = torch.device(a.device)
    ours, theirs = Ours(a).to(device).eval(), marian(a).to(device).eval()
    source = torch.randint(4, a.vocab, (a.batch, a.source_length), device=device)
    attention_mask = torch.ones_like(source)
    T = a.target_length
    rows = []
    with torch.inference_mode():
        for beam in (4, 1):
            def run_ours(beam=beam):
                out = ours.translate(source, beam, T)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                return out

            def run_theirs(beam=beam):
                out = theirs.generate(input_ids=source, attention_mask=attention_mask, num_beams=beam,
                                      do_sample=False, min_new_tokens=T, max_new_tokens=T,
                                      **({"length_penalty": 0.6} if beam > 1 else {}))
                if device.type == "cuda":
                    torch.cuda.synchronize()
                return out

            assert run_ours().shape == (a.batch, T - 1)  # T - 1 tokens + EOS: T steps
            generated = run_theirs()
            assert generated.shape == (a.batch, T + 1), generated.shape  # start token + T tokens
            t_ours, t_theirs = median_times([run_ours, run_theirs], a.repeats)
            rows.append((beam, a.batch / t_ours, a.batch / t_theirs))
            print(f"beam {beam}: ours {a.batch / t_ours:.1f} sent/s, Marian generate {a.batch / t_theirs:.1f} sent/s, "
                  f"x{t_theirs / t_ours:.2f}", flush=True)
    return rows


if __name__ == "__main__":
    main()
