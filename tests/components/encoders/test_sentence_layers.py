"""MWA, HRMF, span decoding and the two backbones against literal, loop-based oracles."""
import math
from types import SimpleNamespace

import pytest
import torch

from multigrain.components.encoders.hrmf import HrmfEncoder
from multigrain.components.encoders.mwa import MwaEncoder, segment_argmax, segment_sum, word_aligned_attend, word_bounds
from multigrain.components.heads.span import best_spans
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.vocab import Vocabulary


def random_segmentation(lengths, n_max, gen, s_rows=1):
    """seg_ids [B, S, n_max]: random partitions of each row's characters, -1 past the end."""
    B = len(lengths)
    seg = torch.full((B, s_rows, n_max), -1, dtype=torch.long)
    for b, n in enumerate(lengths):
        for s in range(s_rows):
            starts = (torch.rand(n, generator=gen) < 0.45).long()
            starts[0] = 0
            seg[b, s, :n] = starts.cumsum(0)
    return seg


def mask_of(lengths, n_max):
    return torch.arange(n_max)[None, :] < torch.tensor(lengths)[:, None]


def words_of(row):
    """{segment: [positions]} of one seg row (real positions only)."""
    words = {}
    for i, s in enumerate(row.tolist()):
        if s >= 0:
            words.setdefault(s, []).append(i)
    return list(words.values())


# ------------------------------------------------------------------------------------------- MWA
def pool_loop(A, seg, lam, pool_over):
    out = A.clone()
    for b in range(A.shape[0]):
        for h in range(A.shape[1]):
            for idx in words_of(seg[b]):
                if pool_over == "query":
                    rows = A[b, h, idx, :]
                    pooled = lam * rows.max(0).values + (1 - lam) * rows.mean(0)
                    for i in idx:
                        out[b, h, i, :] = pooled
                else:
                    cols = A[b, h, :, idx]
                    pooled = lam * cols.max(1).values + (1 - lam) * cols.mean(1)
                    for j in idx:
                        out[b, h, :, j] = pooled
    return out


def test_word_bounds_and_segment_scans_equal_loops():
    gen = torch.Generator().manual_seed(3)
    lengths, n = [11, 4, 1, 16], 16
    seg = random_segmentation(lengths, n, gen)[:, 0]
    seg[3] = torch.tensor([0] * 9 + [1] * 7)  # a 9-character word: four doubling steps
    start, end = word_bounds(seg)
    x = torch.randn(4, 2, n, n, generator=gen).round(decimals=1)  # ties: the first maximum wins
    running_sum = segment_sum(x, start)
    rows, cols = segment_argmax(x, start, 2), segment_argmax(x, start, 3)
    for b, nb in enumerate(lengths):
        for idx in words_of(seg[b]):
            for k, i in enumerate(idx):
                assert (start[b, i], end[b, i]) == (idx[0], idx[-1])
                assert torch.allclose(running_sum[b, :, i], x[b, :, idx[: k + 1]].sum(1), atol=1e-6)
                assert torch.equal(rows[b, :, i], torch.tensor(idx)[x[b, :, idx[: k + 1]].argmax(1)])
                assert torch.equal(cols[b, :, :, i], torch.tensor(idx)[x[b, :, :, idx[: k + 1]].argmax(2)])
        for i in range(nb, n):  # padding: a word of its own
            assert (start[b, i], end[b, i]) == (i, i)


