"""PLTE: gather/scatter relation attention against the paper's einsum over explicit
[B, T, T, d] relation tensors, the porous mask against its definition, the ablation flags, and
overfitting 20 sentences."""
import math

import pytest
import torch

from multigrain.components.nn.attention import relation_attention
from multigrain.components.nn.positions import sinusoidal_positions
from multigrain.components.encoders.plte import PlteEncoder, plte_structure
from multigrain.testing import ModelTestCase, lattice_embedder
from tests.conftest import lattice_rows, random_lattice_batch

pytestmark = pytest.mark.usefixtures("single_thread")

R1, R2, R3, R4, R5, R6, R7, PIVOT, PAD = range(9)


def naive_attention(q, k, v, allowed, rel, rk, rv):
    """Eqs. 3-4 as written: R^K, R^V looked up into [B, Tq, Tk, dh] tensors, then einsum."""
    RK, RV = rk[rel], rv[rel]  # [B, Tq, Tk, dh]
    scores = torch.einsum("bhid,bhjd->bhij", q, k) + torch.einsum("bhid,bijd->bhij", q, RK)
    scores = scores / math.sqrt(q.shape[-1])
    allowed = allowed | ~allowed.any(-1, keepdim=True)
    a = scores.masked_fill(~allowed.unsqueeze(1), float("-inf")).softmax(-1)
    return torch.einsum("bhij,bhjd->bhid", a, v) + torch.einsum("bhij,bijd->bhid", a, RV)


def brute_relation(p, q, k, l):
    """The PLTE paper's Figure 3, literally: query span (p, q), key span (k, l)."""
    if p <= k <= l <= q:
        return R5
    if k <= p <= q <= l:
        return R6
    if q == k - 1:
        return R1
    if l == p - 1:
        return R2
    if p < k <= q < l:
        return R3
    if k < p <= l < q:
        return R4
    assert q < k - 1 or l < p - 1
    return R7


def brute_structure(batch, porous):
    """Relation ids and the attention mask of every (query token, key) pair by Python loops."""
    B, T = batch.mask.shape
    Tk = T + 1 if porous else T
    rel = torch.full((B, T, Tk), -1, dtype=torch.long)
    allowed = torch.zeros(B, T, Tk, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(Tk):
                real_i = bool(batch.mask[b, i])
                real_j = j == T or bool(batch.mask[b, j])
                if not (real_i and real_j):
                    rel[b, i, j] = PAD
                    continue
                if j == T:
                    rel[b, i, j] = PIVOT
                else:
                    rel[b, i, j] = brute_relation(int(batch.starts[b, i]), int(batch.ends[b, i]),
                                                  int(batch.starts[b, j]), int(batch.ends[b, j]))
                allowed[b, i, j] = (rel[b, i, j] in (R1, R2, R3, R4, R5, R6, PIVOT)) if porous else True
    return rel, allowed


@pytest.mark.parametrize("porous", [True, False])
def test_structure_matches_brute_force(porous):
    batch = random_lattice_batch(3)
    rel, allowed = plte_structure(batch.starts, batch.ends, batch.mask, porous)
    want_rel, want_allowed = brute_structure(batch, porous)
    assert torch.equal(rel, want_rel)
    assert torch.equal(allowed, want_allowed)
    if not porous:  # the full-attention ablation: every real pair, nothing else
        assert torch.equal(allowed, batch.mask.unsqueeze(2) & batch.mask.unsqueeze(1))


def test_porous_mask_masks_exactly_the_non_neighbours():
    batch = random_lattice_batch(5)
    rel, allowed = plte_structure(batch.starts, batch.ends, batch.mask, porous=True)
    real = batch.mask.unsqueeze(2) & batch.mask.unsqueeze(1)
    assert not allowed[:, :, :-1][real & (rel[:, :, :-1] == R7)].any()
    assert allowed[:, :, :-1][real & (rel[:, :, :-1] != R7)].all()
    assert torch.equal(allowed[:, :, -1], batch.mask)  # every real token sees the pivot
    assert (rel[:, :, :-1][real] == R7).any()  # the test batch has non-neighbours to mask


def test_gather_scatter_attention_equals_naive_einsum():
    torch.manual_seed(0)
    batch = random_lattice_batch(1)
    rel, allowed = plte_structure(batch.starts, batch.ends, batch.mask, porous=True)
    B, T, Tk = rel.shape
    h, dh = 3, 5
    q = torch.randn(B, h, T, dh, requires_grad=True)
    k, v = torch.randn(B, h, Tk, dh, requires_grad=True), torch.randn(B, h, Tk, dh, requires_grad=True)
    rk, rv = torch.randn(9, dh, requires_grad=True), torch.randn(9, dh, requires_grad=True)
    ours = relation_attention(q, k, v, allowed, rel, rk, rv)
    want = naive_attention(q, k, v, allowed, rel, rk, rv)
    torch.testing.assert_close(ours, want, atol=1e-5, rtol=1e-5)
    weights = torch.randn_like(ours)
    grads = torch.autograd.grad((ours * weights).sum(), (q, k, v, rk, rv))
    want_grads = torch.autograd.grad((want * weights).sum(), (q, k, v, rk, rv))
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def naive_plte_layer(enc: PlteEncoder, x, batch):
    """One PLTE layer from the encoder's weights, relations as explicit [B, T, T+1, dh] tensors."""
    layer = enc.layers[0]
    att = layer.attention
    mask = batch.mask
    x = enc.char_input.projection(x) + sinusoidal_positions(batch.starts, enc.hidden_size)
    m = mask.unsqueeze(-1).float()
    pivot = (x * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)  # mean over real tokens
    keys = torch.cat([x, pivot], 1)
    rel, allowed = brute_structure(batch, porous=True)

    def heads(t):
        return t.view(t.shape[0], t.shape[1], att.num_heads, att.head_dim).transpose(1, 2)

    out = naive_attention(heads(att.q(x)), heads(att.k(keys)), heads(att.v(keys)), allowed, rel, att.rk, att.rv)
    x = layer.norm1.norm(x + att.out(out.transpose(1, 2).flatten(2)))
    x = layer.norm2.norm(x + layer.ffn(x))
    return x[:, : batch.max_chars] * batch.char_mask.unsqueeze(-1)


def test_encoder_layer_equals_paper_equations():
    torch.manual_seed(1)
    batch = random_lattice_batch(2)
    enc = PlteEncoder(12, hidden_size=16, num_layers=1, num_heads=2, head_dim=5, dropout=0.0).eval()
    x = torch.randn(*batch.mask.shape, 12)
    torch.testing.assert_close(enc(x, batch.mask, {"lattice": batch}), naive_plte_layer(enc, x, batch),
                               atol=1e-5, rtol=1e-5)


def test_lattice_false_drops_the_word_tokens():
    torch.manual_seed(2)
    batch = random_lattice_batch(4)
    n = batch.max_chars
    enc = PlteEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, lattice=False).eval()
    x = torch.randn(*batch.mask.shape, 8)
    out = enc(x, batch.mask, {"lattice": batch})
    other_words = x.clone()
    other_words[~batch.is_char] = torch.randn(int((~batch.is_char).sum()), 8)
    # the same as characters alone, with no lattice at all; word inputs are never read
    torch.testing.assert_close(out, enc(x[:, :n], batch.char_mask, {}), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out, enc(other_words, batch.mask, {"lattice": batch}), atol=1e-6, rtol=1e-6)
    # with the lattice the words do reach the characters
    with_lattice = PlteEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0).eval()
    a = with_lattice(x, batch.mask, {"lattice": batch})
    b = with_lattice(other_words, batch.mask, {"lattice": batch})
    assert (a - b)[batch.char_mask].abs().max() > 1e-3


