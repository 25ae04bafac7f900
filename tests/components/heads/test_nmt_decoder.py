"""The NMT decoder head and its batched beam search: cached steps equal full recomputation,
beam 1 is greedy decoding, an exhaustive beam finds the brute-force best sequence under the
length penalty, smaller beams equal a one-sentence-at-a-time reference beam search, and the
label-smoothed loss equals its formula."""
import itertools
import math

import pytest
import torch

from multigrain.components.heads.nmt_decoder import NmtDecoder
from multigrain.components.nn.beam_search import beam_search, length_penalty
from multigrain.components.nn.key_value_cache import KeyValueCache
from multigrain.platform.batching import pad_ids

PAD, UNK, BOS, EOS = 0, 1, 2, 3


def tiny_decoder(vocab_size: int = 24, seed: int = 0) -> NmtDecoder:
    """A random decoder whose layers outweigh the residual path (linear weights of std
    2/sqrt(fan-in))."""
    torch.manual_seed(seed)
    decoder = NmtDecoder(16, vocab_size, num_layers=2, num_heads=2, feedforward_dim=32, dropout=0.0).eval()
    with torch.no_grad():
        for module in decoder.modules():
            if isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, std=2.0 / module.in_features ** 0.5)
    return decoder


@pytest.fixture(scope="module")
def half_trained() -> NmtDecoder:
    """The tiny decoder after 40 Adam steps towards targets of 3, 1, 5 and 2 tokens for the four
    ``sources()``: unsure enough that greedy, beam and length penalty choose differently (EOS
    early, late, or at the length limit), which a random decoder (repeating one token) is not."""
    decoder = tiny_decoder().train()
    states, mask = sources()
    g = torch.Generator().manual_seed(0)
    targets = [torch.randint(4, 24, (n,), generator=g).tolist() for n in [3, 1, 5, 2]]
    target_input = pad_ids([[BOS] + t for t in targets])
    target_output = pad_ids([t + [EOS] for t in targets])
    optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
    for _ in range(40):
        loss = decoder(states, mask, target_input, target_output)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return decoder.eval()


