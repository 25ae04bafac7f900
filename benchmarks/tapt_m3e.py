"""Task-adaptive pre-training of m3e-small (Gururangan et al. 2020, "Don't Stop Pretraining"): more
masked-language-model training of the backbone on a task's own training text, then fine-tuning
from the result. A probe toward issue 41's Resume PLTE[m3e] >= 95.4: m3e-small is
uer/chinese_roberta_L-4_H-512 tuned for sentence embeddings (mean-pooled), so its character
states may have drifted from what token-level tagging wants.

The text: the characters (field ``chars``) of each sentence of the given files, read by the
registered reader ``--reader`` (default ``resume_ner``; training splits only), indexed one id per
character as the ``hf_transformer`` embedder indexes them (``index_tokens``). A file that does
not read (missing, a malformed line) is one error naming it and its line, exit code 2, and
nothing is written.
Sentences are packed whole into rows of at most ``--block`` ids, ``[CLS] s_1 [SEP] s_2 [SEP] ..``
(a longer sentence is cut into pieces of ``block - 2``). Each epoch draws new masks (dynamic
masking, BERT's recipe): 15 % of the non-special positions are predicted, 80 % of them replaced by
[MASK], 10 % by a random token, 10 % kept. The MLM head (``BertForMaskedLM``'s transform and the
decoder tied to the input embeddings) starts from its initialiser: m3e-small ships the encoder only.
It scores the predicted positions alone (the vocabulary projection of all positions would be most
of a step's work).

AdamW at ``--lr`` with linear warm-up over 6 % of the steps and linear decay, clipping at 1. With
``--head-epochs K`` the first K epochs train the new head alone (AdamW at ``--head-lr``, constant),
the encoder frozen, before the ``--epochs`` of the whole model: a random head's first gradients
would otherwise reach the pretrained encoder (Kumar et al. 2022, "linear probing then
fine-tuning"). Each epoch ends in a checkpoint in ``OUT.tmp``; the same command run again resumes
from it. The encoder alone (``BertModel``, with m3e-small's own pooler, which masked-LM training
never reads) is saved to ``--out`` with m3e-small's tokenizer files, so a spec reads it with
``-o model.embedder.backbone.model_path=OUT`` (for the ``*_m3e`` NER specs)::

    python benchmarks/tapt_m3e.py --text ../shared/data/resume_ner/train.char.bmes --out runs/m3e_tapt_resume
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from multigrain.components.embedders.hf_transformer import (  # noqa: E402
    index_tokens, read_vocabulary, resolve_model_path)
from multigrain.platform.errors import ConfigurationError, DataError, MultigrainError  # noqa: E402
from multigrain.platform.kinds import Reader  # noqa: E402
from multigrain.platform.paths import output_folder_problem  # noqa: E402
from multigrain.platform.progress import progress  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def read_sentences(reader_name: str, paths: list[str]) -> list[list[str]]:
    """The ``chars`` of every sentence of ``paths``, read by the registered reader ``reader_name``."""
    reader = Reader.by_name(reader_name)()
    for path in paths:
        if not Path(path).is_file():
            raise DataError(path, None, "no such file")
    return [list(instance["chars"]) for path in paths for instance in reader.read(path)]


def pack(sentences: list[list[int]], block: int, cls: int, sep: int) -> list[list[int]]:
    """Rows of at most ``block`` ids: [CLS] then whole sentences each followed by [SEP]."""
    pieces = [s[i:i + block - 2] for s in sentences for i in range(0, len(s), block - 2)]
    rows, row = [], [cls]
    for piece in pieces:
        if len(row) + len(piece) + 1 > block:
            rows.append(row)
            row = [cls]
        row.extend(piece + [sep])
    if len(row) > 1:
        rows.append(row)
    return rows


def mask_batch(ids: torch.Tensor, special: torch.Tensor, mask_id: int, vocab_size: int, rate: float,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels): labels -100 except at the chosen positions; BERT's 80/10/10 replacement."""
    chosen = (torch.rand(ids.shape, generator=generator) < rate) & ~special
    labels = ids.masked_fill(~chosen, -100)
    draw = torch.rand(ids.shape, generator=generator)
    inputs = ids.masked_fill(chosen & (draw < 0.8), mask_id)
    random_tokens = torch.randint(vocab_size, ids.shape, generator=generator)
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    inputs = torch.where(swap, random_tokens, inputs)
    return inputs, labels


