"""Lattice-BERT's lattice position attention against a per-pair (double loop) formulation of
the paper's eq. 2, the [CLS] modes, the ablation flags and the character BERT's padding."""
import math

import pytest
import torch

from multigrain.components.encoders.char_bert import CharBertEncoder
from multigrain.components.encoders.factorised import TokenPositions
from multigrain.components.encoders.lattice_bert import LatticeBertEncoder
from multigrain.components.lattice.types import Lattice, LatticeBatch


def lattice_batch():
    # row 0: 6 chars and words (0,1) (1,2) (0,2) (4,5); row 1: 3 chars and word (1,2)
    lats = [Lattice.from_words(list("研究生活充实"), [(0, 1), (1, 2), (0, 2), (4, 5)]),
            Lattice.from_words(list("很充实"), [(1, 2)])]
    return LatticeBatch.collate(lats, lambda t, c: 2 + len(t))


def relation(si, ei, sj, ej):
    """The paper's 7 relations, written independently of lattice.structure."""
    if (si, ei) == (sj, ej):
        return 0
    if ej < si:
        return 1
    if sj > ei:
        return 6
    if si <= sj and ej <= ei:
        return 3
    if sj <= si and ei <= ej:
        return 4
    return 2 if sj < si else 5


def naive_terms(pb, si, ei, sj, ej, hd):
    """(att_ij, b_ij, r_ij) of head ``hd`` for the spans (si, ei), (sj, ej), from the paper's definitions."""
    dk = pb.head_dim
    sl = slice(hd * dk, (hd + 1) * dk)
    pi = torch.cat([pb.start_positions.weight[si], pb.end_positions.weight[ei]])
    pj = torch.cat([pb.start_positions.weight[sj], pb.end_positions.weight[ej]])
    absolute = float((pi @ pb.position_query.weight.T)[sl] @ (pj @ pb.position_key.weight.T)[sl]) / math.sqrt(2 * dk)

    def clip(t):
        return max(-128, min(128, t)) + 128

    distance = float(pb.distance[0, clip(sj - si), hd] + pb.distance[1, clip(sj - ei), hd]
                     + pb.distance[2, clip(ej - si), hd] + pb.distance[3, clip(ej - ei), hd])
    return absolute, distance, float(pb.relation[relation(si, ei, sj, ej), hd])


def naive_attention(enc, x, starts, ends, mask):
    """First layer's attention output by a double loop over (i, j), from the paper's eq. 2."""
    layer = enc.layers[0]
    att, pb = layer.attention, enc.position_bias
    h, dk = enc.num_heads, enc.head_dim
    q, k, v = att.q(x), att.k(x), att.v(x)
    B, T, _ = x.shape
    out = torch.zeros(B, T, h * dk)
    for b in range(B):
        for hd in range(h):
            sl = slice(hd * dk, (hd + 1) * dk)
            for i in range(T):
                if not mask[b, i]:
                    continue
                scores = []
                for j in range(T):
                    if not mask[b, j]:
                        scores.append(-math.inf)
                        continue
                    content = float(q[b, i, sl] @ k[b, j, sl]) / math.sqrt(2 * dk)
                    position = sum(naive_terms(pb, int(starts[b, i]), int(ends[b, i]), int(starts[b, j]),
                                               int(ends[b, j]), hd))
                    if i == 0:
                        position = float(pb.cls_to_others[hd])
                    elif j == 0:
                        position = float(pb.others_to_cls[hd])
                    scores.append(content + position)
                a = torch.tensor(scores).softmax(0)
                out[b, i, sl] = sum(a[j] * v[b, j, sl] for j in range(T) if mask[b, j])
    return att.out(out)


def randomised(enc):
    torch.manual_seed(3)
    with torch.no_grad():
        for p in enc.position_bias.parameters():
            p.normal_(0, 0.5)
    return enc.eval()