def sources(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder states [4, 7, 16] of 7, 5, 2 and 6 real positions (padding holds noise: it must not matter)."""
    torch.manual_seed(seed)
    mask = torch.zeros(4, 7, dtype=torch.bool)
    for b, n in enumerate([7, 5, 2, 6]):
        mask[b, :n] = True
    return torch.randn(4, 7, 16), mask


def full_log_probs(decoder: NmtDecoder, states, mask, prefixes: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of the next token after each prefix [N, t] (BOS first), by recomputing
    the whole decoder over the prefix: [N, V]."""
    return decoder(states, mask, prefixes)["logits"][:, -1].log_softmax(-1)


# ------------------------------------------------------------------------------- incremental decoding
def test_cached_steps_equal_full_recomputation_also_after_reordering():
    decoder = tiny_decoder()
    states, mask = sources()
    torch.manual_seed(5)
    targets = torch.randint(4, 24, (4, 8))
    targets[:, 0] = BOS
    with torch.no_grad():
        full = decoder(states, mask, targets)["logits"].log_softmax(-1)
        state = decoder.start(states, mask)
        steps = []
        for t in range(8):
            log_probs, state = decoder.step(state, targets[:, t], t)
            steps.append(log_probs)
        assert torch.allclose(torch.stack(steps, 1), full, atol=1e-5)

        # rows reordered after 4 steps (as beam search does): the cache follows its rows
        order = torch.tensor([2, 2, 0, 3])
        state = decoder.start(states, mask)
        for t in range(4):
            _, state = decoder.step(state, targets[:, t], t)
        state = NmtDecoder.reorder(state, order)
        state.memory = [(k[order], v[order]) for k, v in state.memory]  # here rows move across sources
        state.memory_mask = state.memory_mask[order]
        moved = torch.cat([targets[order, :4], targets[:, 4:]], 1)
        expected = decoder(states[order], mask[order], moved)["logits"].log_softmax(-1)
        for t in range(4, 8):
            log_probs, state = decoder.step(state, moved[:, t], t)
            assert torch.allclose(log_probs, expected[:, t], atol=1e-5)


@pytest.mark.parametrize("same_first_token", [True, False])
def test_beam_grouped_steps_with_reused_buffers_equal_full_recomputation(same_first_token):
    """Rows grouped by source (beam_size 3) share the memory; the first step is computed once per
    source when the beams' tokens are equal (and per row when not); with ``reuse_buffers`` the
    log-probabilities come from a buffer; after reordering, the cache follows its rows."""
    decoder = tiny_decoder()
    states, mask = sources()
    K = 3
    torch.manual_seed(6)
    prefixes = torch.randint(4, 24, (4 * K, 6))
    prefixes[:, 0] = BOS if same_first_token else torch.randint(4, 24, (4 * K,))
    order = torch.tensor([0, 0, 2, 5, 4, 3, 7, 6, 6, 11, 9, 9])  # rows move among their source's beams
    with torch.no_grad():
        state = decoder.start(states, mask, K, reuse_buffers=True)
        for t in range(3):
            log_probs, state = decoder.step(state, prefixes[:, t], t)
        state = NmtDecoder.reorder(state, order)
        moved = torch.cat([prefixes[order, :3], prefixes[:, 3:]], 1)
        repeated = states.repeat_interleave(K, 0), mask.repeat_interleave(K, 0)
        expected = decoder(*repeated, moved)["logits"].log_softmax(-1)
        for t in range(3, 6):
            log_probs, state = decoder.step(state, moved[:, t], t)
            assert torch.allclose(log_probs, expected[:, t], atol=1e-5)


def test_the_key_value_cache_equals_concatenation_and_row_selection():
    torch.manual_seed(7)
    cache, keys, values = KeyValueCache(), torch.zeros(2, 2, 0, 3), torch.zeros(2, 2, 0, 3)
    for action in ["append", "append", "reorder", "append", "repeat", "reorder", "append", "append", "reorder"]:
        if action == "append":
            k, v = torch.randn(keys.shape[0], 2, 1, 3), torch.randn(keys.shape[0], 2, 1, 3)
            keys, values = torch.cat([keys, k], 2), torch.cat([values, v], 2)
            got = cache.append(k, v)
            assert torch.equal(got[0], keys) and torch.equal(got[1], values)
        elif action == "reorder":
            index = torch.randint(0, keys.shape[0], (keys.shape[0],))
            keys, values = keys[index], values[index]
            cache.reorder(index)
        else:
            keys, values = keys.repeat_interleave(2, 0), values.repeat_interleave(2, 0)
            cache.repeat_rows(2)
    assert cache.length == 5 and torch.equal(cache.keys[:, :, :5], keys) and torch.equal(cache.values[:, :, :5], values)


def test_label_smoothed_loss_is_the_formula_over_real_targets():
    decoder = tiny_decoder()
    decoder.label_smoothing = 0.1
    states, mask = sources()
    targets = torch.tensor([[BOS, 5, 6, 7], [BOS, 8, 9, PAD], [BOS, 10, PAD, PAD], [BOS, 11, 12, 13]])
    gold = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD], [10, EOS, PAD, PAD], [11, 12, 13, EOS]])
    out = decoder(states, mask, targets, gold)
    log_probs = out["logits"].log_softmax(-1)
    terms = []
    for b in range(4):
        for t in range(4):
            if gold[b, t] != PAD:
                nll = -log_probs[b, t, gold[b, t]]
                uniform = -log_probs[b, t].mean()
                terms.append(0.9 * nll + 0.1 * uniform)
    assert out["loss"].item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-5)


