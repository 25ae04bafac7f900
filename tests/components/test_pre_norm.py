"""``pre_norm: true`` (issue 40): each sub-layer reads ``LayerNorm(x)`` and adds its output to the
unnormalised residual stream, and the stack ends with a LayerNorm. Checked against hand-written
computations with the modules' own weights (softmax attention written out, not the module's
kernel), incremental decoding against full recomputation, the default left post-norm (no new
tensor in a state dict), and a tiny copy task that a pre-norm encoder-decoder learns."""
import math

import torch

from multigrain.components.encoders.big import BigEncoder
from multigrain.components.encoders.transformer import TransformerEncoder
from multigrain.components.heads.nmt_decoder import NmtDecoder
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.decoder_layer import PostNormDecoderLayer
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer
from multigrain.platform.optim import InverseSqrt
from tests.components.encoders.test_encoders_big import loop_attention
from tests.conftest import random_lattice_batch


def ln(norm, x):
    """LayerNorm written out with ``norm``'s weight, bias and eps."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def attention(att: MultiHeadAttention, query, key, allowed):
    """softmax(q k^T / sqrt(dh)) v per head, then ``out``: query [B, Tq, d], key [B, Tk, d],
    allowed [B, Tq, Tk] bool (every row has a key)."""
    B, Tq, _ = query.shape
    h, dh = att.num_heads, att.head_dim
    q = (query @ att.q.weight.T + att.q.bias).view(B, Tq, h, dh).transpose(1, 2)
    k = (key @ att.k.weight.T + att.k.bias).view(B, -1, h, dh).transpose(1, 2)
    v = (key @ att.v.weight.T + att.v.bias).view(B, -1, h, dh).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
    scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
    heads = scores.softmax(-1) @ v  # [B, h, Tq, dh]
    return heads.transpose(1, 2).reshape(B, Tq, h * dh) @ att.out.weight.T + att.out.bias


def ffn(layer_ffn, x):
    first, _, _, second = layer_ffn.net
    return torch.relu(x @ first.weight.T + first.bias) @ second.weight.T + second.bias


def test_a_pre_norm_encoder_layer_is_x_plus_sublayer_of_layernorm_x():
    torch.manual_seed(0)
    layer = PostNormTransformerLayer(MultiHeadAttention(12, 3), 20, dropout=0.0, pre_norm=True).eval()
    with torch.no_grad():  # LayerNorms away from their identity initialisation
        for norm in (layer.norm1.norm, layer.norm2.norm):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    x = torch.randn(3, 5, 12) * 3 + 1
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    allowed = mask.unsqueeze(1).expand(-1, 5, -1)
    h = x + attention(layer.attention, ln(layer.norm1.norm, x), ln(layer.norm1.norm, x), allowed)
    expected = h + ffn(layer.ffn, ln(layer.norm2.norm, h))
    torch.testing.assert_close(layer(x, key_mask=mask), expected, atol=1e-5, rtol=1e-5)
    # the post-norm layer with the same weights is a different function: LayerNorm(x + SA(x)) ...
    layer.pre_norm = False
    h = ln(layer.norm1.norm, x + attention(layer.attention, x, x, allowed))
    torch.testing.assert_close(layer(x, key_mask=mask), ln(layer.norm2.norm, h + ffn(layer.ffn, h)),
                               atol=1e-5, rtol=1e-5)


def test_the_pre_norm_transformer_encoder_ends_with_a_layernorm_and_masks_padding():
    torch.manual_seed(1)
    enc = TransformerEncoder(8, hidden_size=12, num_layers=2, num_heads=3, dropout=0.0, attention_dropout=0.0,
                             pre_norm=True).eval()
    with torch.no_grad():
        enc.final_norm.weight.normal_(1.0, 0.3)
        enc.final_norm.bias.normal_(0.0, 0.3)
    x = torch.randn(2, 6, 8)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2], dtype=torch.bool)
    h, _ = enc.char_input(x, mask)
    allowed = mask.unsqueeze(1).expand(-1, 6, -1)
    for layer in enc.layers:
        h = h + attention(layer.attention, ln(layer.norm1.norm, h), ln(layer.norm1.norm, h), allowed)
        h = h + ffn(layer.ffn, ln(layer.norm2.norm, h))
    expected = ln(enc.final_norm, h) * mask.unsqueeze(-1)
    torch.testing.assert_close(enc(x, mask), expected, atol=1e-5, rtol=1e-5)


def test_post_norm_stays_the_default_with_the_same_parameters():
    names = set(TransformerEncoder(8, 12, 2, 3).state_dict())
    assert names == set(TransformerEncoder(8, 12, 2, 3, pre_norm=True).state_dict()) - {"final_norm.weight",
                                                                                          "final_norm.bias"}
    assert not any("final_norm" in n for n in NmtDecoder(12, 20, num_layers=1, num_heads=3).state_dict())
    assert not any("final_norm" in n for n in BigEncoder(8, 12, 1, 3).state_dict())
    assert "final_norm.weight" in NmtDecoder(12, 20, num_layers=1, num_heads=3, pre_norm=True).state_dict()


def test_a_pre_norm_decoder_layer_is_the_hand_computation():
    torch.manual_seed(2)
    layer = PostNormDecoderLayer(12, 3, 20, dropout=0.0, pre_norm=True).eval()
    with torch.no_grad():
        for norm in (layer.norm1.norm, layer.norm2.norm, layer.norm3.norm):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    y, m = torch.randn(2, 4, 12) * 2, torch.randn(2, 5, 12)
    source = torch.tensor([[1] * 5, [1, 1, 0, 0, 0]], dtype=torch.bool)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    h = ln(layer.norm1.norm, y)
    y1 = y + attention(layer.self_attention, h, h, causal.expand(2, 4, 4))
    y2 = y1 + attention(layer.cross_attention, ln(layer.norm2.norm, y1), m, source.unsqueeze(1).expand(-1, 4, -1))
    expected = y2 + ffn(layer.ffn, ln(layer.norm3.norm, y2))
    got = layer(y, layer.memory(m), source.view(2, 1, 1, 5), causal.view(1, 1, 4, 4))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_pre_norm_decoder_steps_equal_full_recomputation_with_the_final_norm():
    torch.manual_seed(3)
    decoder = NmtDecoder(16, 24, num_layers=2, num_heads=2, feedforward_dim=32, dropout=0.0, pre_norm=True).eval()
    with torch.no_grad():
        decoder.final_norm.weight.normal_(1.0, 0.3)
    states = torch.randn(3, 6, 16)
    mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] * 5 + [0]], dtype=torch.bool)
    targets = torch.randint(4, 24, (3, 7))
    targets[:, 0] = 2
    with torch.no_grad():
        full = decoder(states, mask, targets)["logits"].log_softmax(-1)
        state, steps = decoder.start(states, mask), []
        for t in range(7):
            log_probs, state = decoder.step(state, targets[:, t], t)
            steps.append(log_probs)
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-5)
    # the logits are those of the final LayerNorm's output, E tied
    with torch.no_grad():
        decoder.final_norm.bias.add_(5.0)
        shifted = decoder(states, mask, targets)["logits"]
    assert not torch.allclose(shifted.log_softmax(-1), full, atol=1e-3)


def test_a_pre_norm_big_layer_attends_from_layernorm_of_its_input():
    torch.manual_seed(4)
    batch = random_lattice_batch(11, lengths=(9, 6, 1, 8), max_word=4, words_per_char=1.0)
    enc = BigEncoder(10, hidden_size=12, num_layers=1, num_heads=3, dropout=0.0, attention_dropout=0.0,
                     pre_norm=True).eval()
    with torch.no_grad():
        for norm in (enc.layers[0].norm1.norm, enc.final_norm):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    x = torch.randn(*batch.mask.shape, 10)
    layer, n = enc.layers[0], batch.max_chars
    mask = batch.char_mask.unsqueeze(-1)
    h = enc.char_input(x, batch.mask, {"lattice": batch})[0] * mask
    h = h + loop_attention(layer, ln(layer.norm1.norm, h) * mask, batch, "lexicon", True, True)
    h = (h + ffn(layer.ffn, ln(layer.norm2.norm, h))) * mask
    expected = ln(enc.final_norm, h) * mask
    torch.testing.assert_close(enc(x, batch.mask, {"lattice": batch}), expected, atol=1e-5, rtol=1e-5)
    assert expected.shape[1] == n


def test_a_tiny_pre_norm_encoder_decoder_learns_to_copy():
    """Sequences of 5 symbols out of 8, copied: after 300 Adam steps under inverse_sqrt (warm-up
    50) greedy decoding reproduces held-out sequences (chance per token: 1/8)."""
    torch.manual_seed(0)
    V, L, d = 12, 5, 32  # ids 0-3 special, 4-11 symbols
    enc = TransformerEncoder(d, d, num_layers=2, num_heads=4, dropout=0.0, attention_dropout=0.0, pre_norm=True)
    dec = NmtDecoder(d, V, num_layers=2, num_heads=4, feedforward_dim=64, dropout=0.0, label_smoothing=0.0,
                     pre_norm=True)
    table = torch.nn.Embedding(V, d)
    params = [*enc.parameters(), *dec.parameters(), *table.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-3, betas=(0.9, 0.98))
    schedule = InverseSqrt(optimizer, num_training_steps=0, warmup_steps=50)
    mask = torch.ones(64, L, dtype=torch.bool)

    def encode(src):
        return enc(table(src), mask[: len(src)])

    g = torch.Generator().manual_seed(1)
    for _ in range(300):
        src = torch.randint(4, V, (64, L), generator=g)
        tin = torch.cat([torch.full((64, 1), 2), src], 1)
        tout = torch.cat([src, torch.full((64, 1), 3)], 1)
        loss = dec(encode(src), mask, tin, tout)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    enc.eval(), dec.eval()
    test = torch.randint(4, V, (64, L), generator=g)
    with torch.no_grad():
        best = dec.decode(encode(test), mask, torch.full((64,), L), beam_size=1).best
    accuracy = (best[:, :L] == test).float().mean().item()
    assert accuracy > 0.9, accuracy
