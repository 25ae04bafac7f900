"""A BERT-shaped Transformer over characters, randomly initialised: the character backbone.

It consumes token ids (its own token, position and segment embeddings), so it is registered as
a ``token_embedder`` like AllenNLP's pretrained-transformer embedder: ``forward(chars [B, n],
mask [B, n], segments [B, n]) -> states [B, n, d]``. Layers such as ``mwa`` and ``hrmf`` sit
on its output as the model's ``encoder``.

``archive_path``: a multigrain run directory (or a ``.pt`` file) whose weights initialise this
backbone wherever the parameter names and shapes match, under whatever prefix the backbone had
in that run (``embedder.``, ``backbone.``...). Token-embedding rows are copied by token text when
the run directory has its vocabulary, so the two vocabularies need not agree.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

import torch
from torch import nn

from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.old_names import accept_old_names, rename_old_entries
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer
from multigrain.platform.errors import ConfigurationError, DataWarning
from multigrain.platform.kinds import TokenEmbedder
from multigrain.platform.vocab import Vocabulary
from multigrain.platform.weights import load_weights, tensor_dict


#: the names of a layer's parameters before it became a PostNormTransformerLayer (one fused q/k/v
#: projection; BERT's names for the rest)
BERT_LAYER_OLD_NAMES = {"qkv.": ("attention.q.", "attention.k.", "attention.v."), "attention_output.": "attention.out.",
                        "attention_norm.": "norm1.norm.", "ffn.0.": "ffn.net.0.", "ffn.2.": "ffn.net.3.",
                        "ffn_norm.": "norm2.norm."}


@TokenEmbedder.register("char_transformer")
class CharTransformer(TokenEmbedder):
    """Token + position + segment embeddings, LayerNorm, ``num_layers`` post-LayerNorm BERT
    layers (:class:`PostNormTransformerLayer` with GELU, no FFN dropout, LayerNorm eps 1e-12).
    Weights saved under the layers' old names (``BERT_LAYER_OLD_NAMES``) load, by
    ``load_state_dict`` and by ``archive_path``."""
    weight_sources = ("archive_path",)

    def __init__(self, vocab: Vocabulary, hidden_size: int = 256, num_layers: int = 4, num_heads: int = 4,
                 intermediate_size: Optional[int] = None, max_length: int = 512, type_vocab_size: int = 2,
                 dropout: float = 0.1, attention_dropout: float = 0.1, namespace: str = "chars",
                 archive_path: Optional[str] = None):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        self.vocab = vocab
        self.namespace = namespace
        self.max_length = max_length
        self.hidden_size = hidden_size
        self.tokens = nn.Embedding(max(2, vocab.size(namespace)), hidden_size, padding_idx=0)
        self.positions = nn.Embedding(max_length, hidden_size)
        self.segments = nn.Embedding(type_vocab_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            PostNormTransformerLayer(MultiHeadAttention(hidden_size, num_heads, dropout=attention_dropout),
                                     intermediate_size or 4 * hidden_size, dropout, activation="gelu", ffn_dropout=0.0,
                                     norm_eps=1e-12)
            for _ in range(num_layers))
        for layer in self.layers:
            accept_old_names(layer, BERT_LAYER_OLD_NAMES)
        self.apply(_bert_init)
        if archive_path:
            self.load_archive(archive_path)

    def get_output_dim(self) -> int:
        return self.hidden_size

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, segments: Optional[torch.Tensor] = None,
                **unused) -> torch.Tensor:
        """chars, segments [B, n] long; mask [B, n] bool -> [B, n, hidden_size]."""
        n = chars.shape[1]
        if n > self.max_length:
            raise ValueError(f"input of {n} positions; this backbone has max_length {self.max_length}")
        positions = torch.arange(n, device=chars.device)
        x = self.tokens(chars) + self.positions(positions)
        if segments is not None:
            x = x + self.segments(segments)
        x = self.dropout(self.norm(x))
        for layer in self.layers:
            x = layer(x, key_mask=mask)
        return x

    # weights from another run ---------------------------------------------------------------
    def load_archive(self, archive_path: str) -> None:
        path = Path(archive_path)
        weights = path / "best.pt" if path.is_dir() else path
        if not weights.exists():
            raise ConfigurationError(f"archive_path: {weights} not found (expected a run directory with best.pt)")
        # a dict of tensors loaded with weights_only (a crafted file runs nothing), else one clear error
        state = tensor_dict(load_weights(weights, "checkpoint", "cpu", where="archive_path: "), weights,
                            where="archive_path: ")
        own = self.state_dict()
        prefix = _best_prefix(state.keys(), own.keys())
        if prefix is None:
            raise ConfigurationError(f"archive_path: no parameter of {weights} matches a char_transformer's names")
        for i in range(len(self.layers)):
            rename_old_entries(state, f"{prefix}layers.{i}.", BERT_LAYER_OLD_NAMES)
        token_rows = _token_row_map(path / "vocabulary" if path.is_dir() else None, self.vocab, self.namespace)
        loaded, skipped = [], []
        with torch.no_grad():
            for name, tensor in own.items():
                source = state.get(prefix + name)
                if source is None:
                    continue
                if name == "tokens.weight" and token_rows is not None and source.shape[1:] == tensor.shape[1:]:
                    ours, theirs = token_rows
                    tensor[ours] = source[theirs].to(tensor.dtype)
                    loaded.append(name)
                elif source.shape == tensor.shape:
                    tensor.copy_(source)
                    loaded.append(name)
                else:
                    skipped.append(f"{name} {tuple(source.shape)} vs {tuple(tensor.shape)}")
        self.load_state_dict(own)
        missing = len(own) - len(loaded) - len(skipped)
        if skipped or missing:
            warnings.warn(f"archive_path {archive_path}: loaded {len(loaded)} of {len(own)} tensors; "
                          f"{missing} not in the archive, shape mismatch: {', '.join(skipped) or 'none'}", DataWarning)


def _bert_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()


def _best_prefix(theirs, ours) -> Optional[str]:
    """The prefix p maximising how many of our names appear as p + name in the archive."""
    ours = list(ours)
    counts: dict[str, int] = {}
    for key in theirs:
        for name in ours:
            if key.endswith(name) and (len(key) == len(name) or key[-len(name) - 1] == "."):
                prefix = key[: len(key) - len(name)]
                counts[prefix] = counts.get(prefix, 0) + 1
    return max(counts, key=lambda p: (counts[p], -len(p))) if counts else None


def _token_row_map(vocab_dir: Optional[Path], vocab: Vocabulary, namespace: str):
    """(our rows, their rows) of the tokens both vocabularies hold; None without theirs."""
    if vocab_dir is None or not (vocab_dir / "vocabulary.json").is_file():
        return None
    try:
        other = Vocabulary.load(vocab_dir)
    except ConfigurationError as e:  # names the file
        raise ConfigurationError(f"archive_path: {e}") from None
    if namespace not in other.namespaces():
        return None
    pairs = [(i, other.index(namespace, t)) for i, t in enumerate(vocab.tokens(namespace))
             if other.contains(namespace, t)] if namespace in vocab.namespaces() else []
    if not pairs:
        return None
    ours, theirs = zip(*pairs)
    return torch.tensor(ours), torch.tensor(theirs)