def test_porous_false_attends_everywhere_without_pivot():
    torch.manual_seed(3)
    batch = random_lattice_batch(6)
    enc = PlteEncoder(8, hidden_size=8, num_layers=1, num_heads=2, dropout=0.0, porous=False).eval()
    seen = {}
    enc.layers[0].attention.register_forward_hook(
        lambda mod, args, kwargs, out: seen.update(keys=args[1].shape[1], allowed=kwargs["allowed"]),
        with_kwargs=True)
    enc(torch.randn(*batch.mask.shape, 8), batch.mask, {"lattice": batch})
    assert seen["keys"] == batch.mask.shape[1]  # no pivot key
    assert torch.equal(seen["allowed"], batch.mask.unsqueeze(2) & batch.mask.unsqueeze(1))


def test_pivot_attention_mode_runs_and_differs():
    torch.manual_seed(4)
    batch = random_lattice_batch(7)
    x = torch.randn(*batch.mask.shape, 8)
    mean = PlteEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0).eval()
    star = PlteEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, pivot="attention").eval()
    star.load_state_dict(mean.state_dict(), strict=False)
    a, b = mean(x, batch.mask, {"lattice": batch}), star(x, batch.mask, {"lattice": batch})
    assert torch.isfinite(b).all() and (a - b).abs().max() > 1e-4
    # the first layer sees the same pivot (the mean of the input) in both modes
    mean.layers = mean.layers[:1]
    star.layers, star.relay = star.layers[:1], star.relay[:0]
    torch.testing.assert_close(mean(x, batch.mask, {"lattice": batch}), star(x, batch.mask, {"lattice": batch}))


def test_padding_and_batch_mates_do_not_change_a_sentence():
    torch.manual_seed(5)
    batch = random_lattice_batch(8)
    enc = PlteEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0).eval()
    x = torch.randn(*batch.mask.shape, 8)
    out = enc(x, batch.mask, {"lattice": batch})
    n, words = lattice_rows(batch)[0]
    single = random_lattice_batch(8, lengths=(9,))
    T1 = single.mask.shape[1]
    assert torch.equal(single.starts[0], batch.starts[0, :T1])
    alone = enc(x[:1, :T1], single.mask, {"lattice": single})
    torch.testing.assert_close(alone[0, :n], out[0, :n], atol=1e-5, rtol=1e-5)
    assert not out[~batch.char_mask].any()


def test_overfits_twenty_sentences(tmp_path, tagger_overfit_data):
    model = {"type": "tagger", "embedder": lattice_embedder(32),
             "encoder": {"type": "plte", "hidden_size": 32, "num_layers": 1, "num_heads": 4, "dropout": 0.0},
             "head": {"type": "bigru_crf", "embedder_dim": 32, "hidden_size": 32, "dropout": 0.0}}
    ModelTestCase(tagger_overfit_data.spec(model, lattice=True, epochs=20), tmp_path / "run").check("f1", 0.99)
