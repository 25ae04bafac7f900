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

For tagging (``models/tagger.py``, which reads characters without [CLS]/[SEP]):
``special_tokens: true`` puts ``[CLS] c_1 .. c_n [SEP]`` around every row and returns the
states of the characters only, so a row holds ``max_characters`` = max_length - 2 characters
(longer sentences: the tagger's windows, ``embedders/windows.py``). ``pieces: wordpiece``
reads the text with the model's own WordPiece tokenizer (``tokenizer.json``) instead of one id
per character: ``2017`` is one piece, a space none; every character still gets a state, that of
its piece (``embedders/piece_alignment.py``: a dropped character gets an ``[UNK]`` position of
its own) plus a learned vector of its place in the piece (single / first / inside / last).
The tagger asks for the pieces with :meth:`piece_batch`.

``layer_mix: true`` returns a learned weighted sum of every layer's states, the embeddings' included
(``nn/scalar_mix.py``, ELMo's scalar mix), instead of the last layer's: for a backbone tuned for
sentence embeddings (m3e) the last layer need not be the best for tagging.

``archive_path``: a run directory (its ``best.pt``) or ``.pt`` file of another spec over the same
``model_path``, whose fine-tuned backbone replaces the pretrained weights (intermediate-task
training, ``embedders/run_backbone.py``): every weight, or one error naming the file.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.embedders.piece_alignment import align, char_spans, piece_place
from multigrain.components.embedders.run_backbone import load_backbone
from multigrain.components.nn.scalar_mix import ScalarMix
from multigrain.platform.batching import pad_ids
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import TokenEmbedder

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")


def load_pretrained(path: Path) -> nn.Module:
    """``AutoModel.from_pretrained(path)``, offline; under ``CI=true``, where the platform draws no
    progress bars, without the weight-loading bar of ``transformers`` either."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    from multigrain.platform import progress

    hide = progress.quiet() and hf_logging.is_progress_bar_enabled()
    if hide:
        hf_logging.disable_progress_bar()
    try:
        return AutoModel.from_pretrained(str(path), local_files_only=True)
    finally:
        if hide:
            hf_logging.enable_progress_bar()


@TokenEmbedder.register("hf_transformer")
class HfTransformer(TokenEmbedder):
    """``forward(chars [B, n] ids from index(), mask [B, n], segments [B, n]) -> [B, n, hidden]``
    (the last hidden layer, or the mix of all with ``layer_mix``); with ``piece_ids`` (``pieces: wordpiece``)
    the characters' states ``[B, n, hidden]`` gathered from the pieces' ones."""
    weight_sources = ("archive_path",)

    def __init__(self, model_path: str, freeze: bool = False, lowercase: bool = True,
                 special_tokens: bool = False, pieces: Literal["chars", "wordpiece"] = "chars",
                 layer_mix: bool = False, archive_path: Optional[str] = None):
        super().__init__()
        path = resolve_model_path(model_path)
        self.token_ids, vocab_file = read_vocabulary(path, model_path)
        missing = [t for t in SPECIAL if t not in self.token_ids]
        if missing:
            raise ConfigurationError(f"model_path: {vocab_file} lacks {', '.join(missing)}")
        self.model = load_pretrained(path)
        if archive_path:
            load_backbone(self.model, archive_path)
        self.lowercase = lowercase
        self.unk = self.token_ids["[UNK]"]
        self.max_length = int(getattr(self.model.config, "max_position_embeddings", 512))
        self.special_tokens = special_tokens
        if pieces not in ("chars", "wordpiece"):
            raise ConfigurationError(f"pieces must be 'chars' or 'wordpiece', got {pieces!r}")
        self.pieces = pieces
        self.tokenizer = None
        if pieces == "wordpiece":
            if not (path / "tokenizer.json").is_file():
                raise ConfigurationError(f"model_path: {model_path}: pieces 'wordpiece' needs its tokenizer.json")
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            self.place = nn.Embedding(4, self.get_output_dim())
            nn.init.zeros_(self.place.weight)
        self.layer_mix = ScalarMix(int(self.model.config.num_hidden_layers) + 1) if layer_mix else None
        if freeze:
            for p in self.model.parameters():
                p.requires_grad_(False)
        # the last hidden layer is read, never BERT's pooler: frozen, so that every trained
        # parameter gets a gradient (data-parallel training needs that); its weights stay in archives
        for p in (getattr(self.model, "pooler", None) or nn.Module()).parameters():
            p.requires_grad_(False)

    def get_output_dim(self) -> int:
        return int(self.model.config.hidden_size)

    def index(self, tokens: list[str]) -> list[int]:
        """One id per token (``[CLS]``/``[SEP]`` map to the model's own)."""
        return index_tokens(self.token_ids, tokens, self.lowercase)

    @property
    def max_characters(self) -> int:
        """The most characters of one row (``[CLS]`` and ``[SEP]`` take two positions)."""
        return self.max_length - (2 if self.special_tokens else 0)

    def piece_batch(self, rows: list[list[str]]) -> dict[str, torch.Tensor]:
        """For ``pieces: wordpiece``: ``piece_ids [B, m]``, ``piece_mask [B, m]``, ``piece_index [B, n]``
        (each character's position among the pieces) and ``piece_place [B, n]``; {} otherwise."""
        if self.tokenizer is None:
            return {}
        unk = self.unk
        ids, index, places = [], [], []
        for chars in rows:
            text = "".join(chars)
            encoding = self.tokenizer.encode(text, add_special_tokens=False)
            spans = char_spans(chars, encoding.offsets)
            kept = [k for k, (s, _) in enumerate(spans) if s >= 0]
            sequence, where = align(len(chars), [spans[k] for k in kept])
            ids.append([encoding.ids[kept[k]] if k >= 0 else unk for k in sequence])
            if len(sequence) > self.max_characters:
                raise ValueError(f"{len(sequence)} word pieces in a row of {len(chars)} characters, more than the "
                                 f"backbone's {self.max_characters}")
            index.append(where)
            places.append(piece_place(where))
        return {"piece_ids": pad_ids(ids), "piece_mask": pad_ids([[1] * len(r) for r in ids]).bool(),
                "piece_index": pad_ids(index), "piece_place": pad_ids(places)}

    def with_special_tokens(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[CLS] ids [SEP]`` per row: ``([B, m + 2], mask [B, m + 2])``."""
        B = ids.shape[0]
        lengths = mask.sum(-1)
        ids = torch.cat([ids.new_full((B, 1), self.token_ids["[CLS]"]), ids.masked_fill(~mask, 0),
                         ids.new_zeros(B, 1)], dim=1)
        ids = ids.scatter(1, (lengths + 1).unsqueeze(1), self.token_ids["[SEP]"])
        mask = torch.arange(ids.shape[1], device=ids.device) < (lengths + 2).unsqueeze(1)
        return ids, mask

    def encode(self, ids: torch.Tensor, mask: torch.Tensor, segments: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The backbone over ``ids [B, m]``: ``[B, m, hidden]`` (without [CLS]/[SEP] rows when it adds them)."""
        if self.special_tokens:
            m = ids.shape[1]
            ids, mask = self.with_special_tokens(ids, mask)
            segments = None
        if ids.shape[1] > self.max_length:
            raise ValueError(f"a row of {ids.shape[1]} positions; the backbone has {self.max_length} "
                             f"(the tagger reads longer sentences in windows)")
        out = self.model(input_ids=ids, attention_mask=mask.long(),
                         token_type_ids=segments if segments is not None else torch.zeros_like(ids),
                         output_hidden_states=self.layer_mix is not None)
        states = out.last_hidden_state if self.layer_mix is None else self.layer_mix(out.hidden_states)
        return states[:, 1: m + 1] if self.special_tokens else states

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, segments: Optional[torch.Tensor] = None,
                piece_ids: Optional[torch.Tensor] = None, piece_mask: Optional[torch.Tensor] = None,
                piece_index: Optional[torch.Tensor] = None, piece_place: Optional[torch.Tensor] = None,
                **unused) -> torch.Tensor:
        if self.tokenizer is None:
            return self.encode(chars, mask, segments)
        if piece_ids is None:
            raise ValueError("hf_transformer with pieces 'wordpiece' needs the batch's piece_ids (piece_batch); "
                             "only the tagger makes them")
        states = self.encode(piece_ids, piece_mask)  # [B, m, d]
        index = piece_index.clamp(max=states.shape[1] - 1).unsqueeze(-1).expand(-1, -1, states.shape[-1])
        chars_states = states.gather(1, index) + self.place(piece_place)  # [B, n, d]
        return chars_states * mask.unsqueeze(-1)


PACKAGE_PREFIX = "package:"


def index_tokens(token_ids: dict[str, int], tokens: list[str], lowercase: bool = True) -> list[int]:
    """One id per token of a vocabulary (``read_vocabulary``): the token as is, else lower-cased
    (``lowercase``), else ``[UNK]``."""
    ids, unk = [], token_ids["[UNK]"]
    for t in tokens:
        i = token_ids.get(t)
        if i is None and lowercase:
            i = token_ids.get(t.lower())
        ids.append(unk if i is None else i)
    return ids


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
