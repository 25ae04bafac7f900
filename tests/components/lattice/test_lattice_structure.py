"""Lattice types and structure functions against plain Python double loops over token pairs."""
import pickle
import random

import numpy as np
import pytest
import torch

from multigrain.components.lattice import structure as st
from multigrain.components.lattice.types import PAD_TOKEN_ID, SEG_PAD, Lattice, LatticeBatch


def random_lattice(rng: random.Random, with_seg: bool = False, S: int = 2) -> Lattice:
    n = rng.randint(1, 9)
    chars = [rng.choice("abcd") for _ in range(n)]
    words = set()
    for _ in range(rng.randint(0, 2 * n)):
        s = rng.randrange(n)
        e = rng.randrange(s, min(n, s + 4))
        words.add((s, e))
    seg = None
    if with_seg:
        seg = []
        for _ in range(S):
            row, w = [0], 0
            for _ in range(n - 1):
                w += rng.random() < 0.5
                row.append(w)
            seg.append(row)
    return Lattice.from_words(chars, sorted(words, key=lambda x: rng.random()), seg_ids=seg)


def random_batch(rng: random.Random, with_seg: bool = False):
    lattices = [random_lattice(rng, with_seg) for _ in range(rng.randint(1, 4))]
    vocab: dict = {}
    batch = LatticeBatch.collate(lattices, lambda t, c: vocab.setdefault((t, c), len(vocab) + 1))
    return lattices, batch, vocab


def test_from_words_orders_and_merges():
    lat = Lattice.from_words(list("abcd"), [(2, 3), (0, 1), (0, 3), (0, 1)], sources=[1, 2, 1, 4])
    assert lat.spans.tolist() == [[0, 0], [1, 1], [2, 2], [3, 3], [0, 1], [0, 3], [2, 3]]
    assert lat.token_text == ("a", "b", "c", "d", "ab", "abcd", "cd")
    assert lat.sources.tolist() == [0, 0, 0, 0, 2 | 4, 1, 1]
    assert lat.n_chars == 4 and lat.n_words == 3
    assert lat.words() == [(0, 1, "ab"), (0, 3, "abcd"), (2, 3, "cd")]
    with pytest.raises(ValueError):
        lat.spans[0, 0] = 5  # read-only
    with pytest.raises(Exception):
        lat.chars = ("x",)  # frozen
    again = pickle.loads(pickle.dumps(lat))  # Ray ships instances by pickle
    assert again == lat and not again.spans.flags.writeable and not again.sources.flags.writeable
    assert again != Lattice.from_words(list("abcd"), [(0, 1)])


def test_validate_rejects_broken_lattices():
    good = Lattice.from_words(list("abc"), [(0, 1)])
    bad_text = Lattice(good.chars, good.spans, ("a", "b", "c", "bc"), good.sources)
    with pytest.raises(ValueError, match="does not match"):
        bad_text.validate()
    unsorted = Lattice(("a", "b", "c"), np.array([[0, 0], [1, 1], [2, 2], [1, 2], [0, 1]], np.int32),
                       ("a", "b", "c", "bc", "ab"), np.array([0, 0, 0, 1, 1]))
    with pytest.raises(ValueError, match="sorted"):
        unsorted.validate()
    with pytest.raises(ValueError, match="seg_ids"):
        Lattice.from_words(list("abc"), [], seg_ids=[[0, 2, 2]])


