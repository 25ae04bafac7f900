"""Long sentences in overlapping windows (``embedders/windows.py``, ``models/tagger.py``): the
windows cover the sentence, each character's state comes from the window where it is most central
(checked against a brute-force oracle), a batch that needs windows encodes its short sentences
exactly as without them, and a sentence longer than the backbone's positions gets one state per
character and trains, evaluates and predicts without an error."""
import random

import pytest
import torch

from multigrain.components.embedders.windows import join_central, split_windows, window_bounds
from multigrain.platform.batching import length_mask
from multigrain.platform.config import Lazy, build
from multigrain.platform.data import Instance
from multigrain.platform.kinds import Model
from multigrain.platform.vocab import Vocabulary

pytestmark = pytest.mark.usefixtures("single_thread")


def centrality(i, a, size, n):
    """Distance of character i to the nearest cut of window [a, a + size) of a sentence of n."""
    left = i - a if a > 0 else float("inf")
    right = a + size - 1 - i if a + size < n else float("inf")
    return min(left, right)


def test_windows_cover_the_sentence_with_the_overlap():
    for n in range(1, 60):
        for size in range(1, 12):
            for overlap in range(size):
                bounds = window_bounds(n, size, overlap)
                assert bounds[0][0] == 0 and bounds[-1][1] == n
                assert all(b - a == min(size, n) for a, b in bounds)
                # consecutive windows share at least `overlap` characters and leave no gap
                assert all(a2 <= b1 - min(overlap, n - size) for (_, b1), (a2, _) in zip(bounds, bounds[1:]))
                assert len(bounds) == len(set(bounds))
    with pytest.raises(ValueError, match="0 <= overlap < size"):
        window_bounds(10, 4, 4)


def test_join_takes_each_character_from_its_most_central_window():
    rng = random.Random(0)
    for _ in range(50):
        lengths = [rng.randrange(1, 30) for _ in range(rng.randrange(1, 4))]
        size, overlap = rng.randrange(2, 9), 0
        overlap = rng.randrange(size)
        layout, rows = [], []
        for b, n in enumerate(lengths):
            for a, e in window_bounds(n, size, overlap):
                layout.append((b, a))
                rows.append((a, e, n))
        width = max(e - a for a, e, _ in rows)
        # value of row r at position j: a unique code of (row, character) to see which row won
        values = torch.tensor([[[r * 1000 + a + j] for j in range(width)] for r, (a, _, _) in enumerate(rows)],
                              dtype=torch.float)
        row_mask = length_mask([e - a for a, e, _ in rows])
        out = join_central(values, row_mask, torch.tensor([b for b, _ in layout]), torch.tensor([a for _, a in layout]),
                           length_mask(lengths))
        for b, n in enumerate(lengths):
            for i in range(n):
                mine = [(r, a) for r, ((bb, a), (_, e, _)) in enumerate(zip(layout, rows)) if bb == b and a <= i < e]
                best = max(mine, key=lambda ra: (centrality(i, ra[1], size, n), -ra[0]))
                assert out[b, i, 0].item() == best[0] * 1000 + i
        assert (out[~length_mask(lengths)] == 0).all()


class Holder:
    def __init__(self, model: Lazy[Model]):
        self.model = model


def tagger(vocab, embedder, max_length, head="softmax_tagger", **extra):
    spec = {"type": "tagger", "embedder": embedder, "head": {"type": head}, **extra}
    if max_length is not None:
        spec["max_length"] = max_length
    return build(Holder, {"model": spec}).model.construct(vocab=vocab)


def test_an_embedding_tagger_in_windows_equals_it_unwindowed():
    """No context beyond a character: the joined windows must give exactly the whole sentence's states."""
    torch.manual_seed(0)
    chars = [chr(0x4E00 + i) for i in range(40)]
    vocab = Vocabulary({"chars": ["@@PADDING@@", "@@UNKNOWN@@"] + chars, "bigrams": ["@@PADDING@@", "@@UNKNOWN@@"],
                        "tags": ["O", "S-X"]})
    embedder = {"type": "char_bigram", "char_dim": 8, "bigram_dim": 0, "dropout": 0.0}
    whole, windowed = tagger(vocab, embedder, None).eval(), tagger(vocab, embedder, 7, window_overlap=3).eval()
    windowed.load_state_dict(whole.state_dict())
    sentences = [Instance({"chars": chars[:n], "tags": ["O"] * n}) for n in (33, 5, 40)]
    batch = windowed.tensorize(sentences)
    assert "pieces" in batch and batch["chars"].shape[1] == 7
    with torch.no_grad():
        a, b = whole(**whole.tensorize(sentences)), windowed(**batch)
    torch.testing.assert_close(a["logits"], b["logits"])
    assert a["predictions"].tolist() == b["predictions"].tolist()
    torch.testing.assert_close(a["loss"], b["loss"])


