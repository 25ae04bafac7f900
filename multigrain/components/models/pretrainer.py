"""Pre-training of Lattice-BERT (Lai et al. 2021, §2.4) and of its character BERT baseline:
masked segment prediction (MSP) + sentence order prediction (SOP), as a registered model that
the ordinary Trainer trains (``multigrain train`` on a ``jsonnet_configs/pretrain`` spec).

Instances (``text_corpus`` reader with ``pairs``): two texts whose order is that of one text (its
two consecutive pieces or its two halves, ``readers/corpus.py``), ``chars``/``lattice`` and
``chars_b``/``lattice_b``; or one text alone (too short to halve: ``chars``/``lattice`` only).
``tensorize`` swaps a pair for half of the examples (decided by a stable hash of the seed and the
text, so the same in every epoch and process) and packs ``[CLS] first [SEP] second [SEP]`` with
the lattices (``models/packing.py``), a single text ``[CLS] text [SEP]``; ``sop_label`` = 1 when
swapped, ``sop_pairs`` marks the pairs (batches may mix both). The encoder takes the [CLS] at
position 0 (``cls: first``).

``forward`` (training and evaluation alike):
1. units: the lattice's minimal segments (``masking: segment``), or every token (``token``,
   the paper's -MSP plain MLM); [CLS]/[SEP] are never masked;
2. ``models/masking.py`` chooses whole units (~15% of the tokens, at most 20 per row) and
   corrupts them 80/10/10, from draws hashed from ``(seed, step, the example's packed text,
   position)``: ``step`` counts the training batches (a buffer saved in the checkpoint, so a
   resumed run continues the sequence; data-parallel workers count alike, and an example is
   masked the same whatever batch or worker it is in); evaluation counts its own batches from 0
   at every evaluation (the same masks each epoch);
3. embedder (one table over characters + words, ``lattice_tokens``) -> encoder
   (``lattice_bert``; ``char_bert`` with ``use_words: false``, the words then only shape the
   segments, i.e. whole-word masking of characters);
4. loss = cross-entropy of every masked token over the character + word vocabulary (output
   tied to the embedding table) + SOP cross-entropy on [CLS], a mean over the batch's pairs
   (a boolean mask; 0 in a batch without pairs).

Metrics: ``msp_loss``, ``msp_accuracy`` (masked tokens predicted right), ``sop_accuracy`` (of the
pairs; absent when the batches had none); and
in evaluation the paper's leakage check (§3.4): the masked-token accuracy under whole-segment
masking (``segment_masked_accuracy``) and under token masking (``token_masked_accuracy``), each
measured with its own masking pass; a model that peeks at overlapping tokens scores high on the
second and low on the first.
"""
from __future__ import annotations

import zlib
from collections import Counter
from typing import Any, Literal, Optional

import torch

from multigrain.components.embedders.lattice_tokens import LatticeTokenEmbedder
from multigrain.components.encoders.factorised import TokenPositions
from multigrain.components.heads.pretraining import MaskedTokenHead, SentenceOrderHead
from multigrain.components.lattice.structure import segments as lattice_segments
from multigrain.components.models.base import count_lattice_words
from multigrain.components.models.masking import choose_units, corrupt, hashed_uniform, token_units
from multigrain.components.models.packing import CLS, SEP, Part, pack
from multigrain.components.models.sentence import SentenceModel
from multigrain.components.text import stable_bucket
from multigrain.platform.batching import pad_ids
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder, Model, TokenEmbedder
from multigrain.platform.vocab import Vocabulary

MASK = "[MASK]"


