"""Extractive MRC (CMRC 2018, DRCD): the answer is a span of the context.

Each question becomes one or more windows ``[CLS] question [SEP] context[s:s+w] [SEP]`` (segment
ids 0 then 1): the question is cut to ``max_query_length`` tokens (with ``truncate: false`` a
longer question is a DataError), ``w = max_length - len(question) - 3``, and windows start every
``doc_stride`` tokens until the context is covered. A window is trained to point at its answer,
or at ``[CLS]`` (position 0) when the answer is not wholly inside it. At prediction every window
proposes its best valid span (``heads/span.py: best_spans``); the span with the highest start +
end score over the question's windows wins and is mapped back to the original context text
through the tokens' character offsets (so Latin words kept whole stay whole).

Fields (the ``cmrc2018``/``drcd`` readers): ``question_chars``, ``context_chars``, ``context``,
``answers [{text, answer_start}]`` (character offsets into ``context``; the first one is the
training target; one whose text is not found at its offset is a DataError naming the file and
line), ``answer_texts`` (the references for EM/F1; ``answers`` texts when absent), ``id``,
and optionally ``lattice`` (of the context) and ``question_lattice``. Questions with no reference
at all are predicted but not scored.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Optional

import torch

from multigrain.components.heads.span import SpanHead
from multigrain.components.metrics.mrc import MrcEmF1
from multigrain.components.models.base import source_of
from multigrain.components.models.packing import CLS, SEP, Part, pack
from multigrain.components.models.sentence import SentenceModel
from multigrain.components.text import split_chars, token_starts
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Encoder, Head, Model, TokenEmbedder
from multigrain.platform.vocab import Vocabulary


@Model.register("span_reader")
class SpanReader(SentenceModel):
    task = "mrc"
    leaderboard_metric = "f1"
    text_fields = {"question_chars": "question_lattice", "context_chars": "lattice"}

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Optional[Lazy[Encoder]] = None,
                 head: Optional[Lazy[Head]] = None, max_length: int = 512, max_query_length: int = 64,
                 doc_stride: int = 128, truncate: bool = True):
        super().__init__(vocab, embedder, encoder, max_length, truncate)
        if max_length - max_query_length - 3 < 1:
            raise ConfigurationError(f"model.max_length {max_length} leaves no room for the context after a "
                                     f"question of max_query_length {max_query_length} and 3 special tokens")
        if doc_stride < 1:
            raise ConfigurationError(f"model.doc_stride must be >= 1, got {doc_stride}")
        self.max_query_length = max_query_length
        self.doc_stride = doc_stride
        self.head = head.construct(input_dim=self.output_dim) if head else SpanHead(self.output_dim)
        self.metric = MrcEmF1()

    def instance_length(self, instance: Instance) -> int:
        return min(len(instance["question_chars"]) + len(instance["context_chars"]) + 3, self.max_length)

    # tensors ---------------------------------------------------------------------------------
    def windows(self, n_context: int, query_length: int) -> list[tuple[int, int]]:
        """``(start, length)`` of each context window."""
        size = self.max_length - query_length - 3
        out, start = [], 0
        while True:
            length = min(size, n_context - start)
            out.append((start, length))
            if start + length >= n_context:
                return out
            start += min(length, self.doc_stride)

    def answer_tokens(self, x: Instance, starts: list[int]) -> list[tuple[int, int]]:
        """Inclusive token spans of the ``answers``; DataError when one does not match the context."""
        context = x.get("context", "".join(x["context_chars"]))
        spans = []
        for answer in x.get("answers") or []:
            text, at = answer["text"], answer["answer_start"]
            if not text or at < 0 or context[at:at + len(text)] != text:
                there = context[max(0, at):at + len(text)]
                raise DataError(*source_of(x), f"question {x.get('id', '?')}: answer {text!r} at answer_start={at} "
                                               f"does not match the context (there: {there!r})")
            spans.append((bisect_right(starts, at) - 1, bisect_right(starts, at + len(text) - 1) - 1))
        return spans

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        packed, context_masks, start_pos, end_pos, metadata = [], [], [], [], []
        for x in instances:
            question, context = x["question_chars"], x["context_chars"]
            q_len = len(question)
            if q_len > self.max_query_length:
                if not self.truncate:
                    raise DataError(*source_of(x), f"question of {q_len} tokens, more than max_query_length "
                                                   f"{self.max_query_length} (truncate is off)")
                q_len = self.max_query_length
            starts = token_starts(context)
            gold = self.answer_tokens(x, starts)
            offset = q_len + 2  # position of the window's first context token
            windows = self.windows(len(context), q_len)
            for w_start, w_len in windows:
                packed.append(pack([CLS, Part(question, x.get("question_lattice"), 0, q_len), SEP,
                                    Part(context, x.get("lattice"), w_start, w_start + w_len), SEP]))
                context_masks.append([0] * offset + [1] * w_len + [0])
                s, e = gold[0] if gold else (-1, -1)
                inside = w_start <= s and e < w_start + w_len
                start_pos.append(s - w_start + offset if inside else 0)
                end_pos.append(e - w_start + offset if inside else 0)
            refs = x.get("answer_texts")
            if refs is None:
                refs = [a["text"] for a in x.get("answers") or []]
            metadata.append({"windows": [(s, offset) for s, _ in windows], "starts": starts,
                             "context": x.get("context", "".join(context)), "references": list(refs),
                             "id": x.get("id"), "question": x.get("question", "".join(question))})
        batch = self.packed_tensors(packed)
        mask_len = batch["mask"].shape[1]
        batch["context_mask"] = torch.tensor([m + [0] * (mask_len - len(m)) for m in context_masks],
                                             dtype=torch.bool)
        batch["metadata"] = metadata
        if all("answers" in x for x in instances):
            batch["start_positions"] = torch.tensor(start_pos, dtype=torch.long)
            batch["end_positions"] = torch.tensor(end_pos, dtype=torch.long)
        return batch

    def text_to_instance(self, data: dict) -> Instance:
        question, context = data.get("question"), data.get("context")
        if not isinstance(question, str) or not question.strip():
            raise ValueError('expected a non-empty "question"')
        if not isinstance(context, str) or not context.strip():
            raise ValueError('expected a non-empty "context"')
        inst = Instance({"id": str(data.get("id", "")), "question": question, "context": context,
                         "question_chars": split_chars(question), "context_chars": split_chars(context)})
        if "answers" in data:
            inst["answers"] = _answers(data["answers"])
        return inst

    # computation -----------------------------------------------------------------------------
    def forward(self, chars: torch.Tensor, mask: torch.Tensor, context_mask: torch.Tensor, metadata: list,
                start_positions: Optional[torch.Tensor] = None, end_positions: Optional[torch.Tensor] = None,
                **batch) -> dict[str, Any]:
        """chars, segments, mask, context_mask [W, n] over the W windows of the batch's questions."""
        states = self.encode(chars, mask, batch)
        out = self.head(states, mask, context_mask=context_mask, start_positions=start_positions,
                        end_positions=end_positions)
        out["metadata"] = metadata
        if not self.training and start_positions is not None:
            scored = [(p["answer"], m["references"]) for p, m in zip(self.decode(out), metadata) if m["references"]]
            if scored:
                self.metric(*zip(*scored))
        return out

    def decode(self, output: dict) -> list[dict]:
        """The best span of each question over its windows, as text and character offsets."""
        starts = output["span_starts"].tolist()
        ends = output["span_ends"].tolist()
        scores = output["span_scores"].tolist()
        results, w = [], 0
        for meta in output["metadata"]:
            best = None
            for w_start, offset in meta["windows"]:
                if scores[w] != float("-inf") and (best is None or scores[w] > best[0]):
                    best = (scores[w], starts[w] - offset + w_start, ends[w] - offset + w_start)
                w += 1
            if best is None:
                results.append({"answer": "", "answer_start": -1, "score": float("-inf")})
                continue
            score, s, e = best
            char_start = meta["starts"][s]
            char_end = meta["starts"][e + 1] if e + 1 < len(meta["starts"]) else len(meta["context"])
            results.append({"answer": meta["context"][char_start:char_end], "answer_start": char_start,
                            "score": score})
        return results

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        return self.metric.get_metric(reset)

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        return [{"id": meta["id"], "question": meta["question"], **pred}
                for meta, pred in zip(output["metadata"], self.decode(output))]


def _answers(value: Any) -> list[dict]:
    """An input line's ``answers``: a list of ``{"text": str, "answer_start": int}``, else ValueError."""
    if not isinstance(value, list):
        raise ValueError(f'"answers": expected a list of {{"text", "answer_start"}} objects, found '
                         f"{type(value).__name__}")
    for i, answer in enumerate(value):
        if not isinstance(answer, dict):
            raise ValueError(f'"answers"[{i}]: expected an object {{"text", "answer_start"}}, found '
                             f"{type(answer).__name__}")
        for key, kind in (("text", str), ("answer_start", int)):
            if key not in answer:
                raise ValueError(f'"answers"[{i}]: no "{key}"')
            if not isinstance(answer[key], kind) or isinstance(answer[key], bool):
                raise ValueError(f'"answers"[{i}].{key}: expected {"a string" if kind is str else "an integer"}, '
                                 f"found {type(answer[key]).__name__}")
    return [{"text": a["text"], "answer_start": a["answer_start"]} for a in value]
