"""A ``transformers`` model (BERT-like) from a local directory as the character backbone.

Never downloads: ``from_pretrained(model_path, local_files_only=True)``, and a path that is not
a directory is a configuration error. ``model_path`` is a directory, or ``package:NAME/SUBDIR``
for a model shipped inside an installed Python package (e.g. ``package:embedding/m3e-small``
from the optional extra ``multigrain[m3e]``), so that a spec does not name a virtualenv path.

Token ids come from the directory's ``vocab.txt`` (one token per line, id = line number) or,
without one, from the WordPiece vocabulary in its ``tokenizer.json``; one id per character so
that positions stay aligned with the characters: a token found as is, else lower-cased
(``lowercase``), else ``[UNK]``. The sentence models call ``index(tokens)`` instead of their
own vocabulary when the embedder has it.
"""
from __future__ import annotations

import importlib.util
import json
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
        path = resolve_model_path(model_path)
        self.token_ids, vocab_file = read_vocabulary(path, model_path)
        missing = [t for t in SPECIAL if t not in self.token_ids]
        if missing:
            raise ConfigurationError(f"model_path: {vocab_file} lacks {', '.join(missing)}")
        from transformers import AutoModel

        self.model = AutoModel.from_pretrained(str(path), local_files_only=True)
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


PACKAGE_PREFIX = "package:"


def resolve_model_path(model_path: str) -> Path:
    """A directory, or ``package:NAME/SUBDIR`` inside the installed package NAME."""
    if model_path.startswith(PACKAGE_PREFIX):
        name, _, sub = model_path[len(PACKAGE_PREFIX):].partition("/")
        try:
            spec = importlib.util.find_spec(name) if name else None
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            extra = " (pip install 'multigrain[m3e]')" if name == "embedding" else ""
            raise ConfigurationError(f"model_path: {model_path}: the Python package {name!r} is not installed{extra}")
        path = Path(list(spec.submodule_search_locations)[0]) / sub
    else:
        path = Path(model_path)
    if not path.is_dir():
        raise ConfigurationError(f"model_path: {model_path} is not a directory (a local transformers model "
                                 f"with config.json and vocab.txt or tokenizer.json; nothing is ever downloaded)")
    return path


def read_vocabulary(path: Path, model_path: str) -> tuple[dict[str, int], Path]:
    """``token -> id`` from ``vocab.txt`` (first occurrence wins) or ``tokenizer.json``'s WordPiece vocab."""
    vocab_file = path / "vocab.txt"
    if vocab_file.is_file():
        tokens = vocab_file.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return {t: i for i, t in reversed(list(enumerate(tokens)))}, vocab_file
    vocab_file = path / "tokenizer.json"
    if not vocab_file.is_file():
        raise ConfigurationError(f"model_path: {model_path} has neither vocab.txt nor tokenizer.json")
    try:
        model = json.loads(vocab_file.read_text(encoding="utf-8")).get("model") or {}
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigurationError(f"model_path: {vocab_file} is not valid JSON: {e}") from None
    vocab = model.get("vocab")
    if model.get("type") != "WordPiece" or not isinstance(vocab, dict):
        raise ConfigurationError(f"model_path: {vocab_file} has no WordPiece vocabulary "
                                 f"(model type {model.get('type')!r}); one id per character needs one")
    return {str(t): int(i) for t, i in vocab.items()}, vocab_file
