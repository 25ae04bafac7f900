"""Shared pieces of the encoder tests: random lattice batches, and overfitting 20 Resume
sentences through the real ``train_experiment`` with a small lexicon written to tmp."""
from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from multigrain.components.lattice.types import Lattice, LatticeBatch
from tests.conftest import DATA


@pytest.fixture
def single_thread():
    """One intra-op thread: on a small shared machine two threads of tiny ops mostly wait on
    each other (the overfitting runs are ~10x faster under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_lattice_batch(seed: int, lengths=(9, 5, 1, 7), max_word: int = 4, words_per_char: float = 0.8,
                         chars_only_row: bool = True) -> LatticeBatch:
    """Lattices with random word spans (2..max_word characters); one row without words."""
    rng = random.Random(seed)
    lattices = []
    for r, n in enumerate(lengths):
        words = set()
        if not (chars_only_row and r == 2):
            for _ in range(int(words_per_char * n) + 1):
                s = rng.randrange(n)
                e = min(n - 1, s + rng.randint(1, max_word - 1))
                if e > s:
                    words.add((s, e))
        lattices.append(Lattice.from_words([chr(0x4E00 + rng.randrange(50)) for _ in range(n)], sorted(words)))
    return LatticeBatch.collate(lattices, lambda text, is_char: 2 + sum(map(ord, text)) % 7)


def lattice_rows(batch: LatticeBatch):
    """Per row: (n, [(start, end, position)] of the words)."""
    rows = []
    for b in range(batch.mask.shape[0]):
        n = int(batch.n_chars[b])
        words = [(int(batch.starts[b, t]), int(batch.ends[b, t]), t)
                 for t in range(batch.mask.shape[1]) if batch.mask[b, t] and not batch.is_char[b, t]]
        rows.append((n, words))
    return rows


# ------------------------------------------------------------------------------- overfitting
def twenty_sentences(max_len: int = 40) -> list[list[tuple[str, str]]]:
    """The first 20 Resume training sentences of at most ``max_len`` characters with an entity."""
    blocks = (DATA / "resume_ner" / "train.char.bmes").read_text(encoding="utf-8").strip("\n").split("\n\n")
    out = []
    for block in blocks:
        rows = [line.split(" ") for line in block.split("\n")]
        if len(rows) <= max_len and any(tag != "O" for _, tag in rows):
            out.append(rows)
        if len(out) == 20:
            break
    return out


def write_overfit_files(tmp_path) -> tuple[str, str]:
    """(train file, lexicon file): 20 sentences; the lexicon = their entity strings plus every
    character bigram seen twice (so words overlap, nest and cross entity boundaries)."""
    sentences = twenty_sentences()
    train = tmp_path / "twenty.bmes"
    train.write_text("\n\n".join("\n".join(f"{c} {t}" for c, t in s) for s in sentences) + "\n\n", encoding="utf-8")
    words, bigrams = set(), Counter()
    for s in sentences:
        chars = [c for c, _ in s]
        bigrams.update(a + b for a, b in zip(chars, chars[1:]))
        start = None
        for i, (_, tag) in enumerate(s):
            if tag[0] in "BS":
                start = i
            if tag[0] in "ES" and start is not None:
                words.add("".join(chars[start:i + 1]))
                start = None
    words |= {b for b, c in bigrams.items() if c >= 2}
    lexicon = tmp_path / "lexicon.txt"
    lexicon.write_text("\n".join(sorted(w for w in words if len(w) >= 2)) + "\n", encoding="utf-8")
    return str(train), str(lexicon)


def overfit(tmp_path, model: dict, lattice: bool, epochs: int, lr: float, batch_size: int = 5) -> dict:
    """Train ``model`` on the 20 sentences and return the run summary (validation = the same 20)."""
    from multigrain.platform.runs import train_experiment

    train, lexicon = write_overfit_files(tmp_path)
    reader = {"type": "resume_ner"}
    if lattice:
        reader.update(lattice_builder={"type": "lexicon", "lexicon_path": lexicon}, cache_dir=str(tmp_path / "cache"))
    spec = {
        "task": "ner", "dataset": "twenty",
        "dataset_reader": reader,
        "train_data_path": train, "validation_data_path": train,
        "data_loader": {"batch_size": batch_size},
        "model": model,
        "trainer": {"num_epochs": epochs, "optimizer": {"type": "adam", "lr": lr}, "grad_clipping": 5.0},
        "seed": 7,
        "evaluate_on_test": False,
    }
    return train_experiment(spec, tmp_path / "run")


def assert_char_tagger_overfits(tmp_path, encoder: dict, lattice: bool, epochs: int) -> None:
    """A char+bigram tagger with ``encoder`` and a CRF drives the 20 sentences to F1 >= 0.99."""
    model = {"type": "tagger", "embedder": char_bigram(16), "encoder": encoder, "head": {"type": "crf"}}
    result = overfit(tmp_path, model, lattice=lattice, epochs=epochs, lr=0.01)
    assert result["validation"]["f1"] >= 0.99, result["validation"]


def char_bigram(dim: int = 16) -> dict:
    return {"type": "char_bigram", "char_dim": dim, "bigram_dim": dim, "dropout": 0.0}


def lattice_embedder(dim: int = 32) -> dict:
    return {"type": "lattice", "output_dim": dim, "char_dim": 16, "bigram_dim": 16, "word_dim": 16, "dropout": 0.0}


def test_overfit_data_has_nested_words(tmp_path):
    """The lexicon gives the lattice builders something to do: words in every sentence."""
    from multigrain.components.lattice.lexicon import LexiconBuilder

    train, lexicon = write_overfit_files(tmp_path)
    sentences = twenty_sentences()
    assert len(sentences) == 20 and all(len(s) <= 40 for s in sentences)
    lattices = LexiconBuilder(lexicon_path=lexicon).build_many([[c for c, _ in s] for s in sentences])
    assert sum(lat.n_words for lat in lattices) > 100
    assert all(lat.n_words > 0 for lat in lattices)
