"""Every row of benchmarks/RESULTS.md's NER, sentence, translation and Lattice-BERT tables is a run
that ``multigrain suite jsonnet_configs/suites/all.jsonnet --dry-run`` lists (``suite.plan``, nothing
trained), with the row's seeds and settings.

Each results section names the suite that makes its rows: its ``Suite:`` line (one or more backticked
``multigrain suite FILE --only PATTERN``; the runs they select must be exactly the table's runs), or,
in the generated NER and sentence sections, the command in their first paragraph (every entry of that
suite need not be a row yet). A row maps to a suite entry's name and ``[tag]`` as each kind of table
names it:

- NER: ``<dataset>_<model> [tag]`` (a ``[seedN]`` row: seed N of the untagged entry), the seeds its
  note lists (else 13), ``-o`` settings and ``--epochs`` of its note;
- sentence: ``<dataset>_<model> [tag]``, seeds 13 .. 12 + its seeds column, its epochs column, the
  ``-o`` settings the legend gives its ``[tag]``;
- translation: the selected entry of ``mt_results.spec_path(encoder, size, variant)``, the seeds,
  epochs, batch and training pairs of the ``Settings:`` line, the table's test sets in its spec;
- Lattice-BERT: a pre-training row is the selected run of the model's pre-training spec whose spec is
  the one ``lattice_bert.pretrain_spec`` builds for the section's budget; a fine-tuning cell (task,
  model) the runs of the task's fine-tuning spec that read that pre-training, with the seeds and cuts
  of the section's ``benchmarks/results/lattice_bert*.json`` (the report its tables were made from).
"""
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import lattice_bert  # noqa: E402
import mt_results  # noqa: E402

from multigrain.platform.specs import parse_override, spec_hash  # noqa: E402
from multigrain.platform.suite import entry_labels as suite_entry_labels, load_suite, plan  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
ALL = ROOT / "jsonnet_configs" / "suites" / "all.jsonnet"
#: the results sections (title prefixes) and those of them that measure speed, not results
KINDS = ("NER results", "Sentence results", "Translation", "Lattice-BERT")
NOT_RESULTS = ("speed", "throughput", "decoding", "cuda")
#: the sections this test knows today: a renamed or lost one must not pass unnoticed
KNOWN = ["## NER results", "## Sentence results", "## Lattice-BERT", "## Translation (zh→en)",
         "## Lattice-BERT at 2.4M characters", "## Lattice-BERT at 800,000 characters, batches of 16",
         "## Translation on a GPU: base, one epoch of 280,000 pairs",
         "## Lattice-BERT at 4,000,000 characters, batches of 16", "## Translation on the CPU: 40 minutes",
         "## Translation on the CPU: 40 minutes, the second recipe",
         "## Translation on a GPU: small, one epoch of every TVsub pair",
         "## Translation on a GPU: small, two epochs of every TVsub pair"]
ABSENT = "<absent>"  # a spec key a run does not have
#: sections whose rows were measured with an earlier version of their entries' specs: the settings
#: must differ (when the table is remade from the suite's runs, take the section out of here)
EARLIER_SPECS: dict[str, str] = {}


@dataclass
class Row:
    """What one table row (or Lattice-BERT fine-tuning cell) needs from the suite."""

    row: str  # the row as the table shows it, for the messages
    label: str  # the suite entry's name and [tag]
    seeds: set
    settings: dict = field(default_factory=dict)  # dotted spec key -> the value each of its runs has
    spec_hash: Optional[str] = None  # the one run's exact spec, where the table's maker rebuilds it
    test_sets: set = field(default_factory=set)  # test sets its runs' specs must name


# ----------------------------------------------------------------------------------- RESULTS.md
def sections() -> dict[str, list[str]]:
    out, title = {}, None
    for line in RESULTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title = line.strip()
            out[title] = []
        elif title:
            out[title].append(line)
    return out


def results_sections() -> dict[str, list[str]]:
    return {title: lines for title, lines in sections().items()
            if title[3:].startswith(KINDS) and not any(w in title.lower() for w in NOT_RESULTS)}


def tables(lines: list[str]) -> list[list[dict]]:
    """The markdown tables of a section: rows as {header cell: cell}."""
    out, block = [], []
    for line in lines + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if len(block) > 2:
            out.append([dict(zip(block[0], cells)) for cells in block[2:]])
        block = []
    return out


