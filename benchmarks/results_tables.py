"""The ``## NER results`` and ``## Sentence results`` sections of benchmarks/RESULTS.md, generated
from MLflow: the runs tagged ``results_table`` (``ner`` or ``sentence``), recorded as rows from the
suites' runs (``multigrain suite jsonnet_configs/suites/{ner,sentence}.jsonnet``).

    python benchmarks/results_tables.py [--board benchmarks/results/leaderboard.json | --tracking-uri URI]
        [--results benchmarks/RESULTS.md]
    python benchmarks/results_tables.py --suite jsonnet_configs/suites/ner.jsonnet [--only PATTERN]
        [--tracking-uri URI] [--runs-dir runs] [--board FILE] [--results FILE]

By default the committed portable leaderboard file (``benchmarks/results/leaderboard.json``, the
results' one source of truth, merged from every machine that trained them) is imported into a
temporary MLflow store and the tables are read back from it: a fresh clone regenerates RESULTS.md's
tables byte for byte. ``--tracking-uri`` alone reads an existing store instead (nothing is imported).
``--suite`` (repeatable) records a suite's finished runs as rows (``results_md.record_suite``: one
row per entry and configuration, its seeds' runs) in the store at ``--tracking-uri`` (default
./mlruns.db) after importing ``--board`` into it, exports the results runs back into ``--board`` and
rewrites both tables: after ``multigrain suite``, one command puts its runs on the committed board
and in RESULTS.md.

A table row is a ``results_key`` (``resume_bilstm_big[no_global]``: the spec's name and the
configuration tag): its runs are those its latest recorded run (``results_time``) lists in
``results_row`` - a sentence row and a suite's NER row one run per seed (mean ± std), an older NER
row one run (its other seeds were ``[seedN]`` rows; those a later suite row holds are not shown).
Columns the MLflow metrics cannot give are tags (``suite.run_tags``): ``note``, ``device``,
``date``, ``overrides``, ``num_epochs``; rows migrated from the retired hand-kept JSON stores whose
per-seed values were not kept carry their cells as ``summary_*`` tags. The papers' numbers come
from ``benchmarks/paper_numbers.json`` (``multigrain.platform.papers``).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_md import BOARD, RESULTS, mean_std, write_section  # noqa: E402

NER_SECTION, SENTENCE_SECTION = "## NER results", "## Sentence results"
#: the runs of the results tables
RESULTS_RUNS = "attributes.status = 'FINISHED' and tags.results_table LIKE '%'"
NER_DATASETS = ["resume", "weibo", "msra"]
NER_MODELS = ["bilstm_crf", "transformer", "star", "lattice_lstm", "plte", "plte_sgd", "big", "bilstm_big",
              "bilstm_crf_vec", "lattice_lstm_vec", "plte_vec", "plte_sgd_vec", "big_vec", "bilstm_big_vec",
              "tagger_m3e", "plte_m3e", "big_m3e", "lattice_lstm_m3e", "tagger_m3e_msra", "plte_m3e_msra",
              "tagger_m3e_msra2", "plte_m3e_msra2", "big_m3e_msra2", "lattice_lstm_m3e_msra2", "tagger_m3e_again"]
#: how a table's rows are made (its prose names it)
SUITE_COMMANDS = ("`multigrain suite jsonnet_configs/suites/{suite}.jsonnet`, then `python benchmarks/results_tables.py "
                  "--suite jsonnet_configs/suites/{suite}.jsonnet`")
SENTENCE_DATASETS = [("cls", "chnsenticorp"), ("pair", "bq"), ("cls", "thucnews"), ("mrc", "cmrc2018")]
# m3e_*: the same layers on the pretrained m3e-small backbone (optional extra multigrain[m3e])
SENTENCE_VARIANTS = ["backbone", "mwa", "hrmf", "big", "big_vec", "m3e_backbone", "m3e_mwa", "m3e_hrmf", "m3e_big",
                     "big_m3e_vec"]


def sentence_spec_paths() -> list[Path]:
    """The sentence specs that exist, in table order (not every dataset has every variant)."""
    paths = [ROOT / "jsonnet_configs" / task / f"{name}_{variant}.jsonnet"
             for task, name in SENTENCE_DATASETS for variant in SENTENCE_VARIANTS]
    return [p for p in paths if p.is_file()]


def sentence_metrics(task: str) -> tuple[str, str, str]:
    """(test a, test b, dev) metric keys of a sentence task's table columns."""
    return ("test_em", "test_f1", "best_validation_f1") if task == "mrc" else (
        "test_accuracy", "test_macro_f1", "best_validation_accuracy")


