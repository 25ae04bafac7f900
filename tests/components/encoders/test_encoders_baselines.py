"""Transformer and Star-Transformer baselines against per-sentence loops over their equations,
the BiGRU-CRF head and the lattice embedder against hand assembly, and overfitting."""
import math

import pytest
import torch

from multigrain.components.embedders.lattice import LatticeEmbedder
from multigrain.components.nn.positions import PositionEmbedding, sinusoidal_positions
from multigrain.components.encoders.star_transformer import StarTransformerEncoder
from multigrain.components.encoders.transformer import TransformerEncoder
from multigrain.components.heads.bigru_crf import BiGruCrfHead
from multigrain.components.lattice.types import Lattice, LatticeBatch
from multigrain.components.tag_schemes import ill_formed_positions
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.vocab import Vocabulary
from multigrain.testing import ModelTestCase, char_tagger
from tests.conftest import random_lattice_batch

pytestmark = pytest.mark.usefixtures("single_thread")


def attend(att, query, keys):
    """Multi-head attention of query rows [q, d] over keys [k, d], head by head."""
    q = att.q(query).view(len(query), att.num_heads, att.head_dim)
    k = att.k(keys).view(len(keys), att.num_heads, att.head_dim)
    v = att.v(keys).view(len(keys), att.num_heads, att.head_dim)
    heads = [torch.softmax(q[:, h] @ k[:, h].T / math.sqrt(att.head_dim), -1) @ v[:, h] for h in range(att.num_heads)]
    return att.out(torch.cat(heads, -1))


def test_sinusoidal_positions_formula():
    pos = torch.arange(7)
    table = sinusoidal_positions(pos, 6)
    for j in range(7):
        for i in range(3):
            assert table[j, 2 * i].item() == pytest.approx(math.sin(j / 10000 ** (2 * i / 6)), abs=1e-6)
            assert table[j, 2 * i + 1].item() == pytest.approx(math.cos(j / 10000 ** (2 * i / 6)), abs=1e-6)
    with pytest.raises(ValueError, match="max_length"):
        PositionEmbedding(4, "learned", max_length=5)(torch.arange(6).unsqueeze(0))


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_transformer_equals_per_sentence_loop(positions):
    torch.manual_seed(0)
    enc = TransformerEncoder(6, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0, attention_dropout=0.0,
                             positions=positions).eval()
    lengths = [7, 3, 5]
    x = torch.randn(3, 7, 6)
    mask = torch.arange(7) < torch.tensor(lengths).unsqueeze(1)
    out = enc(x, mask)
    for b, n in enumerate(lengths):
        h = enc.char_input.projection(x[b, :n]) + enc.char_input.positions(torch.arange(n).unsqueeze(0))[0]
        for layer in enc.layers:
            h = layer.norm1.norm(h + attend(layer.attention, h, h))
            h = layer.norm2.norm(h + layer.ffn(h))
        torch.testing.assert_close(out[b, :n], h, atol=1e-5, rtol=1e-5)
        assert not out[b, n:].any()


def test_transformer_reads_only_characters_of_a_lattice():
    torch.manual_seed(1)
    batch = random_lattice_batch(30)
    enc = TransformerEncoder(4, hidden_size=8, num_heads=2, dropout=0.0).eval()
    x = torch.randn(*batch.mask.shape, 4)
    torch.testing.assert_close(enc(x, batch.mask, {"lattice": batch}), enc(x[:, :batch.max_chars], batch.char_mask))


def test_star_transformer_equals_per_position_loop():
    torch.manual_seed(2)
    enc = StarTransformerEncoder(6, hidden_size=8, num_layers=2, num_heads=2, dropout=0.0,
                                 attention_dropout=0.0).eval()
    lengths = [6, 1, 4]
    x = torch.randn(3, 6, 6)
    mask = torch.arange(6) < torch.tensor(lengths).unsqueeze(1)
    out = enc(x, mask)
    for b, n in enumerate(lengths):
        e = enc.char_input.projection(x[b, :n]) + sinusoidal_positions(torch.arange(n), 8)
        h, s = e, e.mean(0)
        for t, (sat, sat_norm) in enumerate(zip(enc.satellite, enc.satellite_norm)):
            new = []
            for i in range(n):  # C_i = [h_{i-1}; h_i; h_{i+1}; e_i; s]
                context = [h[j] for j in (i - 1, i, i + 1) if 0 <= j < n] + [e[i], s]
                new.append(sat_norm(torch.relu(attend(sat, h[i:i + 1], torch.stack(context))[0])))
            h = torch.stack(new)
            if t < len(enc.relay):  # s = LayerNorm(ReLU(MultiAtt(s, [s; H])))
                keys = torch.cat([s.unsqueeze(0), h])
                s = enc.relay_norm[t](torch.relu(attend(enc.relay[t], s.unsqueeze(0), keys)[0]))
        torch.testing.assert_close(out[b, :n], h, atol=1e-5, rtol=1e-5)
        assert not out[b, n:].any()


