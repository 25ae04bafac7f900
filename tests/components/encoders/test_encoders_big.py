"""BiG-Transformer: the bipartite attention against a per-character loop over Algorithm 1, the
bipartite structure against brute force, what each flag changes, and overfitting 20 sentences."""
import math

import pytest
import torch

from multigrain.components.encoders.big import BigEncoder, BipartiteWords
from multigrain.components.nn.positions import sinusoidal_positions
from multigrain.testing import ModelTestCase, char_tagger
from tests.conftest import lattice_rows, random_lattice_batch

pytestmark = pytest.mark.usefixtures("single_thread")


def loop_attention(layer, h, batch, local, global_node, include_self):
    """Algorithm 1, lines 4-17, one character at a time with Python lists."""
    att = layer.attention
    rows = lattice_rows(batch)
    out = torch.zeros_like(h)
    for b, (n, words) in enumerate(rows):
        o = {(s, e): h[b, s:e + 1].sum(0) for s, e, _ in words}  # eq. 4
        s_node = layer.sentence(h[b, :n].mean(0)) if global_node else None  # eq. 5
        for i in range(n):
            U = []
            if local == "lexicon":
                U += [o[(s, e)] for s, e, _ in words if s <= i <= e]
            if include_self:
                U.append(h[b, i])
            if local == "adjacent":
                U += [h[b, j] for j in (i - 1, i + 1) if 0 <= j < n]
            if global_node:
                U.append(s_node)
            if not U:  # nothing to attend to: a zero attention vector
                out[b, i] = att.out(h.new_zeros(att.num_heads * att.head_dim))
                continue
            keys = torch.stack(U)  # [k, d]
            q = att.q(h[b, i]).view(att.num_heads, att.head_dim)
            k = att.k(keys).view(len(U), att.num_heads, att.head_dim)
            v = att.v(keys).view(len(U), att.num_heads, att.head_dim)
            heads = []
            for head in range(att.num_heads):
                a = torch.softmax(k[:, head] @ q[head] / math.sqrt(att.head_dim), dim=0)
                heads.append(a @ v[:, head])
            out[b, i] = att.out(torch.cat(heads))
    return out


def loop_encoder(enc: BigEncoder, x, batch):
    layer = enc.layers[0]
    n = batch.max_chars
    mask = batch.char_mask.unsqueeze(-1)
    h = (enc.char_input.projection(x[:, :n]) + sinusoidal_positions(torch.arange(n).expand(x.shape[0], n), enc.hidden_size))
    h = h * mask
    y = loop_attention(layer, h, batch, enc.local, enc.global_node, enc.include_self)
    h = layer.norm1.norm(h + y)
    return layer.norm2.norm(h + layer.ffn(h)) * mask


FLAGS = [("lexicon", True, True), ("lexicon", False, True), ("lexicon", True, False), ("adjacent", True, True),
         ("adjacent", False, False), ("none", True, True), ("none", True, False)]


@pytest.mark.parametrize("attention", ["dense", "gather", "ragged"])
@pytest.mark.parametrize("local,global_node,include_self", FLAGS)
def test_attention_equals_per_character_loop(attention, local, global_node, include_self):
    torch.manual_seed(0)
    batch = random_lattice_batch(11, lengths=(9, 6, 1, 8), max_word=4, words_per_char=1.0)
    enc = BigEncoder(10, hidden_size=12, num_layers=1, num_heads=3, dropout=0.0, attention_dropout=0.0,
                     local=local, global_node=global_node, include_self=include_self, attention=attention).eval()
    x = torch.randn(*batch.mask.shape, 10)
    torch.testing.assert_close(enc(x, batch.mask, {"lattice": batch}), loop_encoder(enc, x, batch),
                               atol=1e-5, rtol=1e-5)


def test_ragged_equals_gather_with_gradients_and_empty_rows():
    """The ragged pairs give the gather form's outputs and gradients, also where some characters
    have no word (only self / the sentence node) and where a character has nothing at all."""
    torch.manual_seed(3)
    batch = random_lattice_batch(14, lengths=(30, 17, 1, 25), max_word=5, words_per_char=0.6)
    x = torch.randn(*batch.mask.shape, 8)
    for global_node, include_self in ((True, True), (False, False)):
        outs, grads = [], []
        for attention in ("gather", "ragged"):
            torch.manual_seed(5)
            enc = BigEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, attention_dropout=0.0,
                             global_node=global_node, include_self=include_self, attention=attention)
            xi = x.clone().requires_grad_(True)
            y = enc(xi, batch.mask, {"lattice": batch})
            (y * torch.linspace(-1, 1, y.shape[-1])).sum().backward()
            outs.append(y.detach())
            grads.append(xi.grad)
        torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(grads[1], grads[0], atol=1e-5, rtol=1e-5)


