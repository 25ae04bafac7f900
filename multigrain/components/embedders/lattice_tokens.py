"""One embedding table over the characters and the lexicon words (Lattice-BERT's vocabulary,
ALBERT's factorised size E): ``tokens [V_c + V_w, E]``, rows ``0..V_c-1`` the ``chars``
namespace, ``V_c + i`` word ``i`` of the ``words`` namespace (``joint_ids``). Plus a token-type
(segment) embedding: a token takes the segment of its start character (``segments [B, n]``, 0
where the model gives none). Output: the sum, ``[B, T, E]`` in the ``LatticeBatch`` layout (words
after the characters, zeros at padding; segment 0 throughout when the model gives no segments),
or ``[B, n, E]`` over the characters with
``words: false`` (the character BERT) or when the batch has no lattice. LayerNorm, dropout and the
E -> d projection belong to the encoder (``encoders/factorised.py``).

``pretrained``: a pre-training run whose ``embedder.`` tensors initialise this one; the
vocabulary must then be that run's (``vocabulary.directory``), else the table sizes differ.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.components.pretrained import load_pretrained
from multigrain.platform import jsonio
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import TokenEmbedder
from multigrain.platform.paths import weights_path
from multigrain.platform.vocab import Vocabulary


def check_same_inputs(vocab: Vocabulary, pretrained: str, words: bool) -> None:
    """The rows of ``tokens`` must mean what they meant in pre-training. When the checkpoint sits
    in a run directory: the run embedded words too iff this embedder does (its ``config.json``),
    and the namespaces equal that run's ``vocabulary/``."""
    run = weights_path(pretrained).parent
    try:
        embedder = jsonio.loads((run / "config.json").read_text(encoding="utf-8"))["model"]["embedder"]
        theirs_words = embedder.get("words", True) if embedder.get("type") == "lattice_tokens" else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        theirs_words = None
    if theirs_words is not None and theirs_words != words:
        kinds = {True: "words: true (lattice_bert)", False: "words: false (char_bert)"}
        raise ConfigurationError(f"pretrained: {run} was pre-trained with {kinds[theirs_words]}; this embedder has "
                                 f"{kinds[words]}: fine-tune it with the encoder it was pre-trained with")
    namespaces = ("chars", "words") if words else ("chars",)
    saved = run / "vocabulary"
    if not (saved / "vocabulary.json").is_file():
        return
    theirs = Vocabulary.load(saved)
    for ns in namespaces:
        mine = vocab.tokens(ns) if ns in vocab.namespaces() else []
        other = theirs.tokens(ns) if ns in theirs.namespaces() else []
        if mine != other:
            raise ConfigurationError(f"pretrained: the vocabulary differs from the pre-training run's ({ns}: {len(mine)} "
                                     f"tokens here, {len(other)} in {saved}): set vocabulary.directory to {saved}")


@TokenEmbedder.register("lattice_tokens")
class LatticeTokenEmbedder(TokenEmbedder):
    weight_sources = ("pretrained",)

    def __init__(self, vocab: Vocabulary, embedding_dim: int = 128, words: bool = True, type_vocab_size: int = 2,
                 pretrained: Optional[str] = None):
        super().__init__()
        self.num_chars = max(2, vocab.size("chars"))
        self.num_words = max(2, vocab.size("words")) if words else 0
        self.uses_lattice = words
        self.embedding_dim = embedding_dim
        self.tokens = nn.Embedding(self.num_chars + self.num_words, embedding_dim, padding_idx=0)
        self.types = nn.Embedding(type_vocab_size, embedding_dim)
        for table in (self.tokens, self.types):
            nn.init.normal_(table.weight, std=0.02)
        with torch.no_grad():
            self.tokens.weight[0].zero_()
        if pretrained:
            check_same_inputs(vocab, pretrained, words)
            load_pretrained(self, pretrained, "embedder.")

    def get_output_dim(self) -> int:
        return self.embedding_dim

    @property
    def vocab_size(self) -> int:
        return self.num_chars + self.num_words

    def joint_ids(self, lattice) -> torch.Tensor:
        """``[B, T]`` ids into ``tokens``: a character's own id, ``V_c +`` a word's id, 0 at padding."""
        return torch.where(lattice.word_mask, lattice.token_ids + self.num_chars, lattice.token_ids)

    def embed(self, ids: torch.Tensor, types: Optional[torch.Tensor]) -> torch.Tensor:
        """``ids, types [B, T]`` -> ``[B, T, E]`` (zeros where ``ids`` is 0, padding)."""
        x = self.tokens(ids)
        # no segments (the tagger): every token is of segment 0, as a single text in pre-training
        x = x + (self.types(types) if types is not None else self.types.weight[0])
        return x * (ids != 0).unsqueeze(-1)

    def token_types(self, segments: Optional[torch.Tensor], starts: torch.Tensor) -> Optional[torch.Tensor]:
        """Each token's segment: that of its start character ``[B, T]`` (None without segments)."""
        if segments is None:
            return None
        return segments.gather(1, starts.clamp(max=segments.shape[1] - 1))

    def forward(self, chars: torch.Tensor, lattice=None, segments: Optional[torch.Tensor] = None,
                **unused) -> torch.Tensor:
        if lattice is None or not self.uses_lattice:
            return self.embed(chars, segments)
        return self.embed(self.joint_ids(lattice), self.token_types(segments, lattice.starts))
