"""CRF and softmax tagging heads: loss wiring, Viterbi against torchcrf and brute force,
allowed transitions against hand-written tables."""
import itertools
import shutil
import sysconfig

import pytest
import torch
from torchcrf import CRF

from multigrain.components.heads import crf as crf_module
from multigrain.components.heads.crf import CrfHead, viterbi_decode
from multigrain.components.heads.softmax_tagger import SoftmaxTaggerHead
from multigrain.components.tag_schemes import allowed_transitions
from multigrain.platform.kinds import Head

LABELS = {
    "BIO": ["O", "B-A", "I-A", "B-B", "I-B"],
    "BIOES": ["O", "B-A", "I-A", "E-A", "S-A"],
    "BMES": ["O", "B-A", "M-A", "E-A", "S-A"],
}


def random_mask(g, B, n):
    lengths = torch.randint(1, n + 1, (B,), generator=g)
    lengths[0] = n
    return torch.arange(n) < lengths[:, None], lengths


def all_paths(n, K):
    return torch.tensor(list(itertools.product(range(K), repeat=n)), dtype=torch.long).view(-1, n)


def path_scores(paths, em, trans, start, end):
    """Score of every path [P, L] for one sentence's emissions em [L, K] (float64)."""
    s = start[paths[:, 0]] + em[torch.arange(paths.shape[1]), paths].sum(1) + end[paths[:, -1]]
    return s + trans[paths[:, :-1], paths[:, 1:]].sum(1)


@pytest.fixture(params=["native", "torch"])
def decoder(request, monkeypatch):
    """Runs a test with each CPU decoder: the compiled kernel and the PyTorch ops (the GPU's)."""
    if request.param == "torch":
        monkeypatch.setattr(crf_module, "_native", None)
    elif crf_module._native is None:
        compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if shutil.which(compiler) is None:
            pytest.skip(f"no C compiler ({compiler}): the kernel is optional and was not built")
        pytest.fail("multigrain.components.heads._viterbi was not built although a C compiler exists: "
                    "reinstall with `pip install -e .` and read the build log")
    return request.param


def test_native_kernel_rejects_inconsistent_buffers():
    if crf_module._native is None:
        pytest.skip("kernel not built")
    import numpy as np
    em, lengths = np.zeros((4, 3, 2), np.float32), np.full(2, 4, np.int64)
    trans, start, end = np.zeros((3, 3), np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32)
    path = np.zeros((2, 4), np.int64)
    crf_module._native.decode(em, lengths, trans, start, end, path, 4, 3, 2, False)
    with pytest.raises(ValueError, match="emissions: expected 96 bytes, got 48"):
        crf_module._native.decode(em[:2].copy(), lengths, trans, start, end, path, 4, 3, 2, False)
    with pytest.raises(ValueError, match=r"lengths\[1\] = 5 is outside \[1, 4\]"):
        crf_module._native.decode(em, np.array([4, 5]), trans, start, end, path, 4, 3, 2, False)
    with pytest.raises(ValueError, match="emissions: expected 192 bytes"):  # float32 data said to be float64
        crf_module._native.decode(em, lengths, trans, start, end, path, 4, 3, 2, True)


def test_registered():
    assert Head.by_name("crf") is CrfHead and Head.by_name("softmax_tagger") is SoftmaxTaggerHead


def test_viterbi_equals_torchcrf_decode(decoder):
    g = torch.Generator().manual_seed(0)
    for i in range(250):
        B, n, K = (int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in ((1, 7), (1, 26), (1, 14)))
        dtype = torch.float64 if i % 3 == 0 else torch.float32
        crf = CRF(K, batch_first=True).to(dtype)
        with torch.no_grad():
            for p in crf.parameters():
                p.normal_(generator=g)
        mask, lengths = random_mask(g, B, n)
        emissions = torch.randn(B, n, K, generator=g, dtype=dtype) * 3
        if i % 5 == 0:  # garbage on padding must not matter
            emissions = emissions.masked_fill(~mask.unsqueeze(2), float("nan"))
        ours = viterbi_decode(emissions, mask, crf.transitions, crf.start_transitions, crf.end_transitions)
        expected = crf.decode(emissions, mask)
        assert ours.dtype == torch.long and ours.shape == (B, n)
        assert [row[:L].tolist() for row, L in zip(ours, lengths)] == expected
        assert not ours[~mask].any()


def test_viterbi_ties_break_like_torchcrf(decoder):
    """Integer scores make many exact ties: both pick the lowest previous tag."""
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        B, n, K = 3, 10, 5
        crf = CRF(K, batch_first=True)
        with torch.no_grad():
            for p in crf.parameters():
                p.copy_(torch.randint(-2, 3, p.shape, generator=g).float())
        emissions = torch.randint(-2, 3, (B, n, K), generator=g).float()
        mask, lengths = random_mask(g, B, n)
        ours = viterbi_decode(emissions, mask, crf.transitions, crf.start_transitions, crf.end_transitions)
        assert [row[:L].tolist() for row, L in zip(ours, lengths)] == crf.decode(emissions, mask)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "BMES"])
