"""Vocabulary and length-bucketed batching."""
from collections import Counter

from multigrain.platform.batching import bucket_batches
from multigrain.platform.vocab import OOV, PAD, Vocabulary


def test_vocabulary_min_count_labels_and_roundtrip(tmp_path):
    counters = {"chars": Counter("aaabbc"), "tags": Counter(["O", "B-X", "O", "E-X"])}
    v = Vocabulary.from_counters(counters, min_count={"chars": 2})
    assert v.tokens("chars") == [PAD, OOV, "a", "b"]
    assert v.indices("chars", "abcz") == [2, 3, 1, 1]
    assert v.tokens("tags") == ["O", "B-X", "E-X"]
    v.save(tmp_path)
    assert Vocabulary.load(tmp_path).tokens("chars") == v.tokens("chars")


def test_unknown_label_is_an_error_not_oov():
    import pytest

    v = Vocabulary.from_counters({"labels": Counter(["pos", "neg"])})
    with pytest.raises(KeyError, match="'neutral' is not in the 'labels' vocabulary"):
        v.index("labels", "neutral")


def test_buckets_cover_everything_and_group_lengths():
    lengths = [(i * 37) % 101 + 1 for i in range(500)]
    batches = bucket_batches(lengths, 16, shuffle=True, seed=3, epoch=0)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(500))
    assert all(len(b) <= 16 for b in batches)
    spread = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches]
    assert max(spread) <= 25  # similar lengths together (noise 10%)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    assert padded < 1.2 * sum(lengths)  # random batches of 16 would pad to ~1.9x


def test_batch_order_depends_only_on_seed_and_epoch():
    lengths = list(range(1, 200))
    a = bucket_batches(lengths, 8, True, seed=1, epoch=4)
    assert a == bucket_batches(lengths, 8, True, seed=1, epoch=4)
    assert a != bucket_batches(lengths, 8, True, seed=1, epoch=5)
    assert bucket_batches(lengths, 8, False, 1, 0) == bucket_batches(lengths, 8, False, 2, 9)


def test_max_tokens_caps_padded_batch_size():
    lengths = [10] * 50 + [100] * 10
    for b in bucket_batches(lengths, 32, False, 0, 0, max_tokens=400):
        assert len(b) * max(lengths[i] for i in b) <= 400 or len(b) == 1


def padded_one_row_at_a_time(rows, value):
    """The oracle: each row written into its place in a [len(rows), max(1, longest)] tensor of ``value``."""
    import torch

    out = torch.full((len(rows), max([1] + [len(r) for r in rows])), value, dtype=torch.long)
    for i, row in enumerate(rows):
        for j, x in enumerate(row):
            out[i, j] = int(x)
    return out


def test_pad_ids_equals_writing_each_row_in_place():
    import torch
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from multigrain.platform.batching import pad_ids

    ids = st.integers(-2 ** 40, 2 ** 40)
    rows = st.lists(st.one_of(st.lists(ids, max_size=9), st.lists(ids, max_size=9).map(tuple),
                              st.lists(ids, max_size=9).map(lambda r: torch.tensor(r, dtype=torch.long))), max_size=7)

    @settings(max_examples=300, deadline=None)
    @given(rows, st.integers(-3, 3))
    def check(batch, value):
        got = pad_ids(batch, value)
        assert got.dtype == torch.long and torch.equal(got, padded_one_row_at_a_time(batch, value))

    check()


def test_index_of_is_index_with_the_table_looked_up_once():
    import pytest

    v = Vocabulary.from_counters({"chars": Counter("aaabbc"), "tags": Counter(["O", "B-X"])})
    chars, tags = v.index_of("chars"), v.index_of("tags")
    assert [chars(t) for t in "abcz@"] == [v.index("chars", t) for t in "abcz@"] == v.indices("chars", "abcz@")
    assert [tags(t) for t in ["O", "B-X"]] == [v.index("tags", t) for t in ["O", "B-X"]]
    with pytest.raises(KeyError, match="'I-X' is not in the 'tags' vocabulary"):
        tags("I-X")


