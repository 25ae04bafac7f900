"""The Lattice-BERT tables of benchmarks/RESULTS.md from the finished runs of the suite
``jsonnet_configs/suites/lattice_bert.jsonnet`` (``multigrain suite`` trained them): one budget's
pre-trainings and the fine-tunings that read them. It trains nothing.

    python benchmarks/lattice_bert.py --suite jsonnet_configs/suites/lattice_bert.jsonnet --budget 800k
        [-o KEY.PATH=VALUE ...] [--runs-dir runs] [--out JSON] [--results RESULTS.md] [--section HEADING]
        [--note TEXT] [--measure [--throughput-batches 10]]
    (the same: python benchmarks/lattice_bert_suite.py --suite ... --budget ...)

``--budget TAG`` is the pre-trainings' configuration tag in the suite (``800k``, ``2400k``,
``800k-b16``, ``4m-b16``); the fine-tunings are the entries whose ``run_of`` reads one of them
(``[1k]`` for ``800k``, ``[<budget>-1k]`` for the others). ``-o`` repeats the suite call's
overrides (its runs' hashes include them). Each run's figures come from its run directory's
``metrics.json`` (``SuiteRun.result``): training time, device, the dev MSP / SOP accuracies and the
leakage check (segment-masked and token-masked accuracy: the pre-trainer's validation metrics), the
fine-tunings' test scores. Characters, lattice tokens and the training speed are
``lattice_bert.py``'s own measurement (its corpus count and throughput batches), no training's:
they are read where a run directory holds them (``corpus_stats.json``, ``throughput.json``, or the
same keys in ``metrics.json``; ``--measure`` writes both files there, the corpus counted and the
finished pre-trainings' steps timed on this machine now), else the row shows "–" and the section
says which are missing. A run not finished in its directory is named on one line and left out
(exit 2 when none of the budget's runs is finished).

``--out`` gets the report JSON ``lattice_bert.py`` writes (setup, pretraining, finetuning), the
section (``lattice_bert_report.section``) goes under ``--section`` of ``--results``, with a
``Suite:`` line naming the suite call whose runs it shows (``tests/benchmarks/test_suites_cover_results.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from lattice_bert import FINETUNE, HEADLINE, PRETRAINED  # noqa: E402
from lattice_bert_report import section  # noqa: E402

from multigrain.platform.suite import matches  # noqa: E402

SUITE = ROOT / "jsonnet_configs" / "suites" / "lattice_bert.jsonnet"
#: RESULTS.md's section and report file of each budget of the suite
SECTIONS = {"800k": ("## Lattice-BERT", "lattice_bert.json"),
            "2400k": ("## Lattice-BERT at 2.4M characters", "lattice_bert_2400k.json"),
            "800k-b16": ("## Lattice-BERT at 800,000 characters, batches of 16", "lattice_bert_800k_b16.json"),
            "4m-b16": ("## Lattice-BERT at 4,000,000 characters, batches of 16", "lattice_bert_4m_b16.json")}
SIZES = ("tiny", "lite", "base")
#: what only lattice_bert.py measures: (column, key of the row, files of a run directory that may hold it)
MEASURED = (("characters", "chars", "corpus_stats.json"), ("lattice tokens", "tokens", "corpus_stats.json"),
            ("train chars/s and tokens/s", "throughput", "throughput.json"))


def pretrained_name(spec_path: str) -> tuple[str, str] | None:
    """(model, size) of a pre-training spec file (``lattice_bert_tiny.jsonnet``: lattice_bert, tiny)."""
    stem = Path(spec_path).name.split(".")[0]
    return next(((name, size) for name, (pattern, _) in PRETRAINED.items() for size in SIZES
                 if pattern.format(size=size) == stem), None)


def labels_of(suite: dict) -> list[tuple[str, str, set]]:
    """(entry name with [tag], tag, the names its ext-vars ``run_of``) of every entry and configuration."""
    from multigrain.platform.suite import entry_labels

    return [(name, tag, {v["run_of"] for v in (suite["entries"][i].get("ext_vars") or {}).values() if isinstance(v, dict)})
            for i, tag, name, _ in entry_labels(suite)]


def selection(suite: dict, budget: str) -> tuple[list[str], str]:
    """The ``--only`` patterns that select the budget's pre-trainings and their fine-tunings (and no
    other entry), and the ``Suite:`` line's text naming them (``{suite}``: the suite file, ``{o}``: the
    call's -o)."""
    labels = labels_of(suite)
    pre = {label for label, tag, reads in labels if tag == budget and not reads}
    if not pre:
        tags = sorted({tag for _, tag, reads in labels if tag and not reads})
        raise SystemExit(f"--budget {budget}: no pre-training entry tagged [{budget}] in the suite (its "
                         f"pre-training tags: {', '.join(tags)})")
    fine_tags = sorted({tag for _, tag, reads in labels if reads & pre})
    wanted = pre | {label for label, tag, _ in labels if tag in fine_tags}
    one = f"* [{budget}*"
    if {label for label, _, _ in labels if matches(label, one)} == wanted:
        ft = ", ".join(f"`[{t}]`" for t in fine_tags)
        return [one], f"`multigrain suite {{suite}} --only '{one}'{{o}}` (pre-trainings `[{budget}]`, fine-tunings {ft})"
    patterns = [f"* [{budget}]"] + [f"* [{t}]" for t in fine_tags]
    text = (f"`multigrain suite {{suite}} --only '{patterns[0]}'{{o}}` (the pre-trainings)" + "".join(
        f" and `multigrain suite {{suite}} --only '{p}'{{o}}` (the fine-tunings, with the pre-trainings they read)"
        for p in patterns[1:]))
    return patterns, text