class _Counts:
    """Metric sums; a value may be a tensor on the model's device, summed there and read only when
    the metrics are (so a training step reads nothing back)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.sums: Counter = Counter()

    def add(self, **values):
        for key, value in values.items():
            self.sums[key] = self.sums[key] + (value.detach() if isinstance(value, torch.Tensor) else value)

    def total(self, key: str) -> float:
        return float(self.sums[key])

    def ratio(self, num: str, den: str) -> float:
        return self.total(num) / self.total(den) if self.total(den) else 0.0


@Model.register("pretrainer")
class Pretrainer(SentenceModel):
    task = "pretrain"
    leaderboard_metric = "msp_accuracy"
    not_predicting = "a pre-training model predicts nothing; fine-tune it (jsonnet_configs/finetune)"
    text_fields = {"chars": "lattice", "chars_b": "lattice_b"}

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Lazy[Encoder],
                 masking: Literal["segment", "token"] = "segment", use_words: bool = True,
                 mask_ratio: float = 0.15, max_predictions: int = 20, sop: bool = True, seed: int = 13,
                 max_length: int = 128):
        super().__init__(vocab, embedder, encoder, max_length=max_length, truncate=True)
        if not isinstance(embedder, LatticeTokenEmbedder):
            raise ConfigurationError("model.embedder: the pretrainer needs the lattice_tokens embedder")
        if embedder.uses_lattice != use_words:
            raise ConfigurationError(f"model.embedder.words must equal model.use_words ({use_words})")
        if getattr(self.encoder, "cls_mode", "first") != "first":
            raise ConfigurationError("model.encoder.cls: the pretrainer packs [CLS] itself: use cls 'first'")
        if masking not in ("segment", "token"):
            raise ConfigurationError(f"model.masking must be 'segment' or 'token', got {masking!r}")
        if not vocab.contains("chars", MASK):
            raise ConfigurationError(f"the vocabulary has no {MASK} character (built by another model?)")
        self.masking, self.use_words, self.sop = masking, use_words, sop
        self.mask_ratio, self.max_predictions, self.seed = mask_ratio, max_predictions, seed
        self.mask_id = vocab.index("chars", MASK)
        self.msp_head = MaskedTokenHead(self.encoder.get_output_dim(), embedder.get_output_dim(), embedder.vocab_size)
        self.sop_head = SentenceOrderHead(self.encoder.get_output_dim()) if sop else None
        self.register_buffer("step", torch.zeros((), dtype=torch.long))
        # (the value of ``step``, the buffer's version when it had it): read from the device again
        # only after something else wrote the buffer (loading a state dict, zero_, fill_)
        self._host_step: Optional[tuple[int, int]] = None
        self.eval_step = 0
        self.counts = _Counts()

    # data ----------------------------------------------------------------------------------------
    @classmethod
    def count_vocab_items(cls, instance: Instance, counters: dict[str, Counter]) -> None:
        """Characters (with [CLS], [SEP], [MASK]) and lattice words of both texts."""
        chars = counters.setdefault("chars", Counter())
        chars.update([CLS, SEP, MASK])
        for field, lattice_field in cls.text_fields.items():
            if field in instance:
                chars.update(instance[field])
            if instance.get(lattice_field) is not None:
                count_lattice_words(instance[lattice_field], counters)

    def instance_length(self, instance: Instance) -> int:
        return len(instance["chars"]) + len(instance.get("chars_b", ())) + 3

    def swapped(self, instance: Instance) -> bool:
        text = "".join(instance["chars"]) + "\t" + "".join(instance.get("chars_b", ()))
        return "chars_b" in instance and stable_bucket(f"{self.seed}\t{text}", 2) == 1

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        packed, special, labels = [], [], []
        for x in instances:
            texts = [(x["chars"], x.get("lattice"))]
            if "chars_b" in x:
                texts.append((x["chars_b"], x.get("lattice_b")))
            swap = self.swapped(x)
            if swap:
                texts.reverse()
            lengths = self.lengths_within(x, [len(t[0]) for t in texts], 1 + len(texts))
            pieces: list = [CLS]
            for (chars, lattice), length in zip(texts, lengths):
                pieces += [Part(chars, lattice, 0, length), SEP]
            p = pack(pieces)
            packed.append(p)
            special.append([int(s) for s in p.special])
            labels.append(int(swap))
        batch = self.packed_tensors(packed)
        if "lattice" not in batch:
            raise ConfigurationError("the pretrainer needs lattices: give the reader a lattice_builder")
        batch["special"] = pad_ids(special).bool()
        # what an example's masking is drawn from (with the seed and the step): its packed text
        batch["example_keys"] = torch.tensor([zlib.crc32("\t".join(p.tokens).encode("utf-8")) for p in packed],
                                             dtype=torch.long)
        # SOP: the label of every row, and which rows are pairs (a single text has no order)
        batch["sop_label"] = torch.tensor(labels, dtype=torch.long)
        batch["sop_pairs"] = torch.tensor(["chars_b" in x for x in instances], dtype=torch.bool)
        return batch

    def text_to_instance(self, data: dict) -> Instance:
        raise ValueError(self.not_predicting)

    # computation ---------------------------------------------------------------------------------
    def next_step(self) -> int:
        """The masking step: the training batch counter (then advanced), or ``-1 - k`` for the
        k-th batch of an evaluation."""
        if self.training:
            known = self._host_step
            step = known[0] if known is not None and known[1] == self.step._version else int(self.step)
            self.step += 1
            self._host_step = (step + 1, self.step._version)
        else:
            step, self.eval_step = -1 - self.eval_step, self.eval_step + 1
        return step

    def masked_pass(self, masking: str, chars, mask, lattice, special, segments, keys, step: int) -> dict:
        """One masking of the batch, the encoder, the MSP head: targets, predictions and loss."""
        emb: LatticeTokenEmbedder = self.embedder
        n = chars.shape[1]
        T = lattice.mask.shape[1]
        units = lattice_segments(lattice.starts, lattice.ends, lattice.n_chars, lattice.mask) if masking == "segment" \
            else token_units(lattice.mask)
        not_special = ~torch.nn.functional.pad(special, (0, T - n))
        if self.use_words:
            ids, is_char, token_mask, starts = emb.joint_ids(lattice), lattice.is_char, lattice.mask, lattice.starts
            positions = TokenPositions(lattice.mask, lattice.starts, lattice.ends)
        else:  # characters only; the segments (words) still decide what is masked together
            units, not_special = units[:, :n], not_special[:, :n]
            ids, token_mask = chars, mask
            is_char = mask
            positions = TokenPositions.characters(mask)
            starts = positions.starts
        T = units.shape[1]
        draws = [hashed_uniform(self.seed, step, keys, T, stream) for stream in range(3)]
        chosen, action = choose_units(units, token_mask & not_special, self.mask_ratio, self.max_predictions,
                                      draws[0], draws[1])
        word_range = (emb.num_chars + 2, emb.vocab_size)
        corrupted = corrupt(ids, chosen, action, is_char, self.mask_id, (2, emb.num_chars), word_range, draws[2])
        inputs = emb.embed(corrupted, emb.token_types(segments, starts))
        states, cls = self.encoder.encode_tokens(inputs, positions)
        targets = ids[chosen]
        out = self.msp_head(states[chosen], emb.tokens.weight, targets)
        return {"out": out, "targets": targets, "cls": cls, "chosen": chosen, "corrupted": corrupted}

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, lattice, special: torch.Tensor,
                example_keys: torch.Tensor, sop_label: Optional[torch.Tensor] = None,
                segments: Optional[torch.Tensor] = None, sop_pairs: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        """chars, segments, special, mask ``[B, n]``; lattice (LatticeBatch ``[B, T]``); sop_label,
        sop_pairs (bool: the rows that are pairs; default all), example_keys ``[B]``."""
        step = self.next_step()
        own = self.masked_pass(self.masking, chars, mask, lattice, special, segments, example_keys, step)
        msp = own["out"]
        loss = msp["loss"]
        terms = {"msp": (msp["loss"], len(own["targets"]))}  # data-parallel weights (platform/data_parallel.py)
        output = {"msp_loss": msp["loss"].detach(), "masked": own["chosen"], "masked_input": own["corrupted"],
                  "msp_predictions": msp["predictions"], "msp_targets": own["targets"]}
        right = (msp["predictions"] == own["targets"]).sum()
        self.counts.add(msp_right=right, msp_total=len(own["targets"]), msp_loss=msp["loss"].double(), batches=1)
        if self.sop_head is not None:
            sop = self.sop_head(own["cls"], sop_label, sop_pairs)
            output["sop_predictions"] = sop["predictions"]
            if sop_label is not None:  # a mean over the batch's pairs (0 when it has none)
                loss = loss + sop["loss"]
                terms["sop"] = (sop["loss"], sop["count"])
                self.counts.add(sop_right=sop["right"].double(), sop_total=sop["count"].double())
        if not self.training:  # the leakage check: the other masking, measured the same way
            other = "token" if self.masking == "segment" else "segment"
            check = self.masked_pass(other, chars, mask, lattice, special, segments, example_keys, step)
            right_other = (check["out"]["predictions"] == check["targets"]).sum()
            self.counts.add(**{f"{self.masking}_right": right, f"{self.masking}_total": len(own["targets"]),
                               f"{other}_right": right_other, f"{other}_total": len(check["targets"])})
        output["loss"], output["loss_terms"] = loss, terms
        return output

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        c = self.counts
        metrics = {"msp_accuracy": c.ratio("msp_right", "msp_total"), "msp_loss": c.ratio("msp_loss", "batches")}
        # of the pairs seen; none when the batches had no pair (a corpus of short texts), but named
        # before any batch (a spec may validate on it)
        if self.sop_head is not None and (c.total("sop_total") or not c.total("batches")):
            metrics["sop_accuracy"] = c.ratio("sop_right", "sop_total")
        if c.total("segment_total") or c.total("token_total"):
            metrics["segment_masked_accuracy"] = c.ratio("segment_right", "segment_total")
            metrics["token_masked_accuracy"] = c.ratio("token_right", "token_total")
        if reset:
            c.reset()
            self.eval_step = 0
        return metrics

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        swapped = output.get("sop_predictions")
        if swapped is None:
            return [{} for _ in instances]
        return [{"swapped_predicted": bool(p)} if "chars_b" in x else {} for p, x in zip(swapped.tolist(), instances)]
