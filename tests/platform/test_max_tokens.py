"""``data_loader.max_tokens``: token-budget batches, padding counted per field (a translator's
source + target), every example once an epoch, the order a function of (seed, epoch) only, the
same global batches for any number of data-parallel replicas, and a clear error for an example
that alone exceeds the budget."""
import random

import pytest
import torch

from multigrain.platform.batching import BatchIterator, bucket_batches
from multigrain.platform.data import Instance
from multigrain.platform.data_parallel import Replica
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.runs import Run
from multigrain.platform.training import load_checkpoint
from multigrain.testing import bilstm_tagger, copy_sentences, read_sentences, tiny_spec
from tests.conftest import DATA


def pairs(n: int, seed: int = 0) -> list[tuple[int, int]]:
    """(source, target) lengths, correlated as a translation's are."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        src = rng.randint(1, 60)
        out.append((src, max(1, int(src * rng.uniform(0.6, 1.6)))))
    return out


def cost(batch: list[int], lengths) -> int:
    """Brute force: n * (longest source + longest target)."""
    return len(batch) * sum(max(lengths[i][f] for i in batch) for f in range(len(lengths[0])))


def reference_bucket_batches(lengths, batch_size, shuffle, seed, epoch, noise=0.1, max_tokens=None):
    """The int-length algorithm as it was before per-field lengths (the oracle that shipped specs,
    whose lengths are ints, get exactly the batches they got before)."""
    n = len(lengths)
    lens = torch.tensor(list(lengths), dtype=torch.float64)
    g = None
    if shuffle:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        jitter = 1.0 + noise * (2 * torch.rand(n, generator=g, dtype=torch.float64) - 1)
        order = torch.argsort(lens * jitter, stable=True).tolist()
    else:
        order = torch.argsort(lens, stable=True).tolist()
    batches, current, longest = [], [], 0
    for i in order:
        longest_if = max(longest, lengths[i])
        if current and (len(current) >= batch_size or
                        (max_tokens is not None and longest_if * (len(current) + 1) > max_tokens)):
            batches.append(current)
            current, longest_if = [], lengths[i]
        current.append(i)
        longest = longest_if
    if current:
        batches.append(current)
    if shuffle:
        batches = [batches[p] for p in torch.randperm(len(batches), generator=g).tolist()]
    return batches


@pytest.mark.parametrize("seed,epoch", [(0, 0), (1, 3), (7, 12)])
def test_every_pair_once_and_every_batch_within_budget(seed, epoch):
    lengths = pairs(700, seed)
    batches = bucket_batches(lengths, 64, shuffle=True, seed=seed, epoch=epoch, max_tokens=900)
    flat = [i for b in batches for i in b]
    assert len(flat) == len(set(flat)) == len(lengths)  # none duplicated
    assert set(flat) == set(range(len(lengths)))  # none dropped
    assert all(cost(b, lengths) <= 900 and len(b) <= 64 for b in batches)
    real = sum(s + t for s, t in lengths)
    padded = sum(cost(b, lengths) for b in batches)
    assert padded < 1.35 * real  # bucketing by total length keeps both fields' padding small
    # greedy filling: a batch is cut only when the next example would break the budget or the size
    assert len(batches) <= 1.15 * padded / 900 + 2


def test_order_depends_only_on_seed_and_epoch():
    lengths = pairs(300, 5)
    a = bucket_batches(lengths, 32, True, seed=2, epoch=4, max_tokens=500)
    assert a == bucket_batches(list(lengths), 32, True, seed=2, epoch=4, max_tokens=500)
    assert a != bucket_batches(lengths, 32, True, seed=2, epoch=5, max_tokens=500)
    assert a != bucket_batches(lengths, 32, True, seed=3, epoch=4, max_tokens=500)


@pytest.mark.parametrize("shuffle,max_tokens", [(True, None), (True, 400), (False, 400), (False, None)])
def test_int_lengths_batch_as_before(shuffle, max_tokens):
    """One length per example (every shipped spec): the same batches as the algorithm before
    per-field lengths, and as the same lengths given as 1-tuples."""
    lengths = [s for s, _ in pairs(500, 9)]
    got = bucket_batches(lengths, 16, shuffle, 3, 2, max_tokens=max_tokens)
    assert got == reference_bucket_batches(lengths, 16, shuffle, 3, 2, max_tokens=max_tokens)
    assert got == bucket_batches([(n,) for n in lengths], 16, shuffle, 3, 2, max_tokens=max_tokens)


def test_replicas_slice_the_same_global_batches():
    """Batches are cut before replicas take their slices: 1, 2 or 3 replicas together cover each
    global batch exactly, in the same order."""
    lengths = pairs(200, 1)
    data = BatchIterator(list(range(200)), lambda chunk: list(chunk), lambda x: lengths[x], 16, True, seed=4,
                         max_tokens=600)
    whole = [b for _, b in data.epoch(1)]
    for world in (1, 2, 3):
        parts = [list(data.epoch_parts(1, Replica(r, world, torch.device("cpu"), wrap=None).part))
                 for r in range(world)]
        for k, batch in enumerate(whole):
            joined = [i for r in range(world) for i in (parts[r][k][0] if parts[r][k][1] > 0 else [])]
            assert joined == batch
            assert sum(parts[r][k][1] for r in range(world)) == pytest.approx(1.0)


def test_an_example_over_the_budget_names_both_numbers_and_where_it_is():
    instances = [Instance({"n": n}, source=("train.tsv", 3 * i + 1)) for i, n in enumerate([(5, 6), (40, 33), (7, 2)])]
    with pytest.raises(ConfigurationError, match=r"^data_loader\.max_tokens: 50 tokens per batch, and the training "
                                                 r"example at train\.tsv:4 alone has 73 \(40 \+ 33\); set "
                                                 r"max_tokens to at least 73"):
        BatchIterator(instances, list, lambda x: x["n"], 8, True, max_tokens=50)
    fits = BatchIterator(instances, list, lambda x: x["n"], 8, True, max_tokens=73)
    assert sorted(map(sorted, fits.batches(0))) == [[0, 2], [1]]  # 2 * (7 + 6) = 26; 3 * 73 > 73
    # a model that cuts its inputs reports the cut length: nothing left over the budget
    cut = BatchIterator(instances, list, lambda x: tuple(min(n, 20) for n in x["n"]), 8, True, max_tokens=40)
    assert sorted(i for b in cut.batches(0) for i in b) == [0, 1, 2]


def test_lengths_are_all_ints_or_all_tuples():
    with pytest.raises(ValueError, match="mix ints and tuples"):
        BatchIterator([1, 2], list, lambda x: x if x == 1 else (x, x), 4, False)


@pytest.fixture
def tagged(tmp_path):
    src = DATA / "resume_ner" / "dev.char.bmes"
    return copy_sentences(src, tmp_path / "train.bmes", 24), copy_sentences(src, tmp_path / "dev.bmes", 8)


def test_max_tokens_below_the_longest_sentence_is_refused_before_the_run_directory(tmp_path, tagged):
    train, dev = tagged
    sentences = read_sentences(train)
    longest = max(len(s.split("\n")) for s in sentences)
    k = max(range(len(sentences)), key=lambda i: len(sentences[i].split("\n")))
    line = 1 + sum(len(s.split("\n")) + 1 for s in sentences[:k])
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, dev, task="ner")
    spec["data_loader"]["max_tokens"] = longest - 1
    with pytest.raises(ConfigurationError, match=rf"data_loader\.max_tokens: {longest - 1} tokens per batch, and the "
                                                 rf"training example at {train}:{line} alone has {longest};"):
        Run(spec, tmp_path / "run").train()
    assert not (tmp_path / "run").exists()


def test_resume_with_max_tokens_is_bit_identical(tmp_path, tagged, single_thread):
    train, dev = tagged
    spec = tiny_spec(bilstm_tagger(dropout=0.3), {"type": "resume_ner"}, train, dev, epochs=2, batch_size=32,
                     task="ner", grad_clipping=5.0)
    spec["data_loader"]["max_tokens"] = 160
    full = Run(spec, tmp_path / "full").train()
    Run(spec, tmp_path / "split").train(stop_after_epoch=1)
    resumed = Run(spec, tmp_path / "split").train(resume=True)
    a = load_checkpoint(tmp_path / "full" / "last.pt", "cpu")
    b = load_checkpoint(tmp_path / "split" / "last.pt", "cpu")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["history"] == b["history"] and full["validation"] == resumed["validation"]


def test_a_model_with_per_field_lengths_is_budgeted_per_field_only_under_max_tokens():
    """``instance_lengths`` (source, target) counts both sides' padding when ``max_tokens`` is set;
    without it the batches stay those of ``instance_length`` (a shipped spec keeps its batches)."""
    from multigrain.platform.batching import DataLoaderConfig
    from multigrain.platform.experiment import batches_for

    lengths = pairs(400, 2)

    class Pairs:
        tensorize = staticmethod(list)

        @staticmethod
        def instance_length(i):
            return lengths[i][0]

        @staticmethod
        def instance_lengths(i):
            return lengths[i]

    budget = batches_for(Pairs(), list(range(400)), DataLoaderConfig(batch_size=64, max_tokens=700), 3, True)
    assert budget.lengths == lengths
    assert all(cost(b, lengths) <= 700 for b in budget.batches(0))
    plain = batches_for(Pairs(), list(range(400)), DataLoaderConfig(batch_size=64), 3, True)
    assert plain.lengths == [s for s, _ in lengths]
    assert plain.batches(0) == bucket_batches([s for s, _ in lengths], 64, True, 3, 0)