def table_rows(recs: list[dict], table: str) -> dict[str, list[dict]]:
    """results key -> the runs of its row (see the module docstring), for one results table."""
    mine = [r for r in recs if r["tags"].get("results_table") == table and r["status"] == "FINISHED"]
    by_id = {r["id"]: r for r in mine}
    latest: dict[str, dict] = {}
    for r in mine:
        key, when = r["tags"]["results_key"], (int(r["tags"].get("results_time", 0)), r["start_time"] or 0)
        if key not in latest or when > latest[key][0]:
            latest[key] = (when, r)
    rows = {}
    for key, (_, last) in latest.items():
        ids = json.loads(last["tags"].get("results_row") or "[]") or [last["id"]]
        rows[key] = [by_id[i] for i in ids if i in by_id]
    return rows


# ------------------------------------------------------------------------------------------ NER
def pct(x) -> str:
    """A fraction in percent; a cell already made (mean ± std) as it is."""
    return x if isinstance(x, str) else f"{100 * x:.2f}" if isinstance(x, (int, float)) else "–"


def ner_row(runs: list[dict]) -> dict:
    """The cells of a NER row: its one run's, or over its seeds' runs (mean ± std, each run's epochs)."""
    from multigrain.platform.papers import paper_number

    runs = sorted(runs, key=lambda r: int(r["tags"].get("seed") or 0)) if len(runs) > 1 else runs
    run = runs[0]
    tags, metrics = run["tags"], run["metrics"]
    config = results_config(tags)
    paper = None if config else paper_number(run["experiment"], tags["spec_name"])
    best = metrics.get("best_epoch")
    row = {"dataset": tags["dataset"], "model": display_model(tags), "dev_f1": metrics.get("best_validation_f1"),
           "test_f1": metrics.get("test_f1"), "paper": paper or "–",
           "epochs": int(metrics.get("epochs_completed", int(tags.get("num_epochs", 0)))),
           "best_epoch": "–" if best is None else int(best), "minutes": metrics.get("seconds", 0.0) / 60,
           "note": tags.get("note", ""), "sources": {f"{r['tags']['device']} ({r['tags'].get('date', '–')})"
                                                     for r in runs if r["tags"].get("device")}}
    if len(runs) > 1:
        pick = lambda name: [r["metrics"][name] for r in runs if name in r["metrics"]]  # noqa: E731
        done = sorted({int(e) for e in pick("epochs_completed")})
        row.update(dev_f1=mean_std(pick("best_validation_f1")), test_f1=mean_std(pick("test_f1")),
                   epochs=", ".join(map(str, done)) or "–", best_epoch=", ".join(str(int(e)) for e in pick("best_epoch")),
                   minutes=statistics.fmean(pick("seconds") or [0.0]) / 60,
                   note="; ".join(filter(None, [f"{len(runs)} seeds ({', '.join(r['tags'].get('seed', '?') for r in runs)})",
                                                row["note"]])))
    elif tags.get("seed", "13") != "13" and tags.get("suite_entry"):  # one suite run, not of the default seed
        row["note"] = "; ".join(filter(None, [f"1 seed ({tags['seed']})", row["note"]]))
    return row


def superseded(rows: dict[str, list[dict]]) -> set[str]:
    """The ``K[seedN]`` rows (a seed as a row of its own) whose seed a later row ``K`` of several
    runs (a suite's) holds."""
    when = lambda runs: max(int(r["tags"].get("results_time", 0)) for r in runs)  # noqa: E731
    out = set()
    for key, runs in rows.items():
        m = re.fullmatch(r"(.+)\[seed(\d+)\]", key)
        base = rows.get(m.group(1)) if m else None
        if base and len(base) > 1 and m.group(2) in {r["tags"].get("seed") for r in base} and when(base) > when(runs):
            out.add(key)
    return out


def results_config(tags: dict) -> str:
    """The bracketed part of a row's ``results_key`` (``seed14`` of ``resume_plte_vec[seed14]``), else its
    ``config`` tag: a table row keeps its label also where the leaderboard reads the run as a seed of
    its spec (the committed file's ``[seedN]`` runs carry no ``config``: a seed is no configuration)."""
    key = tags.get("results_key", "")
    return key[key.index("[") + 1:-1] if key.endswith("]") and "[" in key else (tags.get("config") or "")


def display_model(tags: dict) -> str:
    name, prefix = tags["spec_name"], f"{tags['dataset']}_"
    variant = name[len(prefix):] if name.startswith(prefix) else name
    config = results_config(tags)
    return f"{variant} [{config}]" if config else variant