TEXT = "我在北京大学读书，今年二十岁。他住在上海市浦东新区，喜欢看书和跑步。他在北京工作。"


@pytest.fixture(scope="module", params=["m3e-small", "a tiny local BERT"])
def backbone(request, tmp_path_factory):
    """(vocabulary, embedder spec, positions): m3e-small when the ``m3e`` extra is installed, and
    always a 2-layer BERT of 64 positions saved to a folder (CI has no m3e)."""
    pytest.importorskip("transformers")
    vocab = Vocabulary({"chars": ["@@PADDING@@", "@@UNKNOWN@@"], "bigrams": ["@@PADDING@@", "@@UNKNOWN@@"],
                        "tags": ["O", "B-X", "E-X", "S-X"]})
    if request.param == "m3e-small":
        from multigrain.components.embedders.hf_transformer import resolve_model_path
        from multigrain.platform.errors import ConfigurationError

        try:
            resolve_model_path("package:embedding/m3e-small")
        except ConfigurationError as e:
            pytest.skip(str(e))
        return vocab, M3E, 512
    from tests.conftest import tiny_bert

    folder = tiny_bert(tmp_path_factory.mktemp("tiny_bert"), TEXT)
    return vocab, {"type": "hf_transformer", "model_path": str(folder), "special_tokens": True}, 64


M3E = {"type": "hf_transformer", "model_path": "package:embedding/m3e-small", "special_tokens": True}


def test_backbone_windows_leave_a_fitting_sentence_as_it_is_and_give_a_long_one_a_state_per_character(backbone):
    vocab, spec, _ = backbone
    torch.manual_seed(0)
    model = tagger(vocab, spec, 12, head="crf", window_overlap=4).eval()
    assert model.max_length == 12
    text = TEXT[:34]
    short = Instance({"chars": list(text[:10]), "tags": ["O"] * 10})
    long = Instance({"chars": list(text), "tags": ["O"] * len(text)})
    seen = {}
    embedder = model.embedder
    original = embedder.forward

    def spy(*args, **kwargs):
        seen["rows"] = kwargs["chars"].shape[0]
        return original(*args, **kwargs)

    embedder.forward = spy
    with torch.no_grad():
        alone = model.embed_and_encode(**{k: v for k, v in model.tensorize([short]).items() if k in ("chars", "mask")},
                                       batch={})[1]
        batch = model.tensorize([short, long])
        rows = model.embed_and_encode(batch["chars"], batch["mask"], {})[1]
        out = model(**batch)
    # the short sentence is one row of the windowed batch and its states are the unwindowed ones
    assert seen["rows"] == 1 + len(window_bounds(len(text), 12, 4))
    torch.testing.assert_close(rows[0, :10], alone[0], atol=1e-5, rtol=1e-4)
    # the long sentence: a prediction for every character, its states from the central windows
    assert out["predictions"].shape == (2, len(text))
    states = join_central(rows, batch["mask"], batch["pieces"]["instance"], batch["pieces"]["start"],
                          batch["pieces"]["mask"])
    assert (states[1].abs().sum(-1) > 0).all() and (states[0, 10:] == 0).all()
    for i in (0, 11, 20, len(text) - 1):
        windows = [(a, e) for a, e in window_bounds(len(text), 12, 4) if a <= i < e]
        a, e = max(windows, key=lambda w: centrality(i, w[0], 12, len(text)))
        ids = torch.tensor([model.char_ids(long["chars"][a:e])])
        ref = embedder.encode(ids, torch.ones_like(ids, dtype=torch.bool))[0, i - a]
        torch.testing.assert_close(states[1, i], ref, atol=1e-5, rtol=1e-4)


def test_a_sentence_of_nearly_three_times_the_backbones_positions_gets_a_state_per_character(backbone):
    """m3e-small's 512 positions and MSRA's longest sentence (1,474 characters); the tiny BERT's 64
    positions and a sentence of 184."""
    vocab, spec, positions = backbone
    model = tagger(vocab, spec, None, head="crf").eval()
    size = positions - 2  # [CLS] and [SEP]
    assert model.max_length == size
    n = 1474 if positions == 512 else 184
    chars = list(("他在北京工作。" * 300)[:n])
    with torch.no_grad():
        out = model(**model.tensorize([Instance({"chars": chars, "tags": ["O"] * n})]))
    assert out["predictions"].shape == (1, n) and torch.isfinite(out["loss"])
    rows, layout = split_windows([Instance({"chars": chars})], size)
    starts = [a for _, a in layout]
    assert [len(r["chars"]) for r in rows] == [size] * 4 and starts[0] == 0 and starts[-1] + size == n
    if positions == 512:
        assert starts == [0, 383, 766, 964]