def table(lines: list[str], first_header: str) -> list[dict]:
    found = [t for t in tables(lines) if t and next(iter(t[0])) == first_header]
    assert len(found) == 1, f"expected one table whose first column is {first_header!r}, found {len(found)}"
    return found[0]


def suite_commands(lines: list[str]) -> list[tuple[Path, Optional[str]]]:
    """(suite file, --only) of the section's ``Suite:`` line, else of the first ``multigrain suite``
    command in it."""
    marked = [line for line in lines if line.startswith("Suite:")]
    texts = [c for line in (marked or lines) for c in re.findall(r"`(multigrain suite [^`]+)`", line)]
    out = []
    for text in texts if marked else texts[:1]:
        words = shlex.split(text)
        only = words[words.index("--only") + 1] if "--only" in words else None
        out.append((ROOT / words[2], only))
    return out


def model_and_tag(cell: str) -> tuple[str, str]:
    m = re.fullmatch(r"(\S+)(?: \[([\w-]+)\])?", cell)
    assert m, f"a model cell {cell!r}"
    return m.group(1), m.group(2) or ""


def labelled(stem: str, tag: str) -> str:
    return f"{stem} [{tag}]" if tag else stem


def override_settings(texts: list[str]) -> dict:
    """``-o`` texts as {dotted key: value}."""
    return dict((key.lstrip("+"), value) for key, value in map(parse_override, texts))


# ------------------------------------------------------------------------------------- the suites
@lru_cache(maxsize=None)
def all_runs() -> dict[tuple[str, int], object]:
    """(label, seed) -> run of all.jsonnet's plan: what ``--dry-run`` lists."""
    runs = plan(ALL, load_suite(ALL), "runs", check_data_paths=False)
    return {(r.entry, r.seed): r for r in runs}


@lru_cache(maxsize=None)
def selected(path: Path, only: str) -> tuple:
    return tuple(plan(path, load_suite(path), "runs", only=only, check_data_paths=False))


@lru_cache(maxsize=None)
def entry_labels(path: Path) -> frozenset:
    """The entries' names and tags of a suite file (as ``plan`` names them), without planning it."""
    return frozenset(name for _, _, name, _ in suite_entry_labels(load_suite(path)))


def spec_value(spec: dict, key: str):
    node = spec
    for part in key.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return ABSENT
    return node


def stem_of(run) -> str:
    return Path(run.spec_path).name.split(".")[0]


# ---------------------------------------------------------------------------------- the row maps
def ner_rows(lines: list[str], selection) -> list[Row]:
    out = []
    for r in table(lines, "dataset"):
        variant, tag = model_and_tag(r["model"])
        stem, note = f"{r['dataset']}_{variant}", r["note"]
        seed = re.fullmatch(r"seed(\d+)", tag)
        listed = re.search(r"(\d+) seeds? \(([\d, ]+)\)", note)
        seeds = {int(seed.group(1))} if seed else {int(s) for s in listed.group(2).split(", ")} if listed else {13}
        if listed:
            assert len(seeds) == int(listed.group(1)), note
        settings = {} if seed else override_settings(re.findall(r"-o ([^\s;,()]+)", note))
        epochs = re.match(r"--epochs (\d+)", note)
        if epochs:
            settings["trainer.num_epochs"] = int(epochs.group(1))
        out.append(Row(f"{r['dataset']} | {r['model']}", stem if seed else labelled(stem, tag), seeds, settings))
    return out


def sentence_rows(lines: list[str], selection) -> list[Row]:
    legend = {m.group(1): override_settings(re.findall(r"`-o ([^`]+)`", m.group(2)))
              for m in (re.match(r"- `\[([\w-]+)\]`: (.*)", line) for line in lines) if m}
    out = []
    for r in table(lines, "experiment"):
        variant, tag = model_and_tag(r["model"])
        settings = {"trainer.num_epochs": int(r["epochs"]), **(legend[tag] if tag else {})}
        out.append(Row(f"{r['experiment']} | {r['model']}", labelled(f"{r['experiment'].split('/')[1]}_{variant}", tag),
                       set(range(13, 13 + int(r["seeds"]))), settings))
    return out


