"""A ``transformers`` model (BERT-like) from a local directory as the character backbone.

Never downloads: ``from_pretrained(model_path, local_files_only=True)``, and a path that is not
a directory is a configuration error. Token ids come from the directory's ``vocab.txt`` (one
token per line, id = line number), one id per character so that positions stay aligned with
the characters: a token found as is, else lower-cased (``lowercase``), else ``[UNK]``. The
sentence models call ``index(tokens)`` instead of their own vocabulary when the embedder has it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import TokenEmbedder

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")


@TokenEmbedder.register("hf_transformer")
class HfTransformer(TokenEmbedder):
    """``forward(chars [B, n] ids from index(), mask [B, n], segments [B, n]) -> [B, n, hidden]``
    (the last hidden layer)."""

    def __init__(self, model_path: str, freeze: bool = False, lowercase: bool = True):
        super().__init__()
        path = Path(model_path)
        if not path.is_dir():
            raise ConfigurationError(f"model_path: {model_path} is not a directory (a local transformers model "
                                     f"with config.json and vocab.txt; nothing is ever downloaded)")
        vocab_file = path / "vocab.txt"
        if not vocab_file.is_file():
            raise ConfigurationError(f"model_path: {model_path} has no vocab.txt")
        from transformers import AutoModel

        self.model = AutoModel.from_pretrained(str(path), local_files_only=True)
        tokens = vocab_file.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.token_ids = {t: i for i, t in reversed(list(enumerate(tokens)))}  # first occurrence wins
        missing = [t for t in SPECIAL if t not in self.token_ids]
        if missing:
            raise ConfigurationError(f"model_path: {vocab_file} lacks {', '.join(missing)}")
        self.lowercase = lowercase
        self.unk = self.token_ids["[UNK]"]
        self.max_length = int(getattr(self.model.config, "max_position_embeddings", 512))
        if freeze:
            for p in self.model.parameters():
                p.requires_grad_(False)

    def get_output_dim(self) -> int:
        return int(self.model.config.hidden_size)

    def index(self, tokens: list[str]) -> list[int]:
        """One id per token (``[CLS]``/``[SEP]`` map to the model's own)."""
        ids, table, unk = [], self.token_ids, self.unk
        for t in tokens:
            i = table.get(t)
            if i is None and self.lowercase:
                i = table.get(t.lower())
            ids.append(unk if i is None else i)
        return ids

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, segments: Optional[torch.Tensor] = None,
                **unused) -> torch.Tensor:
        out = self.model(input_ids=chars, attention_mask=mask.long(),
                         token_type_ids=segments if segments is not None else torch.zeros_like(chars))
        return out.last_hidden_state
