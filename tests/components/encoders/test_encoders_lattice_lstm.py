"""Lattice LSTM: batched mode == the batch-size-1 reference mode (outputs and gradients), the
reference against the paper's equations written out by hand, the character cell against
torch's LSTM, and overfitting 20 sentences."""
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from multigrain.components.encoders.lattice_lstm import LatticeLstmEncoder
from multigrain.components.lattice.types import Lattice, LatticeBatch
from multigrain.testing import ModelTestCase, lattice_embedder
from tests.conftest import random_lattice_batch

pytestmark = pytest.mark.usefixtures("single_thread")


def pair(coupled: bool, bidirectional: bool = True, d: int = 6, h: int = 5):
    batched = LatticeLstmEncoder(d, h, bidirectional=bidirectional, coupled_forget_gate=coupled)
    reference = LatticeLstmEncoder(d, h, bidirectional=bidirectional, coupled_forget_gate=coupled, mode="reference")
    reference.load_state_dict(batched.state_dict())
    return batched, reference


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_equals_reference(coupled, seed):
    torch.manual_seed(seed)
    batch = random_lattice_batch(20 + seed, lengths=(11, 6, 1, 9, 4), max_word=5, words_per_char=1.5)
    batched, reference = pair(coupled)
    x = torch.randn(*batch.mask.shape, 6, requires_grad=True)
    a = batched(x, batch.mask, {"lattice": batch})
    b = reference(x, batch.mask, {"lattice": batch})
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    w = torch.randn_like(a)
    ga = torch.autograd.grad((a * w).sum(), [x, *batched.parameters()])
    gb = torch.autograd.grad((b * w).sum(), [x, *reference.parameters()])
    for g1, g2 in zip(ga, gb):
        torch.testing.assert_close(g1, g2, atol=1e-5, rtol=1e-4)


def test_words_change_the_states_where_they_end():
    """Forward direction: a word (b, e) changes the cells from e on, never before e."""
    torch.manual_seed(3)
    chars = list("abcdefg")
    plain = LatticeBatch.collate([Lattice.from_words(chars, [])], lambda t, c: 2)
    worded = LatticeBatch.collate([Lattice.from_words(chars, [(2, 4)])], lambda t, c: 2)
    enc = LatticeLstmEncoder(4, 3, bidirectional=False)
    x = torch.randn(1, 8, 4)
    a = enc(x[:, :7], plain.mask, {"lattice": plain})
    b = enc(x, worded.mask, {"lattice": worded})
    torch.testing.assert_close(a[0, :4], b[0, :4])
    assert (a[0, 4:] - b[0, 4:]).abs().min() > 0


def test_reference_follows_the_paper_equations():
    """Characters c0 c1 c2, words (0, 1), (0, 2), (1, 2): c_2 merges two word cells (eqs. 11-17)."""
    torch.manual_seed(4)
    d, H = 4, 3
    enc = LatticeLstmEncoder(d, H, bidirectional=False, mode="reference")
    cell = enc.directions[0]
    x = torch.randn(3, d)
    xw = {w: torch.randn(d) for w in [(0, 1), (0, 2), (1, 2)]}
    sig, tanh = torch.sigmoid, torch.tanh

    def gates(t, h_prev):
        i, o, f, g = (cell.char.weight @ torch.cat([x[t], h_prev]) + cell.char.bias).chunk(4)
        return sig(i), sig(o), sig(f), tanh(g)

    def word_cell(w, h_b, c_b):
        i, f, g = (cell.word.weight @ torch.cat([xw[w], h_b]) + cell.word.bias).chunk(3)
        return sig(f) * c_b + sig(i) * tanh(g)

    def link(t, cw):
        return sig(cell.link.weight @ torch.cat([x[t], cw]) + cell.link.bias)

    # t = 0: no word ends here; an ordinary LSTM step from zeros
    i, o, f, g = gates(0, torch.zeros(H))
    c0 = i * g
    h0 = o * tanh(c0)
    # t = 1: word (0, 1) ends here
    cw01 = word_cell((0, 1), h0, c0)
    i, o, f, g = gates(1, h0)
    l01 = link(1, cw01)
    c1 = (torch.exp(i) * g + torch.exp(l01) * cw01) / (torch.exp(i) + torch.exp(l01))
    h1 = o * tanh(c1)
    # t = 2: words (0, 2) and (1, 2) end here
    cw02, cw12 = word_cell((0, 2), h0, c0), word_cell((1, 2), h1, c1)
    i, o, f, g = gates(2, h1)
    l02, l12 = link(2, cw02), link(2, cw12)
    c2 = (torch.exp(i) * g + torch.exp(l02) * cw02 + torch.exp(l12) * cw12) / (
        torch.exp(i) + torch.exp(l02) + torch.exp(l12))
    h2 = o * tanh(c2)
    got = cell.reference(x, [(s, e, v) for (s, e), v in xw.items()])
    torch.testing.assert_close(got, torch.stack([h0, h1, h2]))


def test_without_words_it_is_a_bidirectional_lstm():
    torch.manual_seed(5)
    d, H = 5, 4
    lattices = [Lattice.from_words(list("abcdef"), []), Lattice.from_words(list("abc"), [])]
    batch = LatticeBatch.collate(lattices, lambda t, c: 2)
    enc = LatticeLstmEncoder(d, H)
    lstm = torch.nn.LSTM(d, H, batch_first=True, bidirectional=True)
    with torch.no_grad():  # ours: rows i, o, f, g over [x; h]; torch: i, f, g, o
        for k, suffix in enumerate(["", "_reverse"]):
            W, b = enc.directions[k].char.weight, enc.directions[k].char.bias
            order = torch.cat([torch.arange(0, H), torch.arange(2 * H, 3 * H), torch.arange(3 * H, 4 * H),
                               torch.arange(H, 2 * H)])
            getattr(lstm, "weight_ih_l0" + suffix).copy_(W[order, :d])
            getattr(lstm, "weight_hh_l0" + suffix).copy_(W[order, d:])
            getattr(lstm, "bias_ih_l0" + suffix).copy_(b[order])
            getattr(lstm, "bias_hh_l0" + suffix).zero_()
    x = torch.randn(2, 6, d)
    packed = pack_padded_sequence(x, torch.tensor([6, 3]), batch_first=True)
    want, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=6)
    torch.testing.assert_close(enc(x, batch.mask, {"lattice": batch}), want, atol=1e-6, rtol=1e-5)


def test_overfits_twenty_sentences(tmp_path, tagger_overfit_data):
    model = {"type": "tagger", "embedder": lattice_embedder(32),
             "encoder": {"type": "lattice_lstm", "hidden_size": 32}, "head": {"type": "crf"}}
    ModelTestCase(tagger_overfit_data.spec(model, lattice=True, epochs=30), tmp_path / "run").check("f1", 0.99)