def test_collate_matches_lattices():
    rng = random.Random(0)
    for _ in range(100):
        lattices, batch, vocab = random_batch(rng, with_seg=True)
        B, T = batch.token_ids.shape
        assert T == max(l.n_tokens for l in lattices)
        assert batch.max_chars == max(l.n_chars for l in lattices)
        for b, lat in enumerate(lattices):
            n, t = lat.n_chars, lat.n_tokens
            for j in range(T):
                real = j < t
                assert bool(batch.mask[b, j]) == real
                assert bool(batch.is_char[b, j]) == (j < n)
                if real:
                    assert batch.token_ids[b, j] == vocab[(lat.token_text[j], j < n)]
                    assert (int(batch.starts[b, j]), int(batch.ends[b, j])) == tuple(lat.spans[j])
                    assert batch.sources[b, j] == lat.sources[j]
                else:
                    assert batch.token_ids[b, j] == PAD_TOKEN_ID
                    assert batch.starts[b, j] == 0 and batch.ends[b, j] == 0
            assert batch.n_chars[b] == n
            assert batch.seg_ids[b, :, :n].tolist() == lat.seg_ids.tolist()
            assert (batch.seg_ids[b, :, n:] == SEG_PAD).all()
            assert batch.char_mask[b].tolist() == [i < n for i in range(batch.max_chars)]
    moved = batch.to("cpu")
    assert torch.equal(moved.token_ids, batch.token_ids) and moved.max_chars == batch.max_chars


def test_collate_rejects_mixed_seg_ids():
    a = Lattice.from_words(list("ab"), [], seg_ids=[[0, 1]])
    b = Lattice.from_words(list("ab"), [])
    with pytest.raises(ValueError):
        LatticeBatch.collate([a, b], lambda t, c: 1)
    assert LatticeBatch.collate([b, b], lambda t, c: 1).seg_ids is None


# --- literal transcriptions of the relation definitions (DESIGN §5) -------------------------

def plte_literal(i, j):
    (p, q), (k, l) = i, j
    holds = {
        0: q == k - 1,
        1: l == p - 1,
        2: p < k <= q < l,
        3: k < p <= l < q,
        4: p <= k <= l <= q,
        5: k <= p <= q <= l,
        6: q < k - 1 or l < p - 1,
    }
    ids = {r for r, h in holds.items() if h}
    # exactly one relation, except identical spans which are both r5 and r6: r5 wins
    assert len(ids) == 1 or (ids == {4, 5} and (p, q) == (k, l)), (i, j, ids)
    return min(ids)


def lb_literal(i, j):
    (si, ei), (sj, ej) = i, j
    holds = {
        0: si == sj and ei == ej,
        1: ej < si,
        2: sj < si <= ej < ei,
        3: si <= sj and ej <= ei and (si, ei) != (sj, ej),
        4: sj <= si and ei <= ej and (si, ei) != (sj, ej),
        5: si < sj <= ei < ej,
        6: sj > ei,
    }
    ids = [r for r, h in holds.items() if h]
    assert len(ids) == 1, (i, j, ids)
    return ids[0]


def spans_of(batch, b):
    return list(zip(batch.starts[b].tolist(), batch.ends[b].tolist()))


def test_plte_relations_and_porous_mask():
    rng = random.Random(1)
    for _ in range(150):
        lattices, batch, _ = random_batch(rng)
        rel = st.plte_relations(batch.starts, batch.ends, batch.mask)
        relp = st.plte_relations(batch.starts, batch.ends, batch.mask, with_pivot=True)
        porous = st.porous_mask(rel, batch.mask)
        porous_p = st.porous_mask(relp, batch.mask)
        B, T = batch.mask.shape
        assert rel.shape == (B, T, T) and relp.shape == (B, T + 1, T + 1)
        for b in range(B):
            sp, m = spans_of(batch, b), batch.mask[b].tolist()
            for i in range(T):
                for j in range(T):
                    want = plte_literal(sp[i], sp[j]) if m[i] and m[j] else st.PLTE_PAD
                    assert rel[b, i, j] == want and relp[b, i, j] == want
                    assert bool(porous[b, i, j]) == (m[i] and m[j] and want <= 5)
                    assert bool(porous_p[b, i, j]) == bool(porous[b, i, j])
                want = st.PLTE_PIVOT if m[i] else st.PLTE_PAD
                assert relp[b, i, T] == want and relp[b, T, i] == want
                assert bool(porous_p[b, i, T]) == m[i] and bool(porous_p[b, T, i]) == m[i]
            assert relp[b, T, T] == st.PLTE_PIVOT and porous_p[b, T, T]