def mt_rows(lines: list[str], selection) -> list[Row]:
    assert selection is not None, "a translation section names its runs on a `Suite:` line (with --only)"
    settings = next(re.search(r"Settings: size `(\w+)(?: \((\w+) recipe\))?`, (\d+) epochs, batch (\d+|at most [\d,]+ "
                              r"tokens \(source \+ target\)), ((?:all )?[\d,]+) TVsub training pairs, seeds ([\d, ]+);", line)
                    for line in lines if line.startswith("Settings:"))
    size, variant, epochs, batch, pairs, seeds = settings.groups()
    batching = ({"data_loader.batch_size": int(batch)} if batch.isdigit()  # pairs, or a token budget
                else {"data_loader.max_tokens": int(re.search(r"[\d,]+", batch).group().replace(",", ""))})
    seeds = {int(s) for s in seeds.split(", ")}
    rows = table(lines, "encoder")
    after = next((line for line in lines if line.startswith("Scored after training")), "")
    tested = {re.match(r"(\w+) \(", h).group(1) for h in rows[0] if re.fullmatch(r"\w+ \(\d refs?\)", h)}
    tested -= set(re.findall(r"\b(\w+\d+)\b", after.split(":", 1)[-1]))
    out = []
    for r in rows:
        if not r["seeds"].isdigit():  # BiG − Transformer (means)
            continue
        assert int(r["seeds"]) == len(seeds), f"{r['encoder']}: {r['seeds']} seeds, Settings: {sorted(seeds)}"
        stem = mt_results.spec_path(r["encoder"], size, variant).stem
        labels = {run.entry for run in selection if stem_of(run) == stem}
        assert len(labels) == 1, f"{r['encoder']}: the Suite line selects {sorted(labels)} of {stem}.jsonnet"
        out.append(Row(f"{r['encoder']} ({stem})", labels.pop(), seeds,
                       {"trainer.num_epochs": int(epochs), **batching,
                        # every pair: the spec cuts nothing
                        "dataset_reader.max_instances": ABSENT if pairs.startswith("all ")
                        else int(pairs.replace(",", ""))}, test_sets=tested))
    return out


def lattice_bert_rows(lines: list[str], selection) -> list[Row]:
    assert selection is not None, "a Lattice-BERT section names its runs on a `Suite:` line (with --only)"
    budget = next(re.search(r"Pre-training \((\w+), budget ([\d,]+) characters x (\d+) epochs(?:, batches of (\d+) "
                            r"pairs)?", line) for line in lines if line.startswith("Pre-training ("))
    size, chars, epochs, batch = budget.groups()
    chars, epochs, batch = int(chars.replace(",", "")), int(epochs), int(batch) if batch else None
    reports = [json.loads(p.read_text(encoding="utf-8"))
               for p in sorted((ROOT / "benchmarks" / "results").glob("lattice_bert*.json"))]
    report = [d for d in reports if d["setup"]["chars_budget"] == chars and d["setup"].get("batch_size") == batch]
    assert len(report) == 1, f"{len(report)} reports of {chars:,} characters, batch {batch}"
    setup, finetuned = report[0]["setup"], report[0]["finetuning"]
    out, pretraining = [], {}
    for r in table(lines, "model"):
        stem = lattice_bert.PRETRAINED[r["model"]][0].format(size=size)
        runs = [run for run in selection if stem_of(run) == stem]
        assert len(runs) == 1, f"{r['model']}: the Suite line selects {len(runs)} runs of {stem}.jsonnet"
        pretraining[r["model"]] = runs[0]
        expected = lattice_bert.pretrain_spec(r["model"], size, chars, epochs, batch)
        out.append(Row(f"pre-training {r['model']}", runs[0].entry, {expected["seed"]},
                       spec_hash=spec_hash(expected)))
    for r in table(lines, "task"):
        for model, cell in r.items():
            if model in ("task", "metric") or cell == "–":
                continue
            task, vocabulary = lattice_bert.FINETUNE[r["task"]], pretraining[model].run_dir + "/vocabulary"
            labels = {run.entry for run in selection
                      if stem_of(run) == task and spec_value(run.spec, "vocabulary.directory") == vocabulary}
            assert len(labels) == 1, f"{r['task']} x {model}: the Suite line selects {sorted(labels)}"
            words = lattice_bert.PRETRAINED[model][1] == "lattice_bert"
            seeds = {int(s) for s in finetuned[r["task"]][model]["seeds"]}
            out.append(Row(f"{r['task']} x {model}", labels.pop(), seeds,
                           {"trainer.num_epochs": setup["finetune_epochs"],
                            "trainer.optimizer.lr": setup["finetune_lr"],
                            "dataset_reader.max_instances": setup["finetune_max_instances"],
                            "vocabulary.directory": vocabulary,  # it reads the pre-training of its column
                            "dataset_reader.lattice_builder.type": "lexicon" if words else ABSENT}))
    return out