def test_auto_switches_to_ragged_on_long_inputs():
    torch.manual_seed(1)
    batch = random_lattice_batch(12, lengths=(40, 33, 20))
    x = torch.randn(*batch.mask.shape, 8)
    dense = BigEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, attention="dense").eval()
    auto = BigEncoder(8, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, dense_max_chars=16).eval()
    auto.load_state_dict(dense.state_dict())
    seen = []
    auto.layers[0].register_forward_pre_hook(lambda mod, args: seen.append(args[3]))
    torch.testing.assert_close(auto(x, batch.mask, {"lattice": batch}), dense(x, batch.mask, {"lattice": batch}),
                               atol=1e-5, rtol=1e-5)
    assert seen == ["ragged"]


def test_bipartite_structure_matches_brute_force():
    batch = random_lattice_batch(13, lengths=(12, 7, 1, 10), words_per_char=1.2)
    rows = lattice_rows(batch)
    words = BipartiteWords.from_lattice(batch)
    n = batch.max_chars
    enc = BigEncoder(4, hidden_size=4, num_heads=1)
    dense = enc.containment({"lattice": batch}, words, batch.char_mask)  # [B, n, W]
    index, valid = words.containing(n)  # [B, n, K]
    assert index.shape[2] == max(sum(s <= i <= e for s, e, _ in ws) for _, ws in rows for i in range(n))
    for b, (nb, ws) in enumerate(rows):
        slots = {t - nb: (s, e) for s, e, t in ws}  # word slot w sits at position n_b + w
        for i in range(n):
            want = {w for w, (s, e) in slots.items() if s <= i <= e and i < nb}
            assert {w for w in range(dense.shape[2]) if dense[b, i, w]} == want
            assert [int(w) for w, ok in zip(index[b, i], valid[b, i]) if ok] == sorted(want)


def test_word_states_are_sums_of_character_states():
    torch.manual_seed(2)
    batch = random_lattice_batch(14)
    words = BipartiteWords.from_lattice(batch)
    h = torch.randn(batch.mask.shape[0], batch.max_chars, 5)
    o = words.states(h)
    for b, (nb, ws) in enumerate(lattice_rows(batch)):
        for s, e, t in ws:
            torch.testing.assert_close(o[b, t - nb], h[b, s:e + 1].sum(0))
    assert not o[~words.mask].any()


def influence(enc, batch, x, j, row=0):
    """Characters of ``row`` whose output changes when character j's input changes."""
    y = x.clone()
    y[row, j] += 3.0
    a, b = enc(x, batch.mask, {"lattice": batch}), enc(y, batch.mask, {"lattice": batch})
    return {i for i in range(int(batch.n_chars[row])) if (a[row, i] - b[row, i]).abs().max() > 1e-6}


def test_flags_change_exactly_what_they_say():
    torch.manual_seed(3)
    batch = random_lattice_batch(15, lengths=(12, 6), words_per_char=0.5)
    n0, words = lattice_rows(batch)[0]
    x = torch.randn(*batch.mask.shape, 8)

    def enc(**flags):
        return BigEncoder(8, hidden_size=8, num_layers=1, num_heads=2, dropout=0.0, attention_dropout=0.0,
                          **flags).eval()

    for j in range(n0):
        # lexicon, no sentence node: a character hears only the words it is in (and itself)
        sharing = {i for s, e, _ in words if s <= j <= e for i in range(s, e + 1)} | {j}
        assert influence(enc(global_node=False), batch, x, j) == sharing
        # adjacent: i-1, i, i+1
        assert influence(enc(local="adjacent", global_node=False), batch, x, j) == {j - 1, j, j + 1} & set(range(n0))
        # the sentence node reaches everyone
        assert influence(enc(local="none"), batch, x, j) == set(range(n0))
    # local='none': the lattice is not read at all
    none = enc(local="none")
    torch.testing.assert_close(none(x, batch.mask, {"lattice": batch}), none(x[:, :batch.max_chars],
                                                                            batch.char_mask, {}))
    # include_self=False: a character in no word attends to the sentence node alone
    lonely = [i for i in range(n0) if not any(s <= i <= e for s, e, _ in words)]
    assert lonely, "the test sentence should have a character outside every word"
    no_self = enc(include_self=False)
    assert influence(no_self, batch, x, lonely[0]) == set(range(n0))  # through the sentence mean only
    with pytest.raises(Exception, match="nothing to attend to"):
        enc(local="none", global_node=False, include_self=False)


def test_overfits_twenty_sentences(tmp_path, tagger_overfit_data):
    encoder = {"type": "big", "hidden_size": 32, "num_layers": 1, "num_heads": 4, "dropout": 0.0,
               "attention_dropout": 0.0}
    spec = tagger_overfit_data.spec(char_tagger(encoder), lattice=True, epochs=25)
    ModelTestCase(spec, tmp_path / "run").check("f1", 0.99)