@pytest.mark.parametrize("pool_over", ["query", "key"])
def test_word_aligned_attention_equals_per_word_loop(pool_over):
    gen = torch.Generator().manual_seed(0)
    lengths, n = [7, 3, 9], 9
    A = torch.rand(3, 2, n, n, generator=gen)
    A = A.masked_fill(~mask_of(lengths, n)[:, None, None, :], 0.0)  # padding keys, as after the softmax
    V = torch.randn(3, 2, n, 4, generator=gen)
    seg = random_segmentation(lengths, n, gen)[:, 0]
    A.requires_grad_(True)
    V.requires_grad_(True)
    lam = torch.tensor(0.3, requires_grad=True)
    fast = word_aligned_attend(A, V, seg, lam, pool_over)
    slow = pool_loop(A, seg, lam, pool_over)
    weights = torch.randn(fast.shape, generator=gen)
    for b, nb in enumerate(lengths):
        assert torch.allclose(fast[b, :, :nb], slow[b, :, :nb] @ V[b], atol=1e-5)
    # the same gradients as the explicit formulation (real rows and columns: padding ties aside)
    real = [(b, nb) for b, nb in enumerate(lengths)]
    grads = [torch.autograd.grad(sum((out(b) * weights[b, :, :nb]).sum() for b, nb in real), (A, V, lam))
             for out in (lambda b: fast[b, :, :lengths[b]], lambda b: (slow[b] @ V[b])[:, :lengths[b]])]
    for b, nb in real:
        assert torch.allclose(grads[0][0][b, :, :nb, :nb], grads[1][0][b, :, :nb, :nb], atol=1e-5)
        assert torch.allclose(grads[0][1][b, :, :nb], grads[1][1][b, :, :nb], atol=1e-5)
    assert torch.allclose(grads[0][2], grads[1][2], atol=1e-5)
    # at least one multi-character word changed something
    assert not torch.allclose(slow[0, :, :7, :7], A[0, :, :7, :7])
    assert fast.shape == V.shape


@pytest.mark.parametrize("pool_over,add_input", [("query", False), ("key", True)])
def test_mwa_layer_equals_the_papers_equations(pool_over, add_input):
    gen = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    d, heads, lengths, n = 8, 2, [6, 4], 6
    layer = MwaEncoder(d, num_heads=heads, pool_over=pool_over, add_input=add_input, dropout=0.0).eval()
    with torch.no_grad():
        layer.lam.fill_(0.7)
    x = torch.randn(2, n, d, generator=gen)
    seg = random_segmentation(lengths, n, gen, s_rows=3)
    out = layer(x, mask_of(lengths, n), {"lattice": SimpleNamespace(seg_ids=seg)})
    dk = d // heads
    for b, nb in enumerate(lengths):
        H = x[b, :nb]
        expected = H.clone() if add_input else torch.zeros(nb, d)
        Q, K, V = layer.attention.q(H), layer.attention.k(H), layer.attention.v(H)
        for s in range(3):
            per_head = []
            for h in range(heads):
                cols = slice(h * dk, (h + 1) * dk)
                A = torch.softmax(Q[:, cols] @ K[:, cols].T / math.sqrt(dk), dim=-1)
                A_aligned = pool_loop(A[None, None], seg[b, s][None, :nb], 0.7, pool_over)[0, 0]
                per_head.append(A_aligned @ V[:, cols])                              # eq. 6
            H_bar = layer.attention.out(torch.cat(per_head, dim=-1))                  # eq. 7
            expected = expected + torch.tanh(H_bar @ layer.gate.weight.T)             # eq. 8
        assert torch.allclose(out[b, :nb], expected, atol=1e-5)


def test_mwa_without_segmentations_is_a_clear_error():
    layer = MwaEncoder(8, num_heads=2)
    with pytest.raises(ConfigurationError, match="seg_ids"):
        layer(torch.randn(1, 3, 8), torch.ones(1, 3, dtype=torch.bool), {})


def test_only_key_pooling_lets_the_word_alignment_reach_the_cls_row():
    """Why the cls/pair specs pool keys: [CLS] is a word of its own, so query pooling never changes
    its row, the only one a [CLS]-pooled classifier reads."""
    from pathlib import Path

    from multigrain.platform.specs import load_spec

    torch.manual_seed(0)
    x, mask = torch.randn(2, 9, 16), torch.ones(2, 9, dtype=torch.bool)
    one = SimpleNamespace(seg_ids=torch.tensor([[0, 1, 1, 2, 3, 3, 3, 4, 5]] * 2)[:, None])
    other = SimpleNamespace(seg_ids=torch.tensor([[0, 1, 2, 2, 2, 3, 4, 4, 5]] * 2)[:, None])
    for pool_over, cls_changes in (("query", False), ("key", True)):
        layer = MwaEncoder(16, num_heads=2, pool_over=pool_over).eval()
        a, b = layer(x, mask, {"lattice": one}), layer(x, mask, {"lattice": other})
        assert not torch.allclose(a[:, 1:], b[:, 1:])
        assert torch.allclose(a[:, 0], b[:, 0]) != cls_changes, pool_over
    root = Path(__file__).resolve().parents[3] / "jsonnet_configs"
    for spec, want in (("cls/chnsenticorp_mwa", "key"), ("cls/chnsenticorp_m3e_mwa", "key"), ("pair/bq_mwa", "key"),
                       ("mrc/cmrc2018_mwa", "query")):
        assert load_spec(root / f"{spec}.jsonnet")["model"]["encoder"]["pool_over"] == want, spec