def test_lattice_bert_relations_and_distances():
    rng = random.Random(2)
    for _ in range(150):
        _, batch, _ = random_batch(rng)
        rel = st.lattice_bert_relations(batch.starts, batch.ends, batch.mask)
        clip = rng.choice([1, 2, 128])
        dist = st.lattice_bert_distances(batch.starts, batch.ends, clip=clip)
        B, T = batch.mask.shape
        assert dist.shape == (B, T, T, 4)
        c = lambda x: max(-clip, min(clip, x)) + clip  # noqa: E731
        for b in range(B):
            sp, m = spans_of(batch, b), batch.mask[b].tolist()
            for i in range(T):
                for j in range(T):
                    want = lb_literal(sp[i], sp[j]) if m[i] and m[j] else st.LB_PAD
                    assert rel[b, i, j] == want
                    (si, ei), (sj, ej) = sp[i], sp[j]
                    assert dist[b, i, j].tolist() == [c(sj - si), c(sj - ei), c(ej - si), c(ej - ei)]


def test_containment_mask():
    rng = random.Random(3)
    for _ in range(150):
        lattices, batch, _ = random_batch(rng)
        include_self = rng.random() < 0.5
        cm = st.containment_mask(batch.starts, batch.ends, batch.is_char, batch.mask, include_self=include_self)
        word_index, word_mask = st.word_slots(batch.is_char, batch.mask)
        W = max(l.n_words for l in lattices)
        n_max = max(l.n_chars for l in lattices)
        assert cm.shape == (len(lattices), n_max, W + 2)
        for b, lat in enumerate(lattices):
            words = [tuple(s) for s in lat.spans[lat.n_chars:].tolist()]
            for w in range(W):
                assert bool(word_mask[b, w]) == (w < len(words))
                if w < len(words):
                    assert int(word_index[b, w]) == lat.n_chars + w
            for i in range(n_max):
                real = i < lat.n_chars
                for w in range(W):
                    want = real and w < len(words) and words[w][0] <= i <= words[w][1]
                    assert bool(cm[b, i, w]) == want
                assert bool(cm[b, i, W]) == (real and include_self)
                assert bool(cm[b, i, W + 1])


def segments_literal(lat: Lattice):
    n = lat.n_chars
    words = lat.spans[n:].tolist()
    boundary = [not any(s <= t and e >= t + 1 for s, e in words) for t in range(n)]
    char_seg = [sum(boundary[:t]) for t in range(n)]
    return [char_seg[s] for s, _ in lat.spans.tolist()]


def test_segments():
    rng = random.Random(4)
    for _ in range(200):
        lattices, batch, _ = random_batch(rng)
        seg = st.segments(batch.starts, batch.ends, batch.n_chars, batch.mask)
        for b, lat in enumerate(lattices):
            want = segments_literal(lat)
            assert seg[b, : lat.n_tokens].tolist() == want
            assert (seg[b, lat.n_tokens:] == -1).all()
    # a hand example: words (0,1) and (1,2) chain chars 0..2; char 3 alone; word (4,5)
    lat = Lattice.from_words(list("abcdef"), [(0, 1), (1, 2), (4, 5)])
    batch = LatticeBatch.collate([lat], lambda t, c: 1)
    assert st.segments(batch.starts, batch.ends, batch.n_chars, batch.mask)[0].tolist() == [0, 0, 0, 1, 2, 2, 0, 0, 2]


def test_segment_lengths():
    rng = random.Random(5)
    for _ in range(100):
        lattices, batch, _ = random_batch(rng, with_seg=True)
        lengths = st.segment_lengths(batch.seg_ids, batch.char_mask)
        per_char = st.char_segment_lengths(batch.seg_ids, batch.char_mask)
        count = st.num_segments(batch.seg_ids)
        for b, lat in enumerate(lattices):
            for s, row in enumerate(lat.seg_ids.tolist()):
                for w in range(batch.max_chars):
                    assert lengths[b, s, w] == row.count(w)
                for i in range(batch.max_chars):
                    assert per_char[b, s, i] == (row.count(row[i]) if i < len(row) else 0)
                assert count[b, s] == max(row) + 1