@pytest.mark.parametrize("mode", ["prepend", "first"])
def test_lattice_position_attention_equals_the_per_pair_formulation(mode):
    torch.manual_seed(0)
    lat = lattice_batch()
    enc = randomised(LatticeBertEncoder(8, hidden_size=8, num_layers=1, num_heads=2, dropout=0.0,
                                        attention_dropout=0.0, cls=mode, max_positions=16))
    inputs = torch.randn(*lat.mask.shape, 8)
    x, mask, starts, ends = enc.with_cls(inputs, lat.mask, lat.starts, lat.ends)
    h0 = enc.projection(enc.embedding_norm(x))
    bias = enc.position_bias(starts, ends, mask)
    with torch.no_grad():
        fast = enc.layers[0].attend(h0, bias)
        slow = naive_attention(enc, h0, starts, ends, mask)
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(fast * real, slow * real, atol=1e-5, rtol=1e-4)
    # positions as the paper numbers them: the text from 0 in both modes, [CLS] at token 0
    if mode == "prepend":  # [CLS] inserted, the 6 characters follow at positions 0..5
        assert starts[0, :7].tolist() == [0, 0, 1, 2, 3, 4, 5] and mask.shape[1] == lat.mask.shape[1] + 1
    else:  # character 0 is the packed [CLS]: the text (characters 1..5) is renumbered from 0
        assert starts[0, :6].tolist() == [0, 0, 1, 2, 3, 4] and mask.shape[1] == lat.mask.shape[1]


def test_the_bias_is_computed_once_and_shared_by_every_layer(monkeypatch):
    lat = lattice_batch()
    enc = LatticeBertEncoder(8, hidden_size=8, num_layers=3, num_heads=2).eval()
    calls = []
    original = enc.position_bias.forward
    monkeypatch.setattr(enc.position_bias, "forward", lambda *a: calls.append(1) or original(*a))
    out = enc(torch.randn(*lat.mask.shape, 8), lat.mask, {"lattice": lat})
    assert len(calls) == 1 and out.shape == (2, 6, 8)


@torch.no_grad()
def test_ablation_flags_remove_exactly_their_term():
    lat = lattice_batch()
    full = randomised(LatticeBertEncoder(8, hidden_size=8, num_layers=1, num_heads=2, max_positions=16))
    _, mask, starts, ends = full.with_cls(torch.zeros(*lat.mask.shape, 8), lat.mask, lat.starts, lat.ends)
    bias = full.position_bias(starts, ends, mask)
    for term, flag in enumerate(("use_absolute", "use_distance", "use_relation")):
        ablated = LatticeBertEncoder(8, hidden_size=8, num_layers=1, num_heads=2, max_positions=16, **{flag: False})
        missing, _ = ablated.load_state_dict(full.state_dict(), strict=False)
        assert not missing
        removed = bias - ablated.position_bias(starts, ends, mask)
        for b in range(2):
            for i in range(1, int(mask[b].sum())):  # [CLS] row and column are reset in both
                for j in range(1, int(mask[b].sum())):
                    for hd in range(2):
                        want = naive_terms(full.position_bias, int(starts[b, i]), int(ends[b, i]),
                                           int(starts[b, j]), int(ends[b, j]), hd)[term]
                        assert abs(float(removed[b, hd, i, j]) - want) < 1e-4, (flag, b, i, j)


def test_char_bert_ignores_padding_and_prepends_cls():
    torch.manual_seed(0)
    enc = CharBertEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, attention_dropout=0.0).eval()
    x = torch.randn(1, 4, 8)
    alone, cls = enc.encode_tokens(x, TokenPositions.characters(torch.ones(1, 4, dtype=torch.bool)))
    padded, cls_padded = enc.encode_tokens(torch.cat([x, torch.randn(1, 3, 8)], 1),
                                           TokenPositions.characters(torch.tensor([[True] * 4 + [False] * 3])))
    torch.testing.assert_close(alone, padded[:, :4], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cls, cls_padded, atol=1e-5, rtol=1e-5)
    assert alone.shape == (1, 4, 8)