# ------------------------------------------------------------------------------------------ HRMF
def hrmf_layer(normalization, d=8, heads=2, words=12):
    vocab = Vocabulary({"seg_words": ["@@PAD@@", "@@UNK@@"] + [f"w{i}" for i in range(words)]})
    torch.manual_seed(3)
    layer = HrmfEncoder(d, vocab, word_dim=6, num_heads=heads, normalization=normalization, dropout=0.0).eval()
    with torch.no_grad():
        layer.lam.fill_(0.8)
        layer.mu.fill_(0.35)
    return layer


def hrmf_inputs(gen, lengths, n, vocab_size):
    x = torch.randn(len(lengths), n, 8, generator=gen)
    seg = random_segmentation(lengths, n, gen)
    if seg[0, 0, 1] == 0:  # make the first character of row 0 a word of its own (as [CLS])
        seg[0, 0, 1:lengths[0]] += 1
    W = int(seg.max()) + 1
    word_ids = torch.randint(2, vocab_size, (len(lengths), 1, W), generator=gen)
    word_ids[0, 0, 0] = 0  # ... with no word vector
    return x, seg, word_ids


def literal_mix(layer, x_b, seg_b, word_ids_b, normalization):
    """Eqs. 2-8 transcribed for one sentence: returns (mixed states, Ω)."""
    W1, b1, W2, b2 = layer.w1.weight.T, layer.w1.bias, layer.w2.weight.T, layer.w2.bias
    lam = float(layer.lam.detach())
    hw = x_b.clone()
    mixed = torch.empty_like(x_b)
    omega = torch.zeros(len(x_b), dtype=torch.bool)
    for t, chars in enumerate(words_of(seg_b)):
        h = x_b[chars]
        x_t = layer.words.weight[word_ids_b[t]]                                     # eq. 1
        v_t = torch.tanh(x_t @ W1 + b1) @ W2 + b2                                    # eq. 2
        score = torch.stack([torch.dot(h_k, v_t) / (h_k.norm() * v_t.norm()) for h_k in h])  # eq. 3
        if normalization == "sum":
            weight = score / score.sum()                                             # eq. 4
        else:
            weight = torch.exp(score) / torch.exp(score).sum()
        if word_ids_b[t] != 0:
            for k, c in enumerate(chars):
                hw[c] = x_b[c] + weight[k] * v_t
        p = int(torch.argmax(score))                                                 # eq. 5
        i, j = chars[0], chars[-1]
        if j == i:
            mixed[i] = hw[i]
            omega[i] = True
            continue
        f = math.exp(lam - 1)                                                        # eq. 7
        g = (1 - f) / (j - i)                                                        # eq. 8
        key = chars[p]
        for c in chars:                                                              # eq. 6
            if c == key:
                mixed[c] = f * hw[c] + g * sum(hw[m] for m in chars if m != key)
            else:
                mixed[c] = g * hw[key] + (1 - g) * hw[c]
        omega[key] = True
    return mixed, omega


