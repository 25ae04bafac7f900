"""benchmarks/ner_vote.py: the vote keeps exactly the entities enough runs predict (brute force); a
majority never keeps two overlapping entities, and its score is seqeval's strict F1 of the kept entities;
on trained runs each run's F1 is the one ``evaluate`` gives, and runs that agree vote to their own score;
fewer votes than a majority, a missing data file or an unwritable --json are one error, exit code 2,
nothing written."""
import json
import random
import sys

import pytest
from seqeval.metrics import f1_score
from seqeval.scheme import IOBES

from conftest import ROOT, resume_tagger_spec

sys.path.insert(0, str(ROOT / "benchmarks"))

import ner_vote  # noqa: E402
from multigrain.components.tag_schemes import spans_to_tags  # noqa: E402

TYPES = ["ORG", "TITLE", "NAME"]


def random_entities(rng: random.Random, n: int) -> set:
    """Non-overlapping entities (type, start, end) over n characters, as one tagger predicts them."""
    entities, i = set(), 0
    while i < n:
        length = rng.randint(1, 4)
        if rng.random() < 0.4 and i + length <= n:
            entities.add((rng.choice(TYPES), i, i + length - 1))
            i += length
        else:
            i += 1
    return entities


def test_the_vote_keeps_what_enough_runs_predict_and_a_majority_never_overlaps():
    rng = random.Random(7)
    lengths = [rng.randint(1, 30) for _ in range(200)]
    for n_runs in (2, 3, 5):
        runs = [[random_entities(rng, n) for n in lengths] for _ in range(n_runs)]
        for k in range(n_runs // 2 + 1, n_runs + 1):
            voted = ner_vote.vote(runs, k)
            for i, kept in enumerate(voted):
                every = set().union(*(r[i] for r in runs))
                assert kept == {e for e in every if sum(e in r[i] for r in runs) >= k}
                spans_to_tags(lengths[i], sorted(kept, key=lambda e: e[1]), "BMES")  # raises on an overlap


@pytest.mark.parametrize("n_runs, k", [(3, 1), (4, 2), (3, 4), (2, 0)])
def test_fewer_votes_than_a_majority_or_more_than_the_runs_is_refused(n_runs, k):
    with pytest.raises(ner_vote.ConfigurationError, match=f"--min-votes {k}: expected more than half of the "
                                                          f"{n_runs} runs"):
        ner_vote.vote([[set()]] * n_runs, k)


def test_the_vote_is_scored_as_seqeval_scores_its_tags():
    rng = random.Random(3)
    lengths = [rng.randint(1, 25) for _ in range(150)]
    gold = [random_entities(rng, n) for n in lengths]

    def run_of(entities, n):  # a tagger's guess: most gold entities, now and then others, none overlapping
        guess = {e for e in entities if rng.random() < 0.8} | (random_entities(rng, n) if rng.random() < 0.3 else set())
        return {e for e in guess if not any(o != e and o[1] <= e[2] and e[1] <= o[2] for o in guess)}

    runs = [[run_of(g, n) for g, n in zip(gold, lengths)] for _ in range(3)]
    voted = ner_vote.vote(runs, 2)

    def tags(spans, n):
        return spans_to_tags(n, sorted(spans, key=lambda e: e[1]), "BMES")

    ours = ner_vote.span_f1([tags(v, n) for v, n in zip(voted, lengths)], [tags(g, n) for g, n in zip(gold, lengths)],
                            "BMES")["f1"]

    def as_iobes(spans, n):
        return [t.replace("M-", "I-") for t in tags(spans, n)]

    expected = f1_score([as_iobes(g, n) for g, n in zip(gold, lengths)],
                        [as_iobes(v, n) for v, n in zip(voted, lengths)], mode="strict", scheme=IOBES)
    assert 0.5 < ours < 1.0 and ours == pytest.approx(expected, abs=1e-12)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Three 1-epoch BiLSTM-CRF runs (seeds 1-3) on 12 Resume sentences, and their 4-sentence test file."""
    from multigrain.platform.runs import Run

    folder = tmp_path_factory.mktemp("vote")
    spec = resume_tagger_spec(folder / "data")
    runs = []
    for seed in (1, 2, 3):
        Run(dict(spec, seed=seed), folder / f"run{seed}").train()
        runs.append(str(folder / f"run{seed}"))
    return runs, spec["test_data_path"], folder


def test_each_run_scores_as_evaluate_does_and_runs_that_agree_vote_to_their_own_score(trained, capsys):
    from multigrain.platform.runs import Run

    runs, data, folder = trained
    out = folder / "vote.json"
    assert ner_vote.main([*runs, "--data", data, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    for run in result["runs"]:
        metrics, _ = Run.open(run["run_dir"]).evaluate(data, device="cpu")
        assert run["f1"] == pytest.approx(100 * metrics["f1"], abs=1e-9)
    assert result["sentences"] == 4 and result["min_votes"] == 2 and result["scheme"] == "BMES"
    assert f"F1 {result['vote']['f1']:.2f}" in capsys.readouterr().out
    same = ner_vote.pooled([runs[0]] * 3, data, None)
    assert same["vote"]["f1"] == pytest.approx(same["runs"][0]["f1"], abs=1e-9)


def test_bad_input_is_one_error_and_writes_nothing(trained, tmp_path, capsys, monkeypatch):
    runs, data, _ = trained
    monkeypatch.setattr(ner_vote, "predicted_tags", None)  # refused before any run predicts
    assert ner_vote.main([*runs, "--data", data, "--min-votes", "1"]) == 2
    assert "--min-votes 1: expected more than half of the 3 runs" in capsys.readouterr().err
    monkeypatch.undo()
    missing = tmp_path / "nowhere.bmes"
    assert ner_vote.main([*runs, "--data", str(missing), "--json", str(tmp_path / "v.json")]) == 2
    assert f"{missing}: no such data file" in capsys.readouterr().err
    assert ner_vote.main([*runs, "--data", data, "--json", str(tmp_path / "no" / "v.json")]) == 2
    assert "--json" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit) as exit_:
        ner_vote.main([runs[0], "--data", data])
    assert exit_.value.code == 2


def test_runs_that_read_the_file_differently_are_refused(monkeypatch, capsys):
    sentences = {"a": ([["北", "京"]], [["B-LOC", "E-LOC"]]), "b": ([["北", "京"]], [["O", "O"]])}
    monkeypatch.setattr(ner_vote, "predicted_tags", lambda run, data, device: (*sentences[run], [["O", "O"]]))
    assert ner_vote.main(["a", "b", "--data", "test.bmes"]) == 2
    assert "b reads test.bmes differently from a (other sentences or gold tags)" in capsys.readouterr().err