def ner_table(rows: dict) -> list[str]:
    lines = ["| dataset | model | dev F1 | test F1 | paper test F1 | epochs (best) | minutes | note |",
             "|---|---|---|---|---|---|---|---|"]
    order = {(d, m): (i, j) for i, d in enumerate(NER_DATASETS) for j, m in enumerate(NER_MODELS)}
    datasets = {d: i for i, d in enumerate(NER_DATASETS)}
    rank = lambda k: (*order.get(tuple(k.split("[")[0].split("_", 1)),  # noqa: E731 tagged rows last, then other models
                                 (datasets.get(k.split("_")[0], 99), 99)), k)
    for key in sorted(rows, key=rank):
        r = rows[key]
        lines.append(f"| {r['dataset']} | {r['model']} | {pct(r['dev_f1'])} | {pct(r['test_f1'])} | {r['paper']} | "
                     f"{r['epochs']} ({r['best_epoch']}) | {r['minutes']:.1f} | {r['note']} |")
    return lines


def seed_spread(rows: dict) -> list[str]:
    """Test F1 mean ± sample std of each spec run with several seeds: its ``[seedN]`` rows (``--tag seedN
    -o seed=N``), and its untagged row (the spec's own seed, 13) unless a ``[seed13]`` row replaces it."""
    groups: dict[str, dict[int, float]] = {}
    for key, r in rows.items():
        m = re.fullmatch(r"(.+)\[seed(\d+)\]", key)
        if m and isinstance(r.get("test_f1"), (int, float)):
            groups.setdefault(m.group(1), {})[int(m.group(2))] = r["test_f1"]
    lines = []
    for stem in sorted(groups):
        seeds = groups[stem]
        if 13 not in seeds and isinstance(rows.get(stem, {}).get("test_f1"), (int, float)):
            seeds[13] = rows[stem]["test_f1"]
        if len(seeds) < 2:
            continue
        values = [seeds[k] for k in sorted(seeds)]
        lines.append(f"- {stem}: test F1 {mean_std(values)} over seeds {', '.join(map(str, sorted(seeds)))} "
                     f"({', '.join(pct(v) for v in values)})")
    return ["", "Seed spread (rows tagged `seedN`, the spec's untagged row counting as seed 13 unless a `[seed13]` "
                "row re-ran it):", *lines] if lines else []


def ner_section(recs: list[dict]) -> list[str]:
    built = {key: runs for key, runs in table_rows(recs, "ner").items() if runs}
    hidden = superseded(built)
    rows = {key: ner_row(runs) for key, runs in built.items() if key not in hidden}
    devices = sorted(set().union(*(r["sources"] for r in rows.values())))
    body = ["", f"{SUITE_COMMANDS.format(suite='ner')} (rows from {', '.join(devices) or '–'}); span-level micro F1 "
                "in percent, test F1 of the epoch with the best dev F1 (a row of several seeds: mean ± std, each "
                "seed's epochs). No pretrained embeddings are available "
                "offline: models start from random character/bigram/word vectors, or (`*_vec`) from SGNS vectors "
                "trained by `benchmarks/pretrain_vectors.py` on the shared training text (4.8 M characters), whereas "
                "the papers used Giga-word word2vec (PLTE, Lattice LSTM) or BERT (BiG Tab. IV: BiG, Transformer, "
                "Star-Transformer), so compare our rows with each other. BiG's Table IV prints its Resume and MSRA "
                "columns swapped: its numbers stand here under the dataset they belong to, marked 'printed under' "
                "the other (`benchmarks/paper_numbers.json`). The `*_m3e` rows carry the papers' [BERT] rows "
                "(BERT-base, 12 layers of 768; m3e-small is 4 of 512). Settings and their sources: `jsonnet_configs/lib/ner_models.libsonnet`. "
                "MLflow experiments `ner/<dataset>`.", ""]
    return body + ner_table(rows) + seed_spread(rows)


