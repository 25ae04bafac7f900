"""Sentences longer than a BERT encoder's positions are tagged in windows:
the cut rule equals the pre-training corpus' old one, a lattice piece keeps exactly the words
inside it, and a char_bert / lattice_bert tagger with 12 positions trains, evaluates and predicts
sentences of up to 40 characters in overlapping windows (``embedders/windows.py``), each
character's state that of the window, encoded alone, where the character is most central."""
import random

import numpy as np
import pytest
import torch

from multigrain.components.embedders.windows import split_windows, window_bounds
from multigrain.components.lattice.types import Lattice
from multigrain.components.embedders.windows import split_windows, window_bounds
from multigrain.components.text import SENTENCE_END, piece_bounds
from multigrain.platform.data import Instance
from multigrain.testing import ModelTestCase

pytestmark = pytest.mark.usefixtures("single_thread")


def old_pieces(chars, limit):
    """The text corpus' cut before it shared ``piece_bounds`` (the reference)."""
    while len(chars) > limit:
        window = chars[:limit]
        ends = [i for i, c in enumerate(window) if SENTENCE_END.fullmatch(c)]
        cut = ends[-1] + 1 if ends and ends[-1] > 0 else limit
        yield chars[:cut]
        chars = chars[cut:]
    if chars:
        yield chars


def test_piece_bounds_equal_the_corpus_rule_and_cover_the_sentence():
    rng = random.Random(0)
    for _ in range(500):
        chars = [rng.choice("甲乙丙。！;") for _ in range(rng.randrange(0, 30))]
        limit = rng.randrange(1, 9)
        bounds = piece_bounds(chars, limit)
        assert [chars[a:b] for a, b in bounds] == list(old_pieces(chars, limit))
        assert [a for a, _ in bounds[1:]] == [b for _, b in bounds[:-1]]
        assert all(0 < b - a <= limit for a, b in bounds) and (not chars or bounds[-1][1] == len(chars))


def test_a_lattice_piece_keeps_exactly_the_words_inside_it():
    rng = np.random.default_rng(1)
    chars = list("中华人民共和国成立了七十年")
    n = len(chars)
    words = {(int(s), int(s + rng.integers(1, 4))) for s in rng.integers(0, n - 3, 12)}
    words = sorted(words)
    sources = [int(rng.integers(1, 4)) for _ in words]
    seg = np.array([[0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 5, 6]])
    lattice = Lattice.from_words(chars, words, sources, seg)
    for start, end in [(0, n), (0, 5), (3, 9), (7, n), (4, 5)]:
        inside = [(s, e, src) for (s, e), src in zip(words, sources) if s >= start and e < end]
        expected = Lattice.from_words(chars[start:end], [(s - start, e - start) for s, e, _ in inside],
                                      [src for *_, src in inside], seg[:, start:end] - seg[:, start:start + 1])
        piece = lattice.piece(start, end)
        piece.validate()
        assert piece == expected


def test_short_batches_are_left_whole_and_long_ones_cut_with_their_tags():
    short = [Instance({"chars": list("甲乙丙"), "tags": ["O"] * 3})]
    rows, layout = split_windows(short, 3)
    assert rows == short and layout is None
    long = short + [Instance({"chars": list("甲乙。丙丁戊"), "tags": list("ABCDEF")})]
    rows, layout = split_windows(long, 4, overlap=2)
    bounds = window_bounds(6, 4, 2)
    assert [("".join(r["chars"]), "".join(r["tags"])) for r in rows] == [("甲乙丙", "OOO")] + [
        ("甲乙。丙丁戊"[a:e], "ABCDEF"[a:e]) for a, e in bounds]
    assert layout == [(0, 0)] + [(1, a) for a, _ in bounds] and bounds[0][0] == 0 and bounds[-1][1] == 6


def bert_tagger(encoder: str, words: bool) -> dict:
    return {"type": "tagger", "embedder": {"type": "lattice_tokens", "embedding_dim": 32, "words": words},
            "encoder": {"type": encoder, "hidden_size": 32, "num_layers": 1, "num_heads": 2, "dropout": 0.0,
                        "attention_dropout": 0.0, "max_positions": 12},
            "head": {"type": "softmax_tagger"}}


@pytest.mark.parametrize("encoder,words", [("char_bert", False), ("lattice_bert", True)])
def test_a_bert_tagger_with_12_positions_tags_40_character_sentences_in_pieces(encoder, words, tmp_path,
                                                                               tagger_overfit_data):
    data = tagger_overfit_data
    assert max(len(s) for s in data.sentences) > 24  # at least three pieces for some sentences
    spec = data.spec(bert_tagger(encoder, words), lattice=words, epochs=40, lr=0.01)
    case = ModelTestCase(spec, tmp_path / "run")
    case.check("f1", 0.9)  # fits, evaluates as trained, and predict's whole sentences score as evaluated
    model = case.archive.model.eval()
    assert model.max_length == 12
    instances = case.archive.read(spec["train_data_path"])
    longest = max(instances, key=lambda x: len(x["chars"]))
    n = len(longest["chars"])
    windows = window_bounds(n, 12, 3)  # the default overlap: a quarter of the window
    assert len(windows) >= 3
    with torch.no_grad():
        whole = model(**model.tensorize([longest]))["predictions"][0]
        alone = [model.embed_and_encode(**{k: v for k, v in model.tensorize([w]).items() if k in ("chars", "mask")},
                                        batch={"lattice": model.tensorize([w]).get("lattice")})[1][0]
                 for w in split_windows([longest], 12)[0]]

        def centrality(i, a):
            return min(i - a if a > 0 else n, a + 11 - i if a + 12 < n else n)
        states = torch.stack([alone[k][i - windows[k][0]] for i in range(n)
                              for k in [max((k for k, (a, e) in enumerate(windows) if a <= i < e),
                                            key=lambda k: (centrality(i, windows[k][0]), -k))]])
        expected = model.head(states[None], torch.ones(1, n, dtype=torch.bool))["predictions"][0]
    assert whole.tolist() == expected.tolist()


@pytest.mark.parametrize("max_length,message", [(13, "max_length 13 is more than the encoder's 12 positions"),
                                                (0, "max_length must be positive, got 0")])
def test_a_bad_max_length_is_one_spec_error_and_writes_nothing(max_length, message, tmp_path, tagger_overfit_data):
    from multigrain.platform.errors import SpecError
    from multigrain.platform.runs import Run

    model = dict(bert_tagger("char_bert", False), max_length=max_length)
    with pytest.raises(SpecError) as error:
        Run(tagger_overfit_data.spec(model, lattice=False, epochs=1), tmp_path / "run").train()
    assert "model: Tagger: " + message in str(error.value) and str(error.value).startswith("1 error in spec")
    assert not (tmp_path / "run").exists()