def test_constrained_decoding_never_breaks_the_scheme(scheme, decoder):
    prefixes = {"BIO": "BI", "BIOES": "BIES", "BMES": "BMES"}[scheme]
    labels = ["O"] + [f"{p}-{t}" for t in ("PER", "LOC", "ORG.NAM") for p in prefixes]
    K = len(labels)
    start_ok, end_ok, trans_ok = allowed_transitions(labels, scheme)
    g = torch.Generator().manual_seed(2)
    for _ in range(40):
        B, n = 16, int(torch.randint(1, 25, (1,), generator=g))
        mask, lengths = random_mask(g, B, n)
        emissions = torch.randn(B, n, K, generator=g) * 5
        trans, start, end = torch.randn(K, K, generator=g), torch.randn(K, generator=g), torch.randn(K, generator=g)
        paths = viterbi_decode(emissions, mask, trans, start, end, (start_ok, end_ok, trans_ok))
        for row, L in zip(paths.tolist(), lengths.tolist()):
            row = row[:L]
            assert start_ok[row[0]] and end_ok[row[-1]]
            assert all(trans_ok[a, b] for a, b in zip(row, row[1:]))


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "BMES"])
def test_constrained_decoding_equals_brute_force(scheme, decoder):
    labels = LABELS[scheme]
    K = len(labels)
    start_ok, end_ok, trans_ok = allowed_transitions(labels, scheme)
    g = torch.Generator().manual_seed(3)
    for _ in range(30):
        B, n = 6, int(torch.randint(1, 6, (1,), generator=g))
        mask, lengths = random_mask(g, B, n)
        emissions = torch.randn(B, n, K, generator=g, dtype=torch.float64)
        trans, start, end = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((K, K), (K,), (K,)))
        paths = viterbi_decode(emissions, mask, trans, start, end, (start_ok, end_ok, trans_ok))
        for b in range(B):
            L = int(lengths[b])
            cands = all_paths(L, K)
            valid = start_ok[cands[:, 0]] & end_ok[cands[:, -1]] & trans_ok[cands[:, :-1], cands[:, 1:]].all(1)
            cands = cands[valid]
            best = cands[path_scores(cands, emissions[b, :L], trans, start, end).argmax()]
            assert paths[b, :L].tolist() == best.tolist()


def test_no_valid_path_still_decodes(decoder):
    """A label set where nothing may start (only I- tags in BIO) still yields a path."""
    labels = ["I-A", "I-B"]
    allowed = allowed_transitions(labels, "BIO")
    assert not allowed[0].any()
    em = torch.randn(2, 4, 2)
    paths = viterbi_decode(em, torch.ones(2, 4, dtype=torch.bool), torch.zeros(2, 2), torch.zeros(2),
                           torch.zeros(2), allowed)
    assert paths.shape == (2, 4) and ((paths == 0) | (paths == 1)).all()
    # I-A -> I-A and I-B -> I-B are allowed: the best path keeps one tag throughout
    assert all(len(set(row)) == 1 for row in paths.tolist())


def test_allowed_transitions_tables():
    def table(rows):
        return torch.tensor([[c == "1" for c in r] for r in rows.split()])

    start, end, trans = allowed_transitions(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "BIO")
    assert start.tolist() == table("11010")[0].tolist()
    assert end.all()
    assert trans.tolist() == table("""11010
                                      11110
                                      11110
                                      11011
                                      11011""").tolist()
    labels = ["O", "B-A", "M-A", "E-A", "S-A", "B-B.X", "E-B.X"]
    start, end, trans = allowed_transitions(labels, "BMES")
    assert start.tolist() == table("1100110")[0].tolist()
    assert end.tolist() == table("1001101")[0].tolist()
    assert trans.tolist() == table("""1100110
                                      0011000
                                      0011000
                                      1100110
                                      1100110
                                      0000001
                                      1100110""").tolist()
    bioes = [lab.replace("M-", "I-") for lab in labels]
    assert [t.tolist() for t in allowed_transitions(bioes, "BIOES")] == [start.tolist(), end.tolist(),
                                                                        trans.tolist()]