LABELS = ["O", "B-PER", "M-PER", "E-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC"]


def test_bigru_crf_head_reads_char_input_and_states():
    torch.manual_seed(3)
    head = BiGruCrfHead(5, LABELS, embedder_dim=3, hidden_size=4, dropout=0.0).eval()
    lengths = [6, 2, 4]
    states, inputs = torch.randn(3, 6, 5), torch.randn(3, 6, 3)
    mask = torch.arange(6) < torch.tensor(lengths).unsqueeze(1)
    tags = torch.randint(0, len(LABELS), (3, 6)) * mask
    out = head(states, mask, tags=tags, inputs=inputs)
    for b, n in enumerate(lengths):
        gru_out, _ = head.gru(torch.cat([inputs[b:b + 1, :n], states[b:b + 1, :n]], -1))
        torch.testing.assert_close(out["logits"][b, :n], head.crf.projection(gru_out[0]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["loss"], -head.crf.crf(out["logits"], tags, mask=mask, reduction="mean"))
    for b, n in enumerate(lengths):  # constrained decoding: always a well-formed BMES sequence
        assert ill_formed_positions([LABELS[t] for t in out["predictions"][b, :n].tolist()], "BMES") == []
    with pytest.raises(ConfigurationError, match="embedder_dim"):
        BiGruCrfHead(5, LABELS)
    alone = BiGruCrfHead(5, LABELS, use_char_input=False, hidden_size=4)
    assert alone(states, mask)["logits"].shape == (3, 6, len(LABELS))


def test_bigru_packing_ignores_padding():
    torch.manual_seed(4)
    head = BiGruCrfHead(5, LABELS, embedder_dim=3, hidden_size=4, dropout=0.0).eval()
    states, inputs = torch.randn(2, 6, 5), torch.randn(2, 6, 3)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    a = head(states, mask, inputs=inputs)["logits"]
    states[1, 3:], inputs[1, 3:] = 100.0, -100.0
    b = head(states, mask, inputs=inputs)["logits"]
    torch.testing.assert_close(a[1, :3], b[1, :3])  # packed: padding never enters the backward GRU


def test_lattice_embedder_layout_and_pretrained_words(tmp_path):
    torch.manual_seed(5)
    vocab = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "a", "b", "c"], "bigrams": ["@@PAD@@", "@@UNK@@", "ab"],
                        "words": ["@@PAD@@", "@@UNK@@", "ab", "abc"]})
    vec = tmp_path / "words.vec"
    vec.write_text("2 3\nabc 1 2 3\nzz 0 0 0\n", encoding="utf-8")
    emb = LatticeEmbedder(vocab, output_dim=4, char_dim=3, bigram_dim=2, word_dim=3, dropout=0.0,
                          word_pretrained_file=str(vec))
    assert emb.words.weight[3].tolist() == [1.0, 2.0, 3.0]

    lattices = [Lattice.from_words(list("abc"), [(0, 1), (0, 2)]), Lattice.from_words(list("ab"), [])]
    batch = LatticeBatch.collate(lattices, lambda t, is_char: vocab.index("chars" if is_char else "words", t))
    chars = torch.tensor([[2, 3, 4], [2, 3, 0]])
    bigrams = torch.tensor([[2, 1, 1], [2, 1, 0]])
    out = emb(chars, bigrams, lattice=batch)
    assert out.shape == (2, 5, 4)
    for b, n in enumerate([3, 2]):
        for i in range(n):
            want = emb.char_projection(torch.cat([emb.chars.weight[chars[b, i]], emb.bigrams.weight[bigrams[b, i]]]))
            torch.testing.assert_close(out[b, i], want)
    torch.testing.assert_close(out[0, 3], emb.word_projection(emb.words.weight[2]))  # "ab"
    torch.testing.assert_close(out[0, 4], emb.word_projection(emb.words.weight[3]))  # "abc"
    assert not out[1, 2:].any()  # padding
    assert emb(chars, bigrams).shape == (2, 3, 4)  # no lattice: characters only


def test_transformer_overfits_twenty_sentences(tmp_path, tagger_overfit_data):
    encoder = {"type": "transformer", "hidden_size": 32, "num_layers": 1, "num_heads": 4, "dropout": 0.0,
               "attention_dropout": 0.0}
    spec = tagger_overfit_data.spec(char_tagger(encoder), lattice=False, epochs=25)
    ModelTestCase(spec, tmp_path / "run").check("f1", 0.99)


def test_star_transformer_overfits_twenty_sentences(tmp_path, tagger_overfit_data):
    encoder = {"type": "star_transformer", "hidden_size": 32, "num_layers": 1, "num_heads": 4, "dropout": 0.0,
               "attention_dropout": 0.0}
    spec = tagger_overfit_data.spec(char_tagger(encoder), lattice=False, epochs=30)
    ModelTestCase(spec, tmp_path / "run").check("f1", 0.99)