def test_projecting_only_the_real_targets_gives_the_same_loss_and_gradients():
    """``target_positions`` (the translator's collate gives them) project the N non-padding rows
    alone: the loss and every gradient equal the full [B, T, V] projection's (float rounding)."""
    targets = torch.tensor([[BOS, 5, 6, 7], [BOS, 8, 9, PAD], [BOS, 10, PAD, PAD], [BOS, 11, 12, 13]])
    gold = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD], [10, EOS, PAD, PAD], [11, 12, 13, EOS]])
    positions = (gold != PAD).flatten().nonzero().squeeze(1)
    assert positions.tolist() == [0, 1, 2, 3, 4, 5, 6, 8, 9, 12, 13, 14, 15]
    results = []
    for kept in (None, positions):
        decoder = tiny_decoder()
        decoder.label_smoothing = 0.1
        states, mask = sources()
        states.requires_grad_(True)
        out = decoder(states, mask, targets, gold, kept)
        out["loss"].backward()
        assert int(out["loss_count"]) == 13 and ("logits" in out) == (kept is None)
        results.append((out["loss"].detach(), states.grad, [p.grad for p in decoder.parameters()]))
    (full, full_states, full_grads), (packed, packed_states, packed_grads) = results
    torch.testing.assert_close(packed, full, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(packed_states, full_states, rtol=1e-5, atol=1e-7)
    for a, b in zip(packed_grads, full_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_packed_targets_compute_the_same_loss_and_gradients_as_the_padded_layout(pre_norm):
    """``pack_targets``: the layers run on the N real target rows ([N, d]), the attention on the
    [B, T] layout; the loss and every gradient (weights and encoder states) equal the padded
    computation's, and what the padding positions of ``target_input`` hold is never read."""
    targets = torch.tensor([[BOS, 5, 6, 7], [BOS, 8, 9, PAD], [BOS, 10, PAD, PAD], [BOS, 11, 12, 13]])
    gold = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD], [10, EOS, PAD, PAD], [11, 12, 13, EOS]])
    positions = (gold != PAD).flatten().nonzero().squeeze(1)
    noisy = targets.masked_fill(targets == PAD, 17)  # padding that holds a real token id
    results = []
    for pack, target_input in ((False, targets), (True, targets), (True, noisy)):
        torch.manual_seed(0)
        decoder = NmtDecoder(16, 24, num_layers=2, num_heads=2, feedforward_dim=32, dropout=0.0, pre_norm=pre_norm,
                             pack_targets=pack).eval()
        states, mask = sources()
        states.requires_grad_(True)
        out = decoder(states, mask, target_input, gold, positions)
        out["loss"].backward()
        assert int(out["loss_count"]) == 13
        results.append((out["loss"].detach(), states.grad, [p.grad for p in decoder.parameters()]))
    padded = results[0]
    for packed in results[1:]:
        torch.testing.assert_close(packed[0], padded[0], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(packed[1], padded[1], rtol=1e-5, atol=1e-7)
        for a, b in zip(packed[2], padded[2]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    torch.manual_seed(0)
    decoder = NmtDecoder(16, 24, num_layers=2, num_heads=2, feedforward_dim=32, pack_targets=True)
    assert "logits" in decoder.eval()(*sources(), targets, gold)  # no positions given: the padded layout


# ------------------------------------------------------------------------------------ beam search
def greedy(decoder: NmtDecoder, states, mask, max_lengths: list[int]) -> list[list[int]]:
    """Argmax decoding, one sentence at a time, recomputing the decoder over each prefix."""
    out = []
    for b, limit in enumerate(max_lengths):
        prefix = [BOS]
        while True:
            log_probs = full_log_probs(decoder, states[b:b + 1], mask[b:b + 1], torch.tensor([prefix]))[0]
            log_probs[[PAD, BOS]] = -math.inf
            if len(prefix) - 1 == limit:
                break
            token = int(log_probs.argmax())
            if token == EOS:
                break
            prefix.append(token)
        out.append(prefix[1:])
    return out


def as_lists(tokens: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    return [row[:n] for row, n in zip(tokens.tolist(), lengths.tolist())]


def test_beam_1_is_greedy_decoding(half_trained):
    decoder = half_trained
    states, mask = sources()
    limits = [5, 3, 7, 4]
    with torch.no_grad():
        expected = greedy(decoder, states, mask, limits)
        found = decoder.decode(states, mask, torch.tensor(limits), beam_size=1, length_penalty=0.0)
    assert as_lists(found.best, found.lengths[:, 0]) == expected
    lengths = [len(x) for x in expected]
    assert any(n < limit for n, limit in zip(lengths, limits)) and any(n == limit for n, limit in zip(lengths, limits))


class TableScorer:
    """A hand-made "model": the next-token log-probabilities are a fixed random row chosen by the
    sentence and the whole prefix, over tokens {pad, unk, bos, eos, 4, 5} (unk, 4 and 5 are the
    real ones). State: each row's prefix [N, t]."""

    def __init__(self, sentences: int, seed: int = 3):
        g = torch.Generator().manual_seed(seed)
        self.table = (torch.randn(997, 6, generator=g) * 2).log_softmax(-1)
        self.sentences = sentences

    def prefix_row(self, prefix: torch.Tensor, sentence: torch.Tensor) -> torch.Tensor:
        code = sentence * 131
        for t in range(prefix.shape[1]):
            code = code * 7 + prefix[:, t] + 1
        return code % self.table.shape[0]

    def start(self, beam: int):
        sentence = torch.arange(self.sentences).repeat_interleave(beam)
        return sentence, torch.zeros(len(sentence), 0, dtype=torch.long)

    def step(self, state, tokens, t):
        sentence, prefix = state
        if t:  # tokens: the last generated token of each row (BOS at t = 0, not part of the prefix)
            prefix = torch.cat([prefix, tokens.unsqueeze(1)], 1)
        return self.table[self.prefix_row(prefix, sentence)], (sentence, prefix)

    @staticmethod
    def reorder(state, index):
        return state[0][index], state[1][index]

    def score(self, sentence: int, sequence: tuple) -> float:
        total, prefix = 0.0, []
        for token in sequence + (EOS,):
            row = self.prefix_row(torch.tensor([prefix], dtype=torch.long).view(1, len(prefix)),
                                  torch.tensor([sentence]))
            total += float(self.table[row[0], token])
            prefix.append(token)
        return total


def brute_force(scorer: TableScorer, sentence: int, limit: int, alpha: float) -> list[tuple[float, tuple]]:
    """Every sequence of at most ``limit`` real tokens, by length-penalised score, best first."""
    scored = []
    for n in range(limit + 1):
        for sequence in itertools.product([UNK, 4, 5], repeat=n):
            penalty = float(length_penalty(torch.tensor(n + 1), alpha))
            scored.append((scorer.score(sentence, sequence) / penalty, sequence))
    return sorted(scored, reverse=True)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0, -0.5])
def test_an_exhaustive_beam_returns_the_brute_force_best(alpha):
    scorer = TableScorer(sentences=3)
    limits = [3, 1, 2]
    K = 36  # at least the number of finite extensions at every step (4 * 3^2): nothing is pruned
    found = beam_search(scorer.step, scorer.reorder, scorer.start(K), 3, K, torch.tensor(limits), BOS, EOS, PAD,
                        alpha)
    for b, limit in enumerate(limits):
        best = brute_force(scorer, b, limit, alpha)
        kept = [(s, tuple(h)) for s, h in zip(found.scores[b].tolist(), as_lists(found.tokens[b], found.lengths[b]))
                if s > -math.inf]
        assert kept[0][1] == best[0][1]
        assert kept[0][0] == pytest.approx(best[0][0], abs=1e-5)
        # every finished hypothesis kept is among the best, in order
        n = min(len(kept), len(best))
        assert [h for _, h in kept[:n]] == [h for _, h in best[:n]]


def reference_beam_search(step_one, max_length: int, K: int, alpha: float) -> list[tuple[float, tuple]]:
    """The rules of ``beam_search`` for one sentence, with Python lists: ``step_one(prefix) ->
    log-probabilities [V]`` of the token after the generated ``prefix``. Returns the finished
    hypotheses kept, best first."""
    live, finished = [(0.0, ())], []
    for t in range(max_length + 1):
        extensions = []
        for score, prefix in live:
            log_probs = step_one(prefix)
            for token in range(len(log_probs)):
                if token in (PAD, BOS) or (t >= max_length and token != EOS):
                    continue
                extensions.append((score + float(log_probs[token]), prefix + (token,)))
        extensions.sort(key=lambda e: -e[0])
        extensions = extensions[:2 * K]
        for rank, (score, sequence) in enumerate(extensions):
            if sequence[-1] == EOS and rank < K:
                finished.append((score / float(length_penalty(torch.tensor(t + 1), alpha)), sequence[:-1]))
        finished = sorted(finished, key=lambda f: -f[0])[:K]
        live = [e for e in extensions if e[1][-1] != EOS][:K]
        if not live:
            break
        reachable = float(length_penalty(torch.tensor(max_length + 1), alpha))
        if len(finished) == K and finished[-1][0] >= live[0][0] / reachable:
            break
    return finished


@pytest.mark.parametrize("K,alpha", [(2, 0.0), (3, 0.6), (5, 1.0)])
def test_the_batched_beam_search_equals_a_sentence_by_sentence_reference(K, alpha, half_trained):
    decoder = half_trained
    states, mask = sources()
    limits = [5, 3, 7, 4]
    with torch.no_grad():
        found = decoder.decode(states, mask, torch.tensor(limits), beam_size=K, length_penalty=alpha)
        longer = 0  # non-empty hypotheses: those for which the cache reordering matters
        for b, limit in enumerate(limits):
            def step_one(prefix, b=b):
                return full_log_probs(decoder, states[b:b + 1], mask[b:b + 1], torch.tensor([(BOS,) + prefix]))[0]

            expected = reference_beam_search(step_one, limit, K, alpha)
            kept = [(score, tuple(sequence)) for score, sequence in
                    zip(found.scores[b].tolist(), as_lists(found.tokens[b], found.lengths[b])) if score > -math.inf]
            assert [sequence for _, sequence in kept] == [sequence for _, sequence in expected]
            assert [score for score, _ in kept] == pytest.approx([score for score, _ in expected], abs=1e-4)
            assert len(kept) == K  # the whole n-best list is compared, not only the best
            longer += sum(len(sequence) > 0 for _, sequence in kept)
    assert longer >= 2 * K


def test_decoding_sentences_together_equals_decoding_each_alone(half_trained):
    decoder = half_trained
    states, mask = sources()
    limits = torch.tensor([5, 3, 7, 4])
    with torch.no_grad():
        together = decoder.decode(states, mask, limits, beam_size=3)
        for b in range(4):
            alone = decoder.decode(states[b:b + 1, :int(mask[b].sum())], mask[b:b + 1, :int(mask[b].sum())],
                                   limits[b:b + 1], beam_size=3)
            n = int(alone.lengths[0, 0])
            assert together.lengths[b, 0] == n
            assert together.best[b, :n].tolist() == alone.best[0, :n].tolist()
            assert together.scores[b, 0].item() == pytest.approx(alone.scores[0, 0].item(), abs=1e-4)