def test_crf_head_loss_is_mean_nll_over_real_positions():
    """Brute-force log-likelihood on tiny inputs; padding (states, tags) must not matter."""
    g = torch.Generator().manual_seed(4)
    torch.manual_seed(4)
    labels = LABELS["BIOES"]
    K, d = len(labels), 6
    head = CrfHead(input_dim=d, labels=labels)
    with torch.no_grad():
        for p in head.crf.parameters():
            p.normal_(generator=g)
    B, n = 5, 4
    mask, lengths = random_mask(g, B, n)
    states = torch.randn(B, n, d, generator=g)
    tags = torch.randint(0, K, (B, n), generator=g)
    out = head(states, mask, tags=tags)
    logits = head.projection(states).double()
    trans, start, end = (p.double() for p in (head.crf.transitions, head.crf.start_transitions,
                                              head.crf.end_transitions))
    nll = []
    for b in range(B):
        L = int(lengths[b])
        scores = path_scores(all_paths(L, K), logits[b, :L], trans, start, end)
        gold = path_scores(tags[b, :L].view(1, L), logits[b, :L], trans, start, end)[0]
        nll.append(torch.logsumexp(scores, 0) - gold)
    assert out["loss"].item() == pytest.approx(torch.stack(nll).mean().item(), rel=1e-5)
    # garbage on padded positions changes nothing
    states2 = states.masked_fill(~mask.unsqueeze(2), 100.0)
    tags2 = tags.masked_fill(~mask, K - 1)
    out2 = head(states2, mask, tags=tags2)
    assert out2["loss"].item() == pytest.approx(out["loss"].item(), rel=1e-6)
    assert torch.equal(out2["predictions"], out["predictions"])
    assert out["logits"].shape == (B, n, K) and out["predictions"].shape == (B, n)
    assert not out["predictions"][~mask].any()
    out["loss"].backward()
    assert head.crf.transitions.grad is not None and head.projection.weight.grad is not None
    expected = viterbi_decode(out["logits"], mask, head.crf.transitions, head.crf.start_transitions,
                              head.crf.end_transitions, allowed_transitions(labels, "BIOES"))
    assert torch.equal(out["predictions"], expected)
    assert "loss" not in head(states, mask)


def test_softmax_tagger():
    g = torch.Generator().manual_seed(5)
    torch.manual_seed(5)
    labels = LABELS["BIO"]
    K, d, B, n = len(labels), 6, 4, 5
    head = SoftmaxTaggerHead(input_dim=d, labels=labels)
    mask, lengths = random_mask(g, B, n)
    states = torch.randn(B, n, d, generator=g)
    tags = torch.randint(0, K, (B, n), generator=g)
    out = head(states, mask, tags=tags)
    logp = head.projection(states).double().log_softmax(-1)
    terms = [-logp[b, i, tags[b, i]] for b in range(B) for i in range(int(lengths[b]))]
    assert out["loss"].item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-6)
    for b in range(B):
        for i in range(n):
            want = int(logp[b, i].argmax()) if i < lengths[b] else 0
            assert int(out["predictions"][b, i]) == want

    constrained = SoftmaxTaggerHead(input_dim=d, labels=labels, constrained=True)
    constrained.load_state_dict(head.state_dict())
    preds = constrained(states, mask)["predictions"]
    start_ok, end_ok, trans_ok = allowed_transitions(labels, "BIO")
    for b in range(B):
        L = int(lengths[b])
        cands = all_paths(L, K)
        cands = cands[start_ok[cands[:, 0]] & trans_ok[cands[:, :-1], cands[:, 1:]].all(1)]
        best = cands[logp[b, torch.arange(L), cands].sum(1).argmax()]
        assert preds[b, :L].tolist() == best.tolist()


def test_backtracking_paths_agree():
    """The CPU (numpy) backtracking and the device one (gather) read the same pointers alike."""
    from multigrain.components.heads.crf import _backtrack, _backtrack_gather, _backtrack_numpy

    g = torch.Generator().manual_seed(6)
    for n, K, B in ((1, 3, 2), (2, 1, 1), (37, 13, 8)):
        pointers = torch.randint(0, K, (n - 1, K, B), generator=g)
        last = torch.randint(0, K, (B,), generator=g)
        expected = [[0] * B for _ in range(n)]
        expected[n - 1] = last.tolist()
        for t in range(n - 1, 0, -1):
            expected[t - 1] = [int(pointers[t - 1, expected[t][b], b]) for b in range(B)]
        assert _backtrack_numpy(pointers.numpy(), last.numpy()).tolist() == expected
        assert _backtrack_gather(pointers, last).tolist() == expected
        assert _backtrack(pointers, last).tolist() == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_likelihood_is_torchcrf_bit_for_bit_without_host_reads(dtype):
    """Same floats as ``torchcrf.CRF.forward`` (variable lengths, one full row, one of length 1),
    gradients too; and no ``aten::_local_scalar_dense`` (a host read, a sync on a GPU) on the way."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from multigrain.components.heads.crf import log_likelihood

    g = torch.Generator().manual_seed(11)
    B, n, K = 6, 9, 7
    crf = CRF(K, batch_first=True).to(dtype)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(generator=g)
    lengths = torch.tensor([9, 1, 4, 7, 2, 9])
    mask = torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1)
    emissions = torch.randn(B, n, K, generator=g, dtype=dtype, requires_grad=True)
    tags = torch.randint(0, K, (B, n), generator=g)
    expected = crf(emissions, tags, mask=mask, reduction="none")
    grads = torch.autograd.grad(expected.sum(), [emissions, crf.transitions])

    reads = []

    class Reads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._local_scalar_dense.default:
                reads.append(func)
            return func(*args, **(kwargs or {}))

    with Reads():
        ours = log_likelihood(emissions, tags, mask, crf.transitions, crf.start_transitions, crf.end_transitions)
        ours_grads = torch.autograd.grad(ours.sum(), [emissions, crf.transitions])
    assert reads == []
    assert torch.equal(ours, expected)
    assert all(torch.equal(a, b) for a, b in zip(ours_grads, grads))
