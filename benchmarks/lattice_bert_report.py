"""The corpus counts of ``benchmarks/lattice_bert.py`` (``corpus_stats``: one pre-training's
characters and lattice tokens; ``count_corpus``: every source of the default corpus) and the
RESULTS.md lines of its report (its JSON): the corpus table, the pre-training table (characters,
lattice tokens, speed, dev MSP/SOP and the leakage check), the fitted budget and the weights of a
device call, the fine-tuning table (mean ± sd over seeds) and the Ray Train wall times."""
from __future__ import annotations

import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus_stats(spec: dict) -> dict:
    """Characters and lattice tokens (the encoder's input, [CLS]/[SEP] included) of one epoch."""
    from multigrain.platform.config import build
    from multigrain.platform.experiment import Experiment

    exp = build(Experiment, spec)
    chars = tokens = instances = 0
    words = spec["model"]["use_words"]
    for x in exp.dataset_reader.read(exp.train_data_path):
        n = len(x["chars"]) + len(x.get("chars_b", ()))
        chars += n
        instances += 1
        pair = "chars_b" in x  # [CLS] a [SEP] b [SEP], or a text too short to halve: [CLS] a [SEP]
        lattices = x["lattice"].n_tokens + (x["lattice_b"].n_tokens if pair else 0)
        tokens += (3 if pair else 2) + (lattices if words else n)
    return {"instances": instances, "chars": chars, "tokens": tokens}


def count_corpus() -> list:
    """(source, texts, characters) of every source of the default corpus, pieces as the reader cuts them."""
    from multigrain.components.readers.corpus import TextCorpusReader
    from multigrain.platform.config import build
    from multigrain.platform.specs import load_spec

    spec = load_spec(ROOT / "jsonnet_configs" / "pretrain" / "lattice_bert_tiny.jsonnet")["dataset_reader"]
    spec = {k: v for k, v in spec.items() if k not in ("type", "lattice_builder")}
    reader = build(TextCorpusReader, dict(spec, split="all", max_chars=None))
    root = str((ROOT / "../shared/data").resolve())
    rows = []
    for source in reader.sources:
        texts = chars = 0
        for _, _, piece in reader.source_pieces(root, source):
            texts += 1
            chars += len(piece)
        rows.append({"source": source.path, "fields": source.fields if source.reader else "plain lines",
                     "pieces": texts, "chars": chars})
        print(rows[-1], flush=True)
    return rows


def mean_std(values: list) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.2f} ± {100 * std:.2f}"


def section(report: dict) -> list[str]:
    lines = []
    corpus = report.get("corpus")
    if corpus:
        total = sum(r["chars"] for r in corpus)
        lines += ["", "Pre-training corpus (`jsonnet_configs/lib/lattice_bert.libsonnet`: every Chinese text under "
                  "../shared/data that is not a dev or test split; pieces of at most 62 characters as the "
                  "`text_corpus` reader cuts them, consecutive duplicates read once; characters are character "
                  "tokens, a run of Latin letters/digits counting one):", "",
                  "| source | fields | pieces | characters |", "|---|---|---:|---:|"]
        lines += [f"| `{r['source']}` | {r['fields'] if isinstance(r['fields'], str) else ', '.join(r['fields'])} | "
                  f"{r['pieces']:,} | {r['chars']:,} |" for r in corpus]
        lines += [f"| **total** | | {sum(r['pieces'] for r in corpus):,} | **{total:,}** |"]
    pre = {name: r for name, r in (report.get("pretraining") or {}).items() if "dev" in r}  # imported: rows kept
    if pre and "size" in report.get("setup", {}):
        setup = report["setup"]
        batch = f", batches of {setup['batch_size']} pairs" if setup.get("batch_size") else ""
        lines += ["", f"Pre-training ({setup['size']}, budget {setup['chars_budget']:,} characters x {setup['epochs']} "
                  f"epochs{batch}, {setup['device']}; dev = 1% of the corpus by hash, at most 500 pairs):", "",
                  "| model | characters | lattice tokens | training s (with validation) | train chars/s | "
                  "train tokens/s | dev MSP acc | segment-masked acc | token-masked acc | SOP acc |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, r in pre.items():
            # without --throughput-batches: the whole run's rate (validation included); a suite run's
            # row (benchmarks/lattice_bert_suite.py) names what it lacks in "not_measured" instead
            speed = r.get("throughput") or ({"chars_per_s": None, "tokens_per_s": None} if "not_measured" in r else
                                            {"chars_per_s": r["chars"] * r["epochs"] / r["training_seconds"],
                                             "tokens_per_s": float("nan")})
            d = r["dev"]
            pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
            rate = lambda v: "–" if v is None else f"{v:.0f}"  # noqa: E731
            total = lambda v: "–" if v is None else f"{v * r['epochs']:,}"  # noqa: E731
            lines.append(f"| {name} | {total(r.get('chars'))} | {total(r.get('tokens'))} | "
                         f"{r['training_seconds']:.0f} | {rate(speed['chars_per_s'])} | {rate(speed['tokens_per_s'])} | "
                         f"{pct(d['msp_accuracy'])} | {pct(d['segment_masked_accuracy'])} | "
                         f"{pct(d['token_masked_accuracy'])} | {pct(d['sop_accuracy'])} |")
        lacking: dict[tuple, list] = {}  # what a suite run's directory lacks -> the rows
        for name, r in pre.items():
            if r.get("not_measured"):
                lacking.setdefault(tuple(r["not_measured"]), []).append(name)
        if lacking:
            lines += ["", "Left out (–), not in the runs' directories: " + "; ".join(
                f"{', '.join(what)} of {', '.join(names)}" for what, names in lacking.items()) + ": "
                "`benchmarks/lattice_bert.py --suite ... --measure` counts and times them, a training does not."]
    if report.get("fit"):
        fit = report["fit"]
        lines += ["", f"Budget fitted to the call (`--chars-budget fit:SECONDS`, a probe first): {fit['budget']:,} "
                  f"characters, {100 * fit['corpus_share']:.1f} % of the corpus; the probe: " + "; ".join(
                      f"{name} reads {v['read_chars_per_s']:,} and trains {v['train_chars_per_s']:,} characters/s"
                      for name, v in fit.items() if isinstance(v, dict)) + "."]
    if report.get("export"):
        lines += ["", "Weights brought back (`--export-weights`, bf16): " + ", ".join(
            f"`{f['file']}` {f['bytes'] / 2**20:.1f} MiB" for f in report["export"]) + "."]
    fine = report.get("finetuning")
    if fine:
        names = sorted({n for t in fine.values() for n in t})
        lines += ["", "Fine-tuning, test score (mean ± std over seeds, %):", "",
                  "| task | metric | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
        for task, rows in fine.items():
            metric = next(iter(rows.values()))["metric"]
            cells = [mean_std([s[metric] for s in rows[n]["seeds"].values()]) if n in rows else "–" for n in names]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    workers = report.get("workers")
    if workers:
        lines += ["", "Pre-training wall time with `multigrain train --workers N`: " +
                  (workers["skipped"] if "skipped" in workers else
                   ", ".join(f"{n}: {r['seconds']:.0f} s" + (" (failed)" if r["returncode"] else "")
                             for n, r in workers.items()))]
    if report.get("suite"):  # the suite call whose runs these are (tests/benchmarks/test_suites_cover_results.py)
        lines += ["", f"Suite: {report['suite']}."]
    if report.get("note"):
        lines += ["", report["note"]]
    return lines