def measured(r, result: dict) -> tuple[dict, list[str]]:
    """What only lattice_bert.py measures, where the run holds it (metrics.json, else the run
    directory's corpus_stats.json / throughput.json), and the columns it does not hold."""
    found, missing = {}, []
    for column, key, file in MEASURED:
        value = result.get(key)
        if value is None:
            try:
                kept = json.loads((Path(r.run_dir) / file).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                kept = {}
            value = kept if key == "throughput" and kept else kept.get(key)
            if key == "chars" and value is not None:
                found["instances"] = kept.get("instances")
        if value is None:
            missing.append(column)
        else:
            found[key] = value
    return found, missing


def pretraining_row(r, result: dict) -> dict:
    dev = result.get("validation") or {}
    extra, missing = measured(r, result)
    row = {"run_dir": r.run_dir, "spec_hash": r.spec_hash, "device": result.get("device"),
           "training_seconds": result.get("training_seconds"), "epochs": r.spec["trainer"]["num_epochs"],
           **extra, "dev": {k: dev.get(k) for k in ("msp_accuracy", "sop_accuracy", "segment_masked_accuracy",
                                                   "token_masked_accuracy", "msp_loss")}}
    if missing:
        row["not_measured"] = missing
    return row


def measure(runs: list, budget: str, batches: int, print_line=print) -> None:
    """``--measure``: lattice_bert.py's own measurement of the budget's finished pre-trainings, kept
    in their run directories for the table: ``corpus_stats.json`` (characters and lattice tokens of
    an epoch; counted once) and ``throughput.json`` (``batches`` training batches per model, the
    models' steps interleaved, on this machine now)."""
    import lattice_bert
    import lattice_bert_report

    done = {pretrained_name(r.spec_path)[0]: r for r in runs
            if r.tag == budget and pretrained_name(r.spec_path) and r.result() is not None}
    for name, r in done.items():
        kept = Path(r.run_dir) / "corpus_stats.json"
        if not kept.exists():
            kept.write_text(json.dumps(lattice_bert_report.corpus_stats(r.spec)), encoding="utf-8")
            print_line(f"{r.label}: corpus counted into {kept}")
    speeds = lattice_bert.throughput({name: r.spec for name, r in done.items()}, batches) if batches else {}
    for name, speed in speeds.items():
        Path(done[name].run_dir, "throughput.json").write_text(json.dumps(speed), encoding="utf-8")
        print_line(f"{done[name].label}: {speed['chars_per_s']:.0f} characters/s, {speed['tokens_per_s']:.0f} "
                   f"lattice tokens/s ({speed['batches']} batches)")


def shared(values: list):
    """The one value every run has, else the values (sorted, distinct) as a list."""
    distinct = sorted(set(map(json.dumps, values)))
    return json.loads(distinct[0]) if len(distinct) == 1 else [json.loads(v) for v in distinct]


def build_report(runs: list, reads: dict, budget: str, print_line=print) -> dict:
    """The report (``lattice_bert.py``'s JSON) of the budget's finished runs of ``runs`` (planned
    suite runs; ``reads``: spec hash -> the spec hashes of the runs it reads); an unfinished run is
    named and left out."""
    pre_runs = [r for r in runs if r.tag == budget and pretrained_name(r.spec_path)]
    pre = {r.spec_hash: r for r in pre_runs}
    fine_runs = [r for r in runs if any(h in pre for h in reads.get(r.spec_hash, ()))]
    pretraining, finetuning, unfinished, fine_done, devices = {}, {}, [], [], set()
    for r in sorted(pre_runs, key=lambda r: list(PRETRAINED).index(pretrained_name(r.spec_path)[0])):
        result = r.result()
        if result is None:
            unfinished.append(r)
            continue
        pretraining[pretrained_name(r.spec_path)[0]] = pretraining_row(r, result)
    for r in fine_runs:
        result = r.result()
        if result is None:
            unfinished.append(r)
            continue
        fine_done.append(r)
        devices.add(result.get("device") or "?")
        model = pretrained_name(next(pre[h] for h in reads[r.spec_hash] if h in pre).spec_path)[0]
        stem = Path(r.spec_path).name.split(".")[0]
        task = next((t for t, s in FINETUNE.items() if s == stem), stem)
        metric = HEADLINE[r.spec["task"]]
        test = result.get("test") or {}
        row = finetuning.setdefault(task, {}).setdefault(model, {"metric": metric, "seeds": {}})
        row["seeds"][r.seed] = {metric: test.get(metric), "em": test.get("em"), "seconds": result.get("seconds"),
                                "run_dir": r.run_dir}
    for r in unfinished:
        print_line(f"{r.label}: no finished run in {r.run_dir} ({r.state()}); left out")
    first = pre_runs[0].spec
    setup = {"size": pretrained_name(pre_runs[0].spec_path)[1], "chars_budget": first["dataset_reader"]["max_chars"],
             "epochs": first["trainer"]["num_epochs"], "batch_size": first["data_loader"]["batch_size"],
             "device": ", ".join(sorted({r["device"] for r in pretraining.values() if r.get("device")})) or None}
    if fine_done:
        setup.update(seeds=len({r.seed for r in fine_done}),
                     finetune_epochs=shared([r.spec["trainer"]["num_epochs"] for r in fine_done]),
                     finetune_lr=shared([r.spec["trainer"]["optimizer"]["lr"] for r in fine_done]),
                     finetune_max_instances=shared([r.spec["dataset_reader"].get("max_instances") for r in fine_done]),
                     finetune_device=", ".join(sorted(devices)))
    report = {"setup": setup, "pretraining": pretraining, "finetuning": finetuning,
              "unfinished": [r.label for r in unfinished]}
    report["finetune_overrides"] = overrides_line(fine_runs)
    return report


def overrides_line(fine_runs: list) -> str:
    """The fine-tunings' configuration overrides, tasks that share them together."""
    groups: dict[tuple, list] = {}
    for r in fine_runs:
        stem = Path(r.spec_path).name.split(".")[0]
        names = groups.setdefault(tuple(r.overrides), [])
        if stem not in names:
            names.append(stem)
    return "; ".join(f"{', '.join(names)}: " + (" ".join(f"`-o {o}`" for o in texts) or "none")
                     for texts, names in groups.items())


def notes(report: dict, argv: list[str]) -> str:
    setup = report["setup"]
    lines = []
    if report.get("finetuning"):
        lines.append(f"Fine-tuning: seeds {', '.join(str(s) for s in sorted({int(s) for t in report['finetuning'].values() for m in t.values() for s in m['seeds']}))}, "
                     f"{setup.get('finetune_device')}; the suite's overrides of each task's spec: "
                     f"{report['finetune_overrides']}.")
    if report["unfinished"]:
        lines.append(f"Not finished, left out: {', '.join(report['unfinished'])}.")
    lines.append(f"Made from the suite's finished runs, nothing trained (`python benchmarks/lattice_bert.py "
                 f"{' '.join(argv)}`), {time.strftime('%Y-%m-%d')}.")
    return "\n\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True, help="the suite file (jsonnet_configs/suites/lattice_bert.jsonnet)")
    parser.add_argument("--budget", required=True, help="the pre-trainings' configuration tag: 800k, 2400k, 800k-b16, "
                                                        "4m-b16")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="the suite call's -o (its runs' hashes include them)")
    parser.add_argument("--runs-dir", default="runs", help="the suite's run directories' root (default runs/)")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--out", default=None, help="the report JSON (default benchmarks/results/<the budget's>.json)")
    parser.add_argument("--section", default=None, help="the RESULTS.md heading (default the budget's section)")
    parser.add_argument("--note", default="", help="a line written under the tables")
    parser.add_argument("--measure", action="store_true",
                        help="first count the finished pre-trainings' corpus and time --throughput-batches of each "
                             "(lattice_bert.py's measurement; kept in their run directories), then the tables")
    parser.add_argument("--throughput-batches", type=int, default=10, help="with --measure: batches timed per model")
    args = parser.parse_args(argv)
    from multigrain.platform.suite import load_suite, plan
    from results_md import write_section

    argv = list(sys.argv[1:] if argv is None else argv)
    suite = load_suite(args.suite)
    patterns, suite_text = selection(suite, args.budget)
    runs, reads = {}, {}  # spec hash -> run; -> the spec hashes of the runs it reads (run_of)
    for pattern in patterns:  # each once, in the suite's order
        planned = plan(args.suite, suite, args.runs_dir, only=pattern, check_data_paths=False, overrides=args.override)
        for r in planned:
            runs.setdefault(r.spec_hash, r)
            reads[r.spec_hash] = [planned[i].spec_hash for i in r.needs]
    if args.measure:
        os.chdir(ROOT)  # the specs' data paths are relative to the repository root
        measure(list(runs.values()), args.budget, args.throughput_batches)
    report = build_report(list(runs.values()), reads, args.budget)
    if not report["pretraining"] and not report["finetuning"]:
        print(f"--budget {args.budget}: none of the suite's {len(runs)} runs of this budget has finished under "
              f"{args.runs_dir}", file=sys.stderr)
        return 2
    overrides = "".join(f" -o {o}" for o in args.override)
    report["suite"] = suite_text.format(suite=args.suite, o=overrides)
    report["note"] = "\n\n".join(filter(None, [notes(report, argv), args.note]))
    default_section, default_out = SECTIONS.get(args.budget, (f"## Lattice-BERT [{args.budget}]",
                                                              f"lattice_bert_{args.budget}.json"))
    out = Path(args.out or ROOT / "benchmarks" / "results" / default_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out)
    write_section(args.section or default_section, section(report), Path(args.results))
    print(f"{args.results}: {args.section or default_section} written; the runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
