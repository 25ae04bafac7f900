"""An entity-level majority vote of several NER runs on one data file: each run's span F1 and the vote's.

    python benchmarks/ner_vote.py RUN_DIR RUN_DIR RUN_DIR --data ../shared/data/resume_ner/test.char.bmes

An entity (type, start, end) is kept when at least ``--min-votes`` runs predict it (default: more than
half of them). More than half is also the least the vote accepts: each run's entities never overlap, so
two overlapping entities cannot both have more than half of the votes, and the kept ones are written back
as tags and scored by the platform's ``span_f1`` (seqeval's strict mode). A diagnostic of how far a
backbone goes when several of its trainings are pooled (RESULTS.md: "Pooled seeds"), not a model: the
leaderboard's rows are single runs.

Every run reads the file with its own spec's test reader and must see the same sentences. A run that is
not a tagger, a data file that does not read, or runs that read it differently are one error, exit code 2;
``--json`` is written whole or not at all.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from multigrain.components.metrics.span_f1 import SpanF1
from multigrain.components.tag_schemes import detect_scheme, extract_spans, spans_to_tags
from multigrain.platform.commands.common import AtomicOutput
from multigrain.platform.errors import ConfigurationError, MultigrainError

Entity = tuple[str, int, int]  # (type, start, end), end inclusive


def check_min_votes(min_votes: int, n_runs: int) -> None:
    if not n_runs / 2 < min_votes <= n_runs:
        raise ConfigurationError(f"--min-votes {min_votes}: expected more than half of the {n_runs} runs "
                                 f"and at most all of them (fewer would let overlapping entities both win)")


def vote(runs: list[list[set[Entity]]], min_votes: int) -> list[set[Entity]]:
    """Per sentence, the entities at least ``min_votes`` of the runs predict (``runs[r][i]``: run r's
    entities of sentence i)."""
    check_min_votes(min_votes, len(runs))
    return [{e for e, n in Counter(e for spans in sentence for e in spans).items() if n >= min_votes}
            for sentence in zip(*runs)]


def span_f1(predicted: list[list[str]], gold: list[list[str]], scheme: str) -> dict[str, float]:
    metric = SpanF1(scheme)
    metric(predicted, gold)
    return metric.get_metric()


def predicted_tags(run_dir: str, data: str, device: str) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """(characters, gold tags, predicted tags) of every sentence of ``data`` read by the run's test reader."""
    from multigrain.platform.runs import Run

    archive = Run.open(run_dir).load_archive(device=device, reader="test")
    instances = archive.read(data)
    if not instances or any("tags" not in x or "chars" not in x for x in instances):
        raise ConfigurationError(f"{run_dir}: its reader gives no tagged sentences from {data}; the vote needs "
                                 f"an NER run and a data file with gold tags")
    predictions = list(archive.predict_batches(instances))
    if any(not isinstance(p, dict) or "tags" not in p for p in predictions):
        raise ConfigurationError(f"{run_dir}: its model does not predict tags (not an NER tagger)")
    return [list(x["chars"]) for x in instances], [list(x["tags"]) for x in instances], [p["tags"] for p in predictions]


def pooled(run_dirs: list[str], data: str, min_votes: int | None, device: str = "cpu") -> dict:
    """Each run's F1 and the vote's (in percent), with the settings that made them."""
    min_votes = min_votes if min_votes is not None else len(run_dirs) // 2 + 1
    check_min_votes(min_votes, len(run_dirs))  # before minutes of predicting
    chars = gold = None
    per_run = []
    for run_dir in run_dirs:
        run_chars, run_gold, tags = predicted_tags(run_dir, data, device)
        if chars is None:
            chars, gold = run_chars, run_gold
        elif (run_chars, run_gold) != (chars, gold):
            raise ConfigurationError(f"{run_dir} reads {data} differently from {run_dirs[0]} (other sentences or "
                                     f"gold tags): the runs must be scored on the same sentences")
        per_run.append(tags)
    tags_seen = {t for sentence in gold for t in sentence} | {t for tags in per_run for s in tags for t in s}
    scheme = detect_scheme(sorted(tags_seen))
    entities = [[set(extract_spans(s, scheme)) for s in tags] for tags in per_run]
    voted = [spans_to_tags(len(c), sorted(spans, key=lambda e: e[1]), scheme)
             for c, spans in zip(chars, vote(entities, min_votes))]
    scores = [span_f1(tags, gold, scheme) for tags in per_run]
    pooled_score = span_f1(voted, gold, scheme)
    return {"data": data, "sentences": len(gold), "scheme": scheme, "min_votes": min_votes,
            "runs": [{"run_dir": d, "f1": 100 * s["f1"]} for d, s in zip(run_dirs, scores)],
            "vote": {k: 100 * pooled_score[k] for k in ("precision", "recall", "f1")}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--data", required=True, help="a data file in the runs' reader format, with gold tags")
    p.add_argument("--min-votes", type=int, help="runs that must predict an entity (default: more than half)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    if len(args.run_dirs) < 2:
        p.error("a vote needs at least 2 runs")
    try:
        output = AtomicOutput(args.json, "--json") if args.json else None
        result = pooled(args.run_dirs, args.data, args.min_votes)
        if output is not None:
            with output as out:
                out.write(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for run in result["runs"]:
        print(f"{run['run_dir']}: F1 {run['f1']:.2f}")
    v = result["vote"]
    print(f"vote of {len(result['runs'])} (an entity kept with >= {result['min_votes']} votes) on {args.data}, "
          f"{result['sentences']} sentences: F1 {v['f1']:.2f} (P {v['precision']:.2f}, R {v['recall']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