@pytest.mark.parametrize("normalization", ["softmax", "sum"])
def test_hrmf_injection_and_mixing_equal_equations_2_to_8(normalization):
    gen = torch.Generator().manual_seed(5)
    layer = hrmf_layer(normalization)
    lengths, n = [9, 5, 7], 9
    x, seg, word_ids = hrmf_inputs(gen, lengths, n, 14)
    s = seg[:, 0]
    v = layer.word_vectors(word_ids[:, 0])
    hw, score = layer.inject(x, s, v, word_ids[:, 0] != 0)
    mixed, omega = layer.mix(hw, s, score)
    for b, nb in enumerate(lengths):
        want_mixed, want_omega = literal_mix(layer, x[b, :nb], s[b, :nb], word_ids[b, 0], normalization)
        assert torch.allclose(mixed[b, :nb], want_mixed, atol=1e-5), b
        assert torch.equal(omega[b, :nb], want_omega)
        assert not omega[b, nb:].any()
    # the word vectors moved the states and mixing did something on multi-character words
    assert not torch.allclose(hw, x) and not torch.allclose(mixed, hw)


def test_hrmf_forward_equals_equations_10_to_13():
    gen = torch.Generator().manual_seed(6)
    layer = hrmf_layer("softmax")
    lengths, n = [8, 6], 8
    x, seg, word_ids = hrmf_inputs(gen, lengths, n, 14)
    out = layer(x, mask_of(lengths, n), {"lattice": SimpleNamespace(seg_ids=seg), "seg_words": word_ids})
    heads, dh = 2, 4
    for b, nb in enumerate(lengths):
        mixed, omega = literal_mix(layer, x[b, :nb], seg[b, 0, :nb], word_ids[b, 0], "softmax")

        def attention(module, allowed):
            Q, K, V = module.q(mixed), module.k(mixed), module.v(mixed)
            outs = []
            for h in range(heads):
                c = slice(h * dh, (h + 1) * dh)
                scores = Q[:, c] @ K[:, c].T / math.sqrt(dh)
                scores = scores + torch.where(allowed, 0.0, float("-inf"))[None, :]   # eq. 12
                outs.append(torch.softmax(scores, -1) @ V[:, c])
            return torch.cat(outs, -1)

        h1 = attention(layer.unmasked, torch.ones(nb, dtype=torch.bool))            # eq. 10
        h2 = attention(layer.masked, omega)                                          # eq. 11
        expected = 0.35 * h1 + 0.65 * h2                                             # eq. 13
        assert torch.allclose(out[b, :nb], expected, atol=1e-5)


# ---------------------------------------------------------------------------------- span decoding
def brute_force_best(start, end, allowed, L):
    best = (float("-inf"), 0, 0)
    n = len(start)
    for s in range(n):
        for e in range(s, min(n, s + L)):
            if all(allowed[s:e + 1]):
                score = start[s] + end[e]
                if score > best[0]:
                    best = (score, s, e)
    return best


def test_best_spans_equal_brute_force():
    gen = torch.Generator().manual_seed(7)
    for trial in range(30):
        W, n, L = 4, int(torch.randint(1, 14, (1,), generator=gen)), int(torch.randint(1, 6, (1,), generator=gen))
        start, end = torch.randn(W, n, generator=gen), torch.randn(W, n, generator=gen)
        allowed = torch.rand(W, n, generator=gen) < 0.7
        allowed[0] = False  # a row with no valid span at all
        starts, ends, scores = best_spans(start, end, allowed, L)
        for w in range(W):
            score, s, e = brute_force_best(start[w].tolist(), end[w].tolist(), allowed[w].tolist(), L)
            if score == float("-inf"):
                assert scores[w] == float("-inf") and starts[w] == 0 and ends[w] == 0
            else:
                assert (int(starts[w]), int(ends[w])) == (s, e), (trial, w)
                assert math.isclose(float(scores[w]), score, rel_tol=1e-6)


# -------------------------------------------------------------------------------------- backbones
def test_char_transformer_loads_weights_by_name_and_token(tmp_path):
    from multigrain.components.encoders.char_transformer import CharTransformer

    torch.manual_seed(0)
    first = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "[CLS]", "[SEP]", "好", "坏", "书"]})
    source = CharTransformer(first, hidden_size=16, num_layers=2, num_heads=2, max_length=32).eval()
    run = tmp_path / "run"
    (run / "vocabulary").mkdir(parents=True)
    first.save(run / "vocabulary")
    torch.save({f"embedder.{k}": v for k, v in source.state_dict().items()} | {"head.output.weight": torch.zeros(2)},
               run / "best.pt")
    second = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "书", "新", "[CLS]", "[SEP]", "好"]})
    target = CharTransformer(second, hidden_size=16, num_layers=2, num_heads=2, max_length=32,
                             archive_path=str(run)).eval()
    ids_first = torch.tensor([[2, 4, 6, 3]])   # [CLS] 好 书 [SEP] in the first vocabulary
    ids_second = torch.tensor([[4, 6, 2, 5]])  # the same tokens in the second
    mask = torch.ones(1, 4, dtype=torch.bool)
    assert torch.allclose(source(ids_first, mask), target(ids_second, mask), atol=1e-6)
    assert not torch.allclose(target.tokens.weight[3], source.tokens.weight[3])  # "新" kept its own row