ROWS = {"NER results": ner_rows, "Sentence results": sentence_rows, "Translation": mt_rows,
        "Lattice-BERT": lattice_bert_rows}


# --------------------------------------------------------------------------------------- checking
def selection_of(commands) -> Optional[list]:
    """The runs the section's ``--only`` commands select (each once), or None where it has none."""
    narrowed = [(path, only) for path, only in commands if only]
    if not narrowed:
        return None
    runs = {r.spec_hash: r for path, only in narrowed for r in selected(path, only)}
    return list(runs.values())


def problems_of(title: str, lines: list[str]) -> tuple[list[str], list[str], int]:
    """(missing or unselected runs, settings that differ from the table's, rows) of one section."""
    commands = suite_commands(lines)
    assert commands, f"{title}: no `Suite:` line and no `multigrain suite` command"
    selection = selection_of(commands)
    kind = next(k for k in ROWS if title[3:].startswith(k))
    rows = ROWS[kind](lines, selection)
    assert rows, f"{title}: no rows read"
    everything, missing, differ = all_runs(), [], []
    labels = set().union(*(entry_labels(path) for path, _ in commands))
    for row in rows:
        if row.label not in labels:
            missing.append(f"{row.row}: no entry {row.label!r} in {', '.join(p.name for p, _ in commands)}")
        for seed in sorted(row.seeds):
            run = everything.get((row.label, seed))
            if run is None:
                missing.append(f"{row.row}: all.jsonnet plans no run {row.label} seed={seed}")
                continue
            if row.spec_hash and run.spec_hash != row.spec_hash:
                differ.append(f"{row.row}: {row.label} seed={seed} is spec {run.spec_hash[:12]}, the table's maker "
                              f"builds {row.spec_hash[:12]}")
            for key, value in row.settings.items():
                found = spec_value(run.spec, key)
                if found != value:
                    differ.append(f"{row.row}: {row.label} seed={seed} has {key}={json.dumps(found)[:80]}, the table "
                                  f"{json.dumps(value)[:80]}")
            untested = row.test_sets - set(run.spec.get("test_sets") or {})
            if untested:
                differ.append(f"{row.row}: {row.label} seed={seed} is not tested on {sorted(untested)}")
    if selection is not None:  # the Suite line selects the table's runs and no other, as all.jsonnet plans them
        wanted = {(row.label, seed) for row in rows for seed in row.seeds}
        missing += [f"the Suite line selects {r.label}, which is no row of the table"
                    for r in selection if (r.entry, r.seed) not in wanted]
        missing += [f"the Suite line's {r.label} is not all.jsonnet's run of that name" for r in selection
                    if getattr(everything.get((r.entry, r.seed)), "spec_hash", None) != r.spec_hash]
    return missing, differ, len(rows)


SECTIONS = results_sections()


def test_the_results_sections_are_found():
    assert set(KNOWN) <= set(SECTIONS), f"not found: {sorted(set(KNOWN) - set(SECTIONS))}"
    assert "## Translation decoding speed" not in SECTIONS and "## NER speed" not in SECTIONS
    assert all(suite_commands(lines) for lines in SECTIONS.values())


@pytest.mark.parametrize("title", list(SECTIONS))
def test_every_row_is_a_run_of_the_all_suite(title):
    missing, differ, rows = problems_of(title, SECTIONS[title])
    assert not missing, f"{title} ({rows} rows):\n" + "\n".join(missing)
    if title in EARLIER_SPECS:
        assert differ, (f"{title}: its rows now have the suite runs' settings (they were {EARLIER_SPECS[title]}): "
                        f"take it out of EARLIER_SPECS")
    else:
        assert not differ, f"{title} ({rows} rows):\n" + "\n".join(differ)