def read_checkpoint(path: Path) -> Optional[dict]:
    """This script's own checkpoint, or None: absent, or unreadable (a disk fault; a partial write
    cannot happen, the file is renamed into place), which is said, and the run starts over."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, weights_only=True)
        if not isinstance(state, dict) or not isinstance(state.get("settings"), dict):
            raise ValueError("not a checkpoint of this script")
        return state
    except Exception as e:  # any reason it cannot be read ends the same way: said, then started over
        print(f"{path} cannot be read ({type(e).__name__}: {e}): starting over", flush=True)
        return None


def save_encoder(model, source: Path, work: Path) -> None:
    """The adapted encoder, saved whole: ``BertForMaskedLM`` has no pooler, so the source's own (which
    masked-LM training never reads) is kept, and loading the result reports no missing weights."""
    from transformers import BertModel

    encoder = BertModel.from_pretrained(str(source), local_files_only=True)
    missing, unexpected = encoder.load_state_dict(model.bert.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("pooler.") for k in missing), (missing, unexpected)
    encoder.save_pretrained(work)


def main() -> int:
    try:
        adapt(parse_args())
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", nargs="+", required=True, help="training files of the reader")
    p.add_argument("--reader", default="resume_ner", help="a registered reader giving a chars field")
    p.add_argument("--model", default="package:embedding/m3e-small")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=20, help="epochs of the whole model")
    p.add_argument("--head-epochs", type=int, default=0, help="epochs of the new head alone first")
    p.add_argument("--head-lr", type=float, default=1e-3)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--mask-rate", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-sentences", type=int, default=None, help="the first N sentences only (a rehearsal)")
    return p.parse_args()


def adapt(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from transformers import BertForMaskedLM

    source = resolve_model_path(args.model)
    out = Path(args.out).resolve()
    if problem := output_folder_problem(out, ("tapt.json",), reads=(source,)):  # before any work; never another's
        raise ConfigurationError(f"--out {problem}")
    work = out.with_name(out.name + ".tmp")  # OUT.tmp: the resumable work, replaced only if ours
    if problem := output_folder_problem(work, ("checkpoint.pt", "tapt.json"), reads=(source,)):
        raise ConfigurationError(f"--out {problem}")
    token_ids, _ = read_vocabulary(source, args.model)
    unk = token_ids["[UNK]"]
    sentences = read_sentences(args.reader, args.text)[:args.max_sentences]
    ids = [index_tokens(token_ids, s) for s in sentences]
    specials = {t: token_ids[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")}
    rows = pack(ids, args.block, specials["[CLS]"], specials["[SEP]"])
    model = BertForMaskedLM.from_pretrained(str(source), local_files_only=True)
    steps_per_epoch = math.ceil(len(rows) / args.batch_size)
    total = steps_per_epoch * args.epochs
    warmup = max(1, round(0.06 * total))
    encoder_ids = {id(p) for p in model.bert.parameters()}
    head = [p for p in model.cls.parameters() if id(p) not in encoder_ids]  # the decoder is tied to the embeddings
    head_optimizer = torch.optim.AdamW(head, lr=args.head_lr, weight_decay=0.01)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    generator = torch.Generator().manual_seed(args.seed)
    print(f"{len(sentences)} sentences, {sum(map(len, ids))} characters ({sum(i == unk for s in ids for i in s)} "
          f"[UNK]), {len(rows)} rows of <= {args.block}, {steps_per_epoch} steps an epoch, {args.head_epochs} "
          f"epochs of the head alone then {args.epochs}", flush=True)
    checkpoint = work / "checkpoint.pt"
    settings = {k: v for k, v in vars(args).items() if k != "threads"}
    state = read_checkpoint(checkpoint)
    if state is not None and state["settings"] == settings:
        model.load_state_dict(state["model"])
        head_optimizer.load_state_dict(state["head_optimizer"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        history, seconds = state["history"], state["seconds"]
        print(f"resumed from {checkpoint} after epoch {len(history)}", flush=True)
    else:
        if state is not None:
            changed = sorted(k for k in settings if state["settings"].get(k) != settings[k])
            print(f"{checkpoint} was written with other settings ({', '.join(changed)}): starting over", flush=True)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        history, seconds = [], 0.0
    model.train()
    for epoch in range(len(history), args.head_epochs + args.epochs):
        started = time.time()
        head_only = epoch < args.head_epochs
        totals = run_epoch(model, rows, args, specials, generator, head_optimizer if head_only else optimizer,
                           None if head_only else scheduler, frozen_encoder=head_only)
        seconds += time.time() - started
        history.append({"epoch": epoch + 1, "phase": "head" if head_only else "all", **totals,
                        "seconds": round(seconds, 1)})
        print(json.dumps(history[-1]), flush=True)
        torch.save({"settings": settings, "model": model.state_dict(), "head_optimizer": head_optimizer.state_dict(),
                    "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "generator": generator.get_state(), "torch_rng": torch.get_rng_state(), "history": history,
                    "seconds": seconds}, work / "checkpoint.pt.part")
        (work / "checkpoint.pt.part").replace(checkpoint)
    save_encoder(model, source, work)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, work / name)
    (work / "tapt.json").write_text(json.dumps({"source": args.model, "text": args.text, "args": vars(args),
                                                "history": history}, indent=2) + "\n", encoding="utf-8")
    checkpoint.unlink()
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    print(f"wrote {out}")


def run_epoch(model, rows: list[list[int]], args: argparse.Namespace, specials: dict, generator: torch.Generator,
              optimizer: torch.optim.Optimizer, scheduler, frozen_encoder: bool) -> dict:
    """One pass over ``rows`` in a fresh order with fresh masks; the MLM loss and accuracy of the pass."""
    cls, sep, pad, mask_id = (specials[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]"))
    order = torch.randperm(len(rows), generator=generator).tolist()
    loss_sum, predicted, correct = torch.zeros(()), 0, 0
    starts = range(0, len(order), args.batch_size)
    for start in progress(starts, total=len(starts), desc="masked-LM steps", unit="steps"):
        batch = [rows[i] for i in order[start:start + args.batch_size]]
        width = max(map(len, batch))
        x = torch.tensor([r + [pad] * (width - len(r)) for r in batch])
        attention = x != pad
        special = (x == cls) | (x == sep) | ~attention
        inputs, labels = mask_batch(x, special, mask_id, model.config.vocab_size, args.mask_rate, generator)
        target = labels != -100
        with torch.set_grad_enabled(not frozen_encoder):
            states = model.bert(input_ids=inputs, attention_mask=attention.long()).last_hidden_state
        logits = model.cls(states[target])  # the vocabulary scores of the predicted positions only
        loss = torch.nn.functional.cross_entropy(logits, labels[target])
        model.zero_grad(set_to_none=True)  # also the frozen phase's tied decoder, outside its optimizer
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        loss_sum += loss.detach() * target.sum()
        predicted += int(target.sum())
        correct += int((logits.detach().argmax(-1) == labels[target]).sum())
    return {"mlm_loss": round(float(loss_sum) / max(1, predicted), 4),
            "masked_accuracy": round(correct / max(1, predicted), 4)}


if __name__ == "__main__":
    sys.exit(main())