def test_hf_transformer_from_a_local_directory(tmp_path, monkeypatch):
    from transformers import BertConfig, BertModel

    from multigrain.components.embedders.hf_transformer import HfTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "好", "书", "a"]
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    reference = BertModel(config).eval()
    reference.save_pretrained(tmp_path)
    embedder = HfTransformer(str(tmp_path)).eval()
    assert embedder.get_output_dim() == 32 and embedder.max_length == 64
    assert embedder.index(["[CLS]", "好", "A", "坏", "[SEP]"]) == [2, 5, 7, 1, 3]
    ids = torch.tensor([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]])
    mask = ids != 0
    segments = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]])
    got = embedder(ids, mask, segments)
    want = reference(input_ids=ids, attention_mask=mask.long(), token_type_ids=segments).last_hidden_state
    assert torch.allclose(got[mask], want[mask], atol=1e-5)
    with pytest.raises(ConfigurationError, match="not a directory"):
        HfTransformer(str(tmp_path / "missing"))


def save_tiny_bert(directory, tokens):
    """A random 2-layer BertModel in ``directory`` whose vocabulary is only in tokenizer.json (as m3e-small)."""
    import json

    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).eval().save_pretrained(directory)
    wordpiece = {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {t: i for i, t in enumerate(tokens)}}
    (directory / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": wordpiece}), encoding="utf-8")


def test_hf_transformer_vocabulary_from_tokenizer_json_and_a_package_path(tmp_path, monkeypatch):
    import importlib

    from multigrain.components.embedders.hf_transformer import HfTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokens = ["[PAD]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "好", "书", "a"]
    package = tmp_path / "site" / "fake_models_pkg"
    (package / "tiny").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    save_tiny_bert(package / "tiny", tokens)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()

    by_dir = HfTransformer(str(package / "tiny")).eval()
    by_package = HfTransformer("package:fake_models_pkg/tiny").eval()
    assert by_dir.index(["[CLS]", "好", "A", "坏", "[SEP]"]) == [3, 6, 8, 2, 4]  # ids are tokenizer.json's
    ids = torch.tensor([[3, 6, 7, 4]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    assert torch.equal(by_dir(ids, mask), by_package(ids, mask))


def test_hf_transformer_bad_model_paths_are_configuration_errors(tmp_path):
    from multigrain.components.embedders.hf_transformer import HfTransformer

    with pytest.raises(ConfigurationError, match=r"package:embedding_absent_pkg/m3e-small: the Python package "
                                                 r"'embedding_absent_pkg' is not installed"):
        HfTransformer("package:embedding_absent_pkg/m3e-small")
    with pytest.raises(ConfigurationError, match=r"package:pytest/no-such-model is not a directory"):
        HfTransformer("package:pytest/no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="has neither vocab.txt nor tokenizer.json"):
        HfTransformer(str(tmp_path / "empty"))
    (tmp_path / "empty" / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"tokenizer\.json is not valid JSON"):
        HfTransformer(str(tmp_path / "empty"))
    (tmp_path / "empty" / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="has no WordPiece vocabulary \\(model type 'BPE'\\)"):
        HfTransformer(str(tmp_path / "empty"))
    (tmp_path / "empty" / "tokenizer.json").write_text('{"model": {"type": "WordPiece", "vocab": {"a": 0}}}',
                                                        encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"tokenizer\.json lacks \[PAD\], \[UNK\], \[CLS\], \[SEP\]"):
        HfTransformer(str(tmp_path / "empty"))
