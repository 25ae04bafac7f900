"""Why the base translator learned nothing in 2,188 H100 updates, at a CPU's scale (issue 40): the
same encoder and decoder modules as the translator (6+6 layers, here of 64 units) learn to reverse
8 symbols drawn Zipf-like from 96, for a few hundred updates of 64 sequences, under the H100 run's
recipe and its alternatives, one change at a time::

    python benchmarks/mt_recipe_toy.py [--steps 400] [--out benchmarks/results/mt_recipe_toy.json]

The H100 recipe: post-norm, Adam (0.9, 0.98) at 5e-4, ``linear_warmup`` over 6 % of the run then
linear decay to 0 at its last step, dropout 0.1, label smoothing 0.1, gradient clipping 1.0, tied
sqrt(d)-scaled target embeddings. The alternatives: ``inverse_sqrt`` with a warm-up of 100 steps
(``platform/optim.py``), a peak of 1e-3, ``pre_norm``. Reported per recipe: the mean loss of the last
20 updates, the greedy token accuracy on 64 held-out sequences and the share of predicted tokens
that are the most frequent symbol (a collapse onto frequent tokens drives it towards 1). One process,
one thread, seed 0.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multigrain.components.encoders.transformer import TransformerEncoder  # noqa: E402
from multigrain.components.heads.nmt_decoder import NmtDecoder  # noqa: E402
from multigrain.platform.optim import InverseSqrt, LinearWarmupDecay  # noqa: E402

RECIPES = [  # (name, pre_norm, schedule, peak rate)
    ("H100 recipe: post-norm, 5e-4, warm-up 6 % + linear decay", False, "linear", 5e-4),
    ("pre-norm, 5e-4, warm-up 6 % + linear decay", True, "linear", 5e-4),
    ("post-norm, 5e-4, inverse_sqrt (warm-up 100)", False, "inverse_sqrt", 5e-4),
    ("pre-norm, 5e-4, inverse_sqrt (warm-up 100)", True, "inverse_sqrt", 5e-4),
    ("post-norm, 1e-3, inverse_sqrt (warm-up 100)", False, "inverse_sqrt", 1e-3),
    ("pre-norm, 1e-3, inverse_sqrt (warm-up 100)", True, "inverse_sqrt", 1e-3),
]


def train(pre_norm: bool, schedule: str, lr: float, steps: int, d: int = 64, layers: int = 6, V: int = 100,
          L: int = 8, B: int = 64, dropout: float = 0.1) -> dict:
    torch.manual_seed(0)
    enc = TransformerEncoder(d, d, num_layers=layers, num_heads=4, dropout=dropout, attention_dropout=dropout,
                             pre_norm=pre_norm)
    dec = NmtDecoder(d, V, num_layers=layers, num_heads=4, feedforward_dim=4 * d, dropout=dropout,
                     label_smoothing=0.1, pre_norm=pre_norm)
    table = torch.nn.Embedding(V, d)
    params = [*enc.parameters(), *dec.parameters(), *table.parameters()]
    optimizer = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98))
    rates = (LinearWarmupDecay(optimizer, steps, warmup_fraction=0.06) if schedule == "linear" else
             InverseSqrt(optimizer, steps, warmup_steps=100))
    mask = torch.ones(B, L, dtype=torch.bool)
    g = torch.Generator().manual_seed(1)
    zipf = 1.0 / torch.arange(1, V - 3, dtype=torch.float)  # ids 0-3 are pad, unk, BOS, EOS

    def sample():
        return torch.multinomial(zipf, B * L, replacement=True, generator=g).view(B, L) + 4

    losses = []
    for _ in range(steps):
        src = sample()
        tgt = src.flip(1)
        out = dec(enc(table(src), mask), mask, torch.cat([torch.full((B, 1), 2), tgt], 1),
                  torch.cat([tgt, torch.full((B, 1), 3)], 1))
        optimizer.zero_grad()
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        rates.step()
        losses.append(out["loss"].item())
    enc.eval(), dec.eval()
    src = sample()
    with torch.no_grad():
        best = dec.decode(enc(table(src), mask), mask, torch.full((B,), L), beam_size=1).best[:, :L]
    return {"last_loss": sum(losses[-20:]) / 20, "token_accuracy": (best == src.flip(1)).float().mean().item(),
            "top_symbol_share": (best == 4).float().mean().item()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--out", default=None, help="a JSON file for the rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name, pre_norm, schedule, lr in RECIPES:
        start = time.time()
        row = {"recipe": name, "pre_norm": pre_norm, "schedule": schedule, "lr": lr, "steps": args.steps,
               **train(pre_norm, schedule, lr, args.steps)}
        rows.append(row)
        print(f"{name}: last-20 loss {row['last_loss']:.3f}, token accuracy {row['token_accuracy']:.3f}, "
              f"top-symbol share {row['top_symbol_share']:.3f} ({time.time() - start:.0f} s)", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