def test_lattice_token_ids_are_the_char_ids_and_word_ids_looked_up_one_by_one():
    """``CharLatticeModel.lattice_token_id`` (its lookups resolved once) against the per-token
    definition: a character's id is ``char_ids([char])[0]`` (the embedder's own index where it has
    one), a word's its ``words`` index (OOV 1), and 1 for every word without a ``words`` namespace."""
    from types import SimpleNamespace

    from multigrain.components.models.base import CharLatticeModel

    with_words = Vocabulary.from_counters({"chars": Counter("中国人民"), "words": Counter(["中国", "人民"])})
    without = Vocabulary.from_counters({"chars": Counter("中国人民")})
    texts = ["中", "国", "银", "中国", "人民", "银行", ""]
    for vocab in (with_words, without):
        asked = []
        own_index = SimpleNamespace(index=lambda tokens: asked.extend(tokens) or [100 + ord(t[0]) % 7 for t in tokens])
        for embedder in (SimpleNamespace(), own_index):
            model = SimpleNamespace(vocab=vocab, embedder=embedder)
            model.char_ids = lambda tokens, m=model: CharLatticeModel.char_ids(m, tokens)
            token_to_id = CharLatticeModel.lattice_token_id(model)
            for text in texts + texts:
                assert token_to_id(text, False) == (vocab.index("words", text) if vocab.size("words") else 1)
                if text:
                    assert token_to_id(text, True) == model.char_ids([text])[0]
        # the pretrained index: asked once per distinct character by a batch's lookup, once by each char_ids above
        distinct, every = [t for t in texts if t], [t for t in texts + texts if t]
        assert sorted(asked) == sorted(distinct + every)


def test_pad_ids_of_arrays_and_joined_ids():
    """``array.array`` rows (one signed type code) pad as their lists do; other rows are refused by
    ``joined_ids`` and padded one at a time by ``pad_ids``."""
    from array import array

    import pytest
    import torch
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from multigrain.platform.batching import joined_ids, pad_ids

    @settings(max_examples=200, deadline=None)
    @given(st.sampled_from("bhilq"), st.lists(st.lists(st.integers(-100, 100), max_size=9), max_size=7),
           st.integers(-3, 3))
    def check(code, rows, value):
        arrays = [array(code, r) for r in rows]
        assert torch.equal(pad_ids(arrays, value), padded_one_row_at_a_time(rows, value))
        if rows:
            assert joined_ids(arrays).tolist() == [x for r in rows for x in r]

    check()
    mixed = [array("i", [1, 2]), array("q", [3])]
    assert torch.equal(pad_ids(mixed, 0), torch.tensor([[1, 2], [3, 0]]))
    for rows in (mixed, [array("I", [1])], [[1, 2]], []):
        with pytest.raises(TypeError, match="one signed type code"):
            joined_ids(rows)


def test_an_instance_keeps_one_owners_value_and_pickling_leaves_it_behind():
    import pickle

    from multigrain.platform.data import Instance

    x = Instance({"chars": ["a"]}, ("f.txt", 3))
    first, second = object(), object()
    assert x.memo(first) is None
    x.remember(first, [1])
    assert x.memo(first) == [1] and x.memo(second) is None
    x.remember(second, [2])
    assert x.memo(first) is None and x.memo(second) == [2]
    y = pickle.loads(pickle.dumps(x))
    assert y == x and y.source == ("f.txt", 3) and y.memo(second) is None


def test_length_mask_is_true_at_each_rows_first_positions():
    import torch

    from multigrain.platform.batching import length_mask

    assert torch.equal(length_mask([2, 0, 3]), torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1]]).bool())
    assert length_mask([0, 0]).shape == (2, 1) and not length_mask([0]).any()
    assert length_mask([]).shape == (0, 1) and length_mask([]).dtype == torch.bool