# ------------------------------------------------------------------------------------- sentences
def sentence_note(found: list[str]) -> list[str]:
    """The text above the sentence table; ``found``: the devices and dates its rows were measured on."""
    return [
        "",
        f"{SUITE_COMMANDS.format(suite='sentence')} (rows from {', '.join(found) or '–'}). Mean ± std "
        "over the seeds run (13, 14, ...; the seeds column), in percent; each row's epochs column is its "
        "trainer.num_epochs. Backbones: `m3e_*` rows fine-tune m3e-small (a pretrained 4-layer, 512-d Chinese "
        "RoBERTa; optional extra `multigrain[m3e]`); the others a randomly initialised char_transformer, so "
        "their absolute numbers are far below the papers' BERT-based ones: compare rows on the same backbone. "
        "MWA on classification and pairs pools keys (the released code): with the paper's query pooling "
        "([small-query] rows) the [CLS] row the classifier reads is never word-aligned, so those rows measure "
        "an extra attention layer, not the word alignment. `big_vec`: `big` with 50-d SGNS character vectors from "
        "`benchmarks/pretrain_vectors.py`. `m3e_big`: BiG's two bipartite layers over m3e-small's character states "
        "(the paper's BiG-Transformer (BERT) setting, 94.92; its word2vec setting, 89.50, is `big_vec`); `big_m3e_vec`: `big_vec` with m3e-small's static 512-d input embeddings "
        "(`benchmarks/export_m3e_vectors.py`) for the SGNS vectors (its seed 15 ran alone on 2 threads after epoch 1). ChnSentiCorp `big`/`big_vec`: the BiG paper's Table I word2vec settings (batch 128, "
        "rate 7e-4) for 40 epochs with patience 5, chosen by dev accuracy over the tagged rows beside them; `[ema-e20]`: the same "
        "for the paper's 20 epochs with `trainer.moving_average` 0.995 (validation, best.pt and test use an exponential "
        "moving average of the weights; its first 3 seeds gave 90.17, seeds 16-19 were run to check it; all on a CPU, 1 thread each but seed 16 on 2); `[ema-e20-h6]`: that with the paper's 6 heads (240-d model; 4 seeds, 2 threads each, one at a time, but seed 16 on 1 thread for its first 3 epochs); `[ema-e20-h6-v300]`: that with 300-d SGNS character vectors (`pretrain_vectors.py --dim 300 --namespaces chars --out runs/vectors300`, the spec's `vectors` ext-var `runs/vectors300`; 3 seeds at once, 1 thread each; all three stopped early, patience 5); `[ema-e20-h6-bigram]`: `[ema-e20-h6]` with 50-d SGNS bigram vectors beside the character ones (`char_bigram` bigram_dim 50, `runs/vectors/bigrams.vec`; the BiG paper names only character vectors; its first 3 seeds gave 90.67, seed 16 was run to check it; 2 threads each, one at a time, seed 15 stopped after epoch 3 and resumed from its last.pt in a later session: about 4.3 min per epoch, against 1.5 for `[ema-e20-h6]` on an earlier session's machine). Rows trained on "
        "a GPU ran 3-12 trainings at once on it, so their min/run is a shared GPU's time. THUCNews test = the 10% hash bucket of test.txt (rows trained before 2026-11-26; the shipped specs now give test_dataset_reader and score all 10,000 headlines); "
        "CMRC 2018 test = the trial set (the official test set is hidden).",
        "",
    ]


def sentence_row(key: str, runs: list[dict]) -> dict:
    """The cells of a sentence row: mean ± std over its seeds' runs, or the ``summary_*`` tags of a
    row migrated without its per-seed values."""
    last = max(runs, key=lambda r: (int(r["tags"].get("results_time", 0)), r["start_time"] or 0))
    tags = last["tags"]
    row = {"experiment": last["experiment"], "variant": key.split("[")[0].split("_", 1)[-1],
           "tag": tags.get("config"), "overrides": json.loads(tags.get("overrides") or "[]"),
           "epochs": tags.get("num_epochs", "")}
    if "summary_test_a" in tags:
        row.update(cells=(tags["summary_test_a"], tags["summary_test_b"], tags["summary_dev"],
                          int(tags["summary_seeds"]), float(tags["summary_minutes"])),
                   sources={f"{tags['device']} ({tags['date']})"})
        return row
    a, b, dev = sentence_metrics(last["experiment"].split("/")[0])
    ordered = sorted(runs, key=lambda r: int(r["tags"]["seed"]))
    pick = lambda name: [r["metrics"][name] for r in ordered if name in r["metrics"]]  # noqa: E731
    row.update(cells=(mean_std(pick(a)), mean_std(pick(b)), mean_std(pick(dev)), len(ordered),
                      statistics.fmean(pick("seconds") or [0.0]) / 60),
               sources={f"{r['tags']['device']} ({r['tags']['date']})" for r in ordered})
    return row


