"""The target-side subword model of translation: HF ``tokenizers`` (pinned 0.23.3), trained on the
training corpus's target sentences, saved as one ``tokenizer.json``.

- ``bpe`` (Sennrich et al. 2016) or ``unigram`` (Kudo 2018) with at most ``vocab_size`` entries
  (fewer when the corpus has fewer distinct pieces);
- NFKC normalisation; a Metaspace pre-tokenizer (a word's first piece carries ``▁``, the
  SentencePiece convention) and the matching decoder, so ``decode`` gives plain text back
  (``decode(encode(s)) == " ".join(NFKC(s).split())``);
- special tokens ``<pad>`` 0, ``<unk>`` 1, ``<s>`` 2 (BOS), ``</s>`` 3 (EOS).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Literal, Sequence

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = [PAD, UNK, BOS, EOS]


def train_subwords(texts: Iterable[str], path: Path, vocab_size: int,
                   kind: Literal["bpe", "unigram"] = "bpe") -> None:
    """Train a subword model on ``texts`` and save it to ``path`` (JSON)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token=UNK))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False)
    elif kind == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, unk_token=UNK,
                                          show_progress=False)
    else:
        raise ValueError(f"subword kind must be 'bpe' or 'unigram', got {kind!r}")
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))


class Subwords:
    """A saved subword model: ``encode(texts) -> ids`` (no BOS/EOS), ``decode(ids) -> texts``."""

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer

        try:
            self.tokenizer = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - tokenizers raises its own exception type
            raise ValueError(f"{path}: not a subword model ({e})") from None
        ids = [self.tokenizer.token_to_id(t) for t in SPECIALS]
        if ids != [0, 1, 2, 3]:
            raise ValueError(f"{path}: special tokens {SPECIALS} are not ids 0-3 ({ids})")
        self.pad, self.unk, self.bos, self.eos = ids

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return self.tokenizer.decode_batch([list(map(int, row)) for row in ids], skip_special_tokens=True)
