"""Span F1 and tag schemes against seqeval's strict mode (the oracle), plus hand cases."""
import random
import warnings

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.scheme import IOB2, IOBES

from multigrain.components.metrics.span_f1 import SpanF1
from multigrain.components.tag_schemes import detect_scheme, extract_spans, ill_formed_positions
from multigrain.platform.errors import ConfigurationError

TYPES = ["PER", "LOC", "ORG.NAM", "GPE.NOM"]
PREFIXES = {"BIO": "BI", "BIOES": "BIES", "BMES": "BMES"}
ORACLE_SCHEME = {"BIO": IOB2, "BIOES": IOBES, "BMES": IOBES}


def to_seqeval(seqs, scheme):
    """seqeval has no BMES: M- is its I-."""
    if scheme != "BMES":
        return seqs
    return [["I" + t[1:] if t.startswith("M-") else t for t in s] for s in seqs]


def well_formed(rng, n, scheme):
    """A sentence of n tags made of whole entities."""
    inside = "M" if scheme == "BMES" else "I"
    tags = []
    while len(tags) < n:
        if rng.random() < 0.4:
            tags.append("O")
            continue
        t = rng.choice(TYPES)
        length = min(rng.randint(1, 4), n - len(tags))
        if scheme == "BIO":
            tags += [f"B-{t}"] + [f"I-{t}"] * (length - 1)
        elif length == 1:
            tags.append(f"S-{t}")
        else:
            tags += [f"B-{t}"] + [f"{inside}-{t}"] * (length - 2) + [f"E-{t}"]
    return tags


def random_tag(rng, scheme):
    return "O" if rng.random() < 0.25 else f"{rng.choice(PREFIXES[scheme])}-{rng.choice(TYPES)}"


def noisy(rng, tags, p, scheme):
    return [random_tag(rng, scheme) if rng.random() < p else t for t in tags]


def sample(rng, scheme):
    """Several sentences of gold and predicted tags, often ill-formed."""
    gold, pred = [], []
    for _ in range(rng.randint(1, 5)):
        n = rng.randint(0, 14)
        g = well_formed(rng, n, scheme) if rng.random() < 0.7 else [random_tag(rng, scheme) for _ in range(n)]
        g = noisy(rng, g, rng.choice([0.0, 0.05, 0.2]), scheme)
        p = noisy(rng, g, rng.choice([0.0, 0.1, 0.3, 1.0]), scheme)
        gold.append(g)
        pred.append(p)
    return gold, pred


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "BMES"])
def test_span_f1_equals_seqeval_strict(scheme):
    rng = random.Random(f"span-f1-{scheme}")
    oracle = ORACLE_SCHEME[scheme]
    n_entities = 0
    for _ in range(1000):
        gold, pred = sample(rng, scheme)
        metric = SpanF1(scheme)
        cut = rng.randint(0, len(gold))  # accumulate over two calls
        metric(pred[:cut], gold[:cut])
        metric(pred[cut:], gold[cut:])
        ours = metric.get_metric()
        report = metric.report()
        y_true, y_pred = to_seqeval(gold, scheme), to_seqeval(pred, scheme)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = dict(mode="strict", scheme=oracle)
            assert ours["precision"] == pytest.approx(precision_score(y_true, y_pred, **kw), abs=1e-9)
            assert ours["recall"] == pytest.approx(recall_score(y_true, y_pred, **kw), abs=1e-9)
            assert ours["f1"] == pytest.approx(f1_score(y_true, y_pred, **kw), abs=1e-9)
            theirs = classification_report(y_true, y_pred, output_dict=True, **kw)
        types = {k: v for k, v in theirs.items() if not k.endswith(" avg")}
        assert sorted(report) == sorted(types)
        assert sorted(k[3:] for k in ours if k.startswith("f1-")) == sorted(types)
        for t, row in types.items():
            assert ours[f"f1-{t}"] == pytest.approx(row["f1-score"], abs=1e-9)
            assert report[t]["precision"] == pytest.approx(row["precision"], abs=1e-9)
            assert report[t]["recall"] == pytest.approx(row["recall"], abs=1e-9)
            assert report[t]["f1"] == pytest.approx(row["f1-score"], abs=1e-9)
            assert report[t]["support"] == row["support"]
        n_entities += sum(r["support"] for r in report.values())
    assert n_entities > 5000  # the samples do contain entities


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "BMES"])
def test_extract_spans_on_well_formed_round_trip(scheme):
    rng = random.Random(scheme)
    for _ in range(300):
        tags = well_formed(rng, rng.randint(0, 20), scheme)
        assert ill_formed_positions(tags, scheme) == []
        rebuilt = ["O"] * len(tags)
        for t, s, e in extract_spans(tags, scheme):
            if scheme == "BIO":
                rebuilt[s:e + 1] = [f"B-{t}"] + [f"I-{t}"] * (e - s)
            elif s == e:
                rebuilt[s] = f"S-{t}"
            else:
                mid = "M" if scheme == "BMES" else "I"
                rebuilt[s:e + 1] = [f"B-{t}"] + [f"{mid}-{t}"] * (e - s - 1) + [f"E-{t}"]
        assert rebuilt == tags