def sentence_table(rows: list[dict]) -> list[str]:
    lines = ["| experiment | model | test acc / EM | test macro-F1 / F1 | dev acc / F1 | seeds | epochs | min/run |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        model = f"{r['variant']} [{r['tag']}]" if r.get("tag") else r["variant"]
        test_a, test_b, dev, seeds, minutes = r["cells"]
        lines.append(f"| {r['experiment']} | {model} | {test_a} | {test_b} | {dev} | {seeds} | {r['epochs']} | "
                     f"{minutes:.1f} |")
    tags = {r["tag"]: r["overrides"] for r in rows if r.get("tag")}
    if tags:
        lines.append("")
        lines += [f"- `[{tag}]`: " + " ".join(f"`-o {o}`" for o in overrides) for tag, overrides in sorted(tags.items())]
    return lines


def sentence_section(recs: list[dict]) -> list[str]:
    order = {p.stem: i for i, p in enumerate(sentence_spec_paths())}
    datasets = {f"{task}/{name}": i for i, (task, name) in enumerate(SENTENCE_DATASETS)}
    built = {key: sentence_row(key, runs) for key, runs in table_rows(recs, "sentence").items() if runs}
    rank = lambda kv: (datasets.get(kv[1]["experiment"], len(datasets)), kv[1].get("tag") or "",  # noqa: E731
                       order.get(kv[0].split("[")[0], len(order)))
    rows = [r for _, r in sorted(built.items(), key=rank)]
    return sentence_note(sorted(set().union(*(r["sources"] for r in rows)))) + sentence_table(rows)


# ------------------------------------------------------------------------------------------ files
def store_records(uri: str) -> list[dict]:
    """The records of the results runs in the store at ``uri`` (which must exist)."""
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.records import records
    from multigrain.platform.tracking import open_store

    client = open_store(uri, create=False)
    if client is None:
        raise ConfigurationError(f"no MLflow store at {uri}")
    return records(client, filter_string=RESULTS_RUNS)


def board_records(board: Path) -> list[dict]:
    """The runs of a portable leaderboard file, imported into a temporary MLflow store and read back."""
    from multigrain.platform.portable import import_runs, read_board
    from multigrain.platform.tracking import open_store

    runs = read_board(board)
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{Path(tmp) / 'board.db'}"
        import_runs(open_store(uri), runs)
        return store_records(uri)


def write_tables(recs: list[dict], results: Path = RESULTS) -> None:
    write_section(NER_SECTION, ner_section(recs), results)
    write_section(SENTENCE_SECTION, sentence_section(recs), results)


def publish(client, board: str | Path, results: Path) -> None:
    """Export the store's results runs into ``board`` (whole or not at all) and rewrite the NER and
    sentence tables of ``results`` from the store."""
    from multigrain.platform.portable import write_board
    from multigrain.platform.records import records

    recs = records(client, filter_string=RESULTS_RUNS, history=True)
    write_board(board, recs)
    write_tables(recs, Path(results))


def main(argv=None) -> int:
    from multigrain.platform.errors import MultigrainError

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", help=f"portable leaderboard file (default: the committed one, {BOARD.relative_to(ROOT)})")
    parser.add_argument("--tracking-uri", help="read this MLflow store instead of importing --board; with --suite: the "
                                               "store of the suite's runs (default ./mlruns.db)")
    parser.add_argument("--suite", action="append", default=[], metavar="SUITE",
                        help="record this suite's finished runs as rows, merge them into --board, rewrite the tables")
    parser.add_argument("--only", nargs="+", metavar="PATTERN",
                        help="with --suite: only these entries (as multigrain suite --only)")
    parser.add_argument("--runs-dir", default="runs", help="with --suite: where its run directories are (default runs/)")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args(argv)
    if not args.suite and args.board and args.tracking_uri:
        parser.error("--board or --tracking-uri (both only with --suite: the board merged into that store)")
    if args.only and not args.suite:
        parser.error("--only goes with --suite")
    board = Path(args.board or BOARD)
    try:
        if args.suite:
            from results_md import open_results, record_suite

            client = open_results(args.tracking_uri, board)
            for suite in args.suite:
                record_suite(client, suite, args.only, args.runs_dir, args.tracking_uri,
                             lambda line: print(line, flush=True))
            publish(client, board, Path(args.results))
            print(f"{args.results}: {NER_SECTION[3:]} and {SENTENCE_SECTION[3:]} written; results runs exported to "
                  f"{board}")
            return 0
        recs = store_records(args.tracking_uri) if args.tracking_uri else board_records(board)
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_tables(recs, Path(args.results))
    print(f"{args.results}: {NER_SECTION[3:]} and {SENTENCE_SECTION[3:]} written from "
          f"{args.tracking_uri or board} ({len(recs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