@pytest.mark.parametrize("scheme,tags,spans", [
    ("BIO", "B-PER I-PER O I-LOC I-LOC B-LOC B-LOC I-PER", [("PER", 0, 1), ("LOC", 5, 5), ("LOC", 6, 6)]),
    ("BIO", "O B-PER", [("PER", 1, 1)]),
    ("BIO", "B-PER.NAM I-PER.NAM I-PER.NOM", [("PER.NAM", 0, 1)]),
    ("BIO", "", []),
    ("BIOES", "S-PER B-LOC I-LOC E-LOC B-ORG E-PER B-X I-X O E-X B-Y E-Y",
     [("PER", 0, 0), ("LOC", 1, 3), ("Y", 10, 11)]),
    ("BIOES", "B-PER", []),
    ("BIOES", "B-PER B-PER E-PER I-PER E-PER", [("PER", 1, 2)]),
    ("BMES", "B-PER M-PER E-PER M-LOC E-LOC S-ORG B-ORG S-ORG", [("PER", 0, 2), ("ORG", 5, 5), ("ORG", 7, 7)]),
    ("BMES", "B-GPE.NAM E-GPE.NAM E-GPE.NAM", [("GPE.NAM", 0, 1)]),
])
def test_extract_spans_hand_cases(scheme, tags, spans):
    assert extract_spans(tags.split(), scheme) == spans


@pytest.mark.parametrize("scheme,tags,bad", [
    ("BIO", "O I-PER B-LOC I-LOC I-PER", [1, 4]),
    ("BIO", "I-PER", [0]),
    ("BIO", "B-PER E-PER", [1]),  # E- is not a BIO prefix
    ("BIO", "B-PER I-PER O B-LOC", []),
    ("BIOES", "B-PER O", [1]),
    ("BIOES", "O B-PER", [1]),  # may not end on B-
    ("BIOES", "E-PER S-LOC", [0]),
    ("BIOES", "B-PER I-PER E-PER S-LOC O", []),
    ("BMES", "B-PER M-PER E-LOC", [2]),
    ("BMES", "B-PER I-PER M-PER", [1, 2]),
    ("BMES", "S-PER M-PER", [1]),
    ("BMES", "PER O", [0]),
    ("BMES", "", []),
])
def test_ill_formed_positions(scheme, tags, bad):
    assert ill_formed_positions(tags.split(), scheme) == bad


def test_detect_scheme():
    assert detect_scheme(["O", "B-PER", "M-PER", "E-PER", "S-PER"]) == "BMES"
    assert detect_scheme(["O", "B-PER", "I-PER", "E-PER", "S-PER"]) == "BIOES"
    assert detect_scheme(["O", "S-PER"]) == "BIOES"
    assert detect_scheme(["O", "B-PER.NAM", "I-PER.NAM"]) == "BIO"
    assert detect_scheme(["O", "B-PER"]) == "BIO"
    for labels in (["O", "U-PER"], ["O", "PER"], ["O", "B_PER"], ["B-PER", "M-PER", "I-PER"]):
        with pytest.raises(ConfigurationError):
            detect_scheme(labels)


def test_scheme_detected_from_tags_when_not_given():
    gold = [["B-PER", "I-PER", "O"], ["B-LOC", "E-LOC", "S-PER"]]
    pred = [["B-PER", "I-PER", "O"], ["B-LOC", "E-LOC", "O"]]
    auto = SpanF1()
    auto(pred[:1], gold[:1])  # only B-/I-/O so far: held back
    auto(pred[1:], gold[1:])
    explicit = SpanF1("BIOES")
    explicit(pred, gold)
    assert auto.scheme == "BIOES"
    assert auto.get_metric() == explicit.get_metric()
    # B-PER I-PER O never closes in BIOES: 1 of 1 predicted correct, 1 of 2 gold found
    assert explicit.get_metric(reset=True) == pytest.approx(
        {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "f1-LOC": 1.0, "f1-PER": 0.0})
    assert explicit.get_metric() == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_metric_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        SpanF1("BIO")([["O"]], [["O", "O"]])
