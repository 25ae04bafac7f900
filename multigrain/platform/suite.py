"""Suites: a Jsonnet list of specs x seeds x named override sets, planned into runs here and
trained on Ray by ``ray/suite.py`` (``multigrain suite``).

A suite file evaluates to::

    {
      entries: [
        { spec: '../ner/resume_plte.jsonnet',          // relative to the suite file's folder
          seeds: [13, 14, 15],                          // default [the spec's seed]
          configs: { '': {}, 'sgd': { 'trainer.optimizer.type': 'sgd' } },  // tag -> overrides
          overrides: { 'trainer.num_epochs': 2 },       // applied to every config
          ext_vars: { variant: 'mwa' },
          resources: { cpus: 1, gpus: 0.25, memory_gb: 4 } },
        { spec: '../finetune/resume_ner.jsonnet', seeds: [13],
          ext_vars: { pretrained: { run_of: 'lattice_bert_tiny' }, encoder: 'lattice_bert' } },
      ],
    }

An ext-var ``{ run_of: NAME }`` is the run directory of the earlier entry NAME (an entry's name with
its ``[tag]``) at the same seed, or at its only seed: the run starts when that one has finished (a
fine-tuning after its pre-training), and ``--only`` of the later entry plans the earlier one too.

Every (entry, config, seed) is one run: the resolved spec's hash is its identity and its run
directory is ``<runs>/<spec stem>[-<tag>]-<hash8>`` (a ``multigrain train`` of the same spec
without ``-s`` uses the same directory, so either reuses the other's run). The ``config`` tag is
the leaderboard's ``[tag]``; ``run_tags`` are what a run's MLflow row carries besides (spec name,
configuration, overrides, epochs, device, date), so every suite run can be a results-table row.

``check`` compares the runs' test scores with a committed board (``leaderboard --export``'s
format): an entry is *reproduced* when its mean lies inside the committed mean +- 2 sd (+- 0.5
points for a single committed seed), else *differs*; *missing* when no run of it has finished;
*new* when the board has no row of it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from multigrain.platform.errors import ConfigurationError, Problem, SpecError, did_you_mean

ENTRY_KEYS = ("spec", "seeds", "configs", "overrides", "ext_vars", "resources", "name")
RESOURCE_KEYS = {"cpus": "num_cpus", "gpus": "num_gpus", "memory_gb": "memory"}


@dataclass
class SuiteRun:
    """One (entry, config, seed): a resolved spec and where it trains."""

    entry: str  # the entry's name: its spec's stem and [tag]
    index: int
    spec_path: str
    tag: str
    seed: int
    spec: dict
    spec_hash: str
    run_dir: str
    options: dict = field(default_factory=dict)  # Ray options: num_cpus, num_gpus, memory
    overrides: list = field(default_factory=list)  # the -o texts of its entry and configuration
    needs: list = field(default_factory=list)  # indices of the runs whose run directories it reads (run_of)

    @property
    def label(self) -> str:
        return f"{self.entry} seed={self.seed}"

    def result(self) -> Optional[dict]:
        """The run directory's metrics.json when it holds a finished run of this spec, else None (a
        damaged one is a ConfigurationError naming it: ``archive.read_result``)."""
        from multigrain.platform.archive import own_result

        return own_result(Path(self.run_dir), self.spec_hash)

    def state(self) -> str:
        """``finished`` (its metrics.json is this spec's, finished), ``partial`` (a checkpoint to
        resume), ``new``."""
        if self.result() is not None:
            return "finished"
        return "partial" if (Path(self.run_dir) / "last.pt").exists() else "new"


def load_suite(path: str | Path, jsonnet_paths: Sequence[str] = (), timeout: Optional[float] = 30.0) -> dict:
    """The suite file evaluated and its structure checked (every problem at once)."""
    from multigrain.platform.specs import evaluate_jsonnet

    suite = evaluate_jsonnet(path, {}, jsonnet_paths, timeout, what="suite file")
    problems = []
    entries = suite.get("entries")
    unknown = sorted(set(suite) - {"entries", "name", "description"})
    problems += [Problem(k, "unknown key; a suite has entries (and name, description)", "unknown_key")
                 for k in unknown]
    if not isinstance(entries, list) or not entries:
        problems.append(Problem("entries", "expected a non-empty list of {spec, seeds, ...}", "missing"))
        raise SpecError(problems, str(path))
    for i, entry in enumerate(entries):
        problems += entry_problems(entry, f"entries[{i}]")
    if not problems:  # one name, one entry (and configuration): run_of and --check find runs by it
        first: dict[str, int] = {}
        for i, _, name, _ in entry_labels(suite):
            if name in first and first[name] != i:
                problems.append(Problem(f"entries[{i}]", f"named {name!r} as entries[{first[name]}] is; give one of "
                                                         f"them a name of its own (name: '...')", "value"))
            first.setdefault(name, i)
    if problems:
        raise SpecError(problems, str(path))
    return suite


def entry_problems(entry: Any, where: str) -> list[Problem]:
    if not isinstance(entry, dict):
        return [Problem(where, f"expected an object {{spec, seeds, ...}}, got {json.dumps(entry)[:60]}", "type")]
    from multigrain.platform.errors import did_you_mean
    from multigrain.platform.specs import repeated_overrides

    out = [Problem(f"{where}.{k}", f"unknown key{did_you_mean(k, ENTRY_KEYS)}", "unknown_key")
           for k in entry if k not in ENTRY_KEYS]
    if not isinstance(entry.get("spec"), str) or not entry.get("spec"):
        out.append(Problem(f"{where}.spec", "expected the path of a spec file (relative to the suite's folder)",
                           "missing"))
    seeds = entry.get("seeds")
    if seeds is not None and (not isinstance(seeds, list) or not seeds or len(set(map(str, seeds))) != len(seeds)
                              or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)):
        out.append(Problem(f"{where}.seeds", f"expected a non-empty list of distinct whole numbers >= 0, got "
                                             f"{json.dumps(seeds)[:60]}", "value"))
    for key in ("configs", "ext_vars", "resources"):
        if key in entry and not isinstance(entry[key], dict):
            out.append(Problem(f"{where}.{key}", f"expected an object, got {json.dumps(entry[key])[:60]}", "type"))
    if "name" in entry and (not isinstance(entry["name"], str) or not entry["name"].strip()):
        out.append(Problem(f"{where}.name", f"expected a non-empty string, got {json.dumps(entry['name'])[:60]}",
                           "type"))
    if "overrides" in entry and not _overrides_ok(entry["overrides"]):
        out.append(Problem(f"{where}.overrides", OVERRIDES_FORM, "type"))
    elif "overrides" in entry:
        out += [Problem(f"{where}.overrides", str(p)) for p in repeated_overrides(override_texts(entry["overrides"]))]
    for tag, overrides in (entry.get("configs") or {}).items() if isinstance(entry.get("configs"), dict) else ():
        if not _overrides_ok(overrides):
            out.append(Problem(f"{where}.configs.{tag}", OVERRIDES_FORM, "type"))
        else:
            out += [Problem(f"{where}.configs.{tag}", str(p)) for p in repeated_overrides(override_texts(overrides))]
        if tag and not all(c.isalnum() or c in "-_" for c in tag):
            out.append(Problem(f"{where}.configs.{tag}", "a tag is letters, digits, '-' and '_'", "value"))
    for k, v in (entry.get("ext_vars") or {}).items() if isinstance(entry.get("ext_vars"), dict) else ():
        if not isinstance(v, str) and not (isinstance(v, dict) and "run_of" in v and set(v) <= {"run_of", "seed"}
                                           and isinstance(v["run_of"], str) and _seed_ok(v.get("seed", 0))):
            out.append(Problem(f"{where}.ext_vars.{k}", "an ext-var is a string, or {run_of: 'ENTRY NAME'} (the "
                                                         "run directory of an earlier entry: its run of the same "
                                                         "seed, or its only one; with seed: N, its run of seed N)",
                               "type"))
    for k, v in (entry.get("resources") or {}).items() if isinstance(entry.get("resources"), dict) else ():
        if k not in RESOURCE_KEYS:
            out.append(Problem(f"{where}.resources.{k}", f"unknown resource{did_you_mean(k, RESOURCE_KEYS)}",
                               "unknown_key"))
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            out.append(Problem(f"{where}.resources.{k}", f"expected a number >= 0, got {json.dumps(v)}", "value"))
        elif k == "gpus" and v > 1 and v % 1:
            out.append(Problem(f"{where}.resources.gpus", "above 1, a whole number of GPUs", "value"))
    return out


def _seed_ok(seed: Any) -> bool:
    return isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0


OVERRIDES_FORM = "expected overrides: an object {'KEY.PATH': value} or a list of 'KEY.PATH=VALUE' strings (as -o)"


def _overrides_ok(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and all(isinstance(v, str) and "=" in v
                                                                         for v in value))


def override_texts(value: dict | list) -> list[str]:
    """Suite overrides as ``-o`` texts."""
    return list(value) if isinstance(value, list) else [f"{k}={json.dumps(v)}" for k, v in value.items()]


def entry_labels(suite: dict) -> list[tuple[int, str, str, str]]:
    """Every entry and configuration of a loaded suite as :func:`plan` names them: (entry index, tag,
    name, spec stem), the name being the entry's ``name`` (else its spec's stem) and `` [tag]``."""
    out = []
    for i, entry in enumerate(suite["entries"]):
        stem = Path(entry["spec"]).name.split(".")[0]
        name = entry.get("name") or stem
        out += [(i, tag, f"{name} [{tag}]" if tag else name, stem) for tag in entry.get("configs") or {"": {}}]
    return out


def matches(label: str, pattern: str) -> bool:
    """``--only``'s test: ``label`` (an entry's name with its `` [tag]``) matches the fnmatch
    ``pattern``, whose brackets are literal (a configuration's tag, never a character class)."""
    from fnmatch import fnmatch

    return fnmatch(label, pattern.replace("[", "[[]"))


def selected_entries(suite_path: str | Path, suite: dict, only: str | Sequence[str] | None = None) -> set[str]:
    """The names of the entries (and configurations) ``only`` selects, as :func:`plan` reads it (all
    of them without it); not the entries they read (``run_of``), which ``plan`` adds."""
    items = [(suite["entries"][i], name, stem) for i, _, name, stem in entry_labels(suite)]
    names = [name for _, name, _ in items]
    patterns = [only] if isinstance(only, str) else list(only or [])
    chosen_by = {p: {name for entry, name, stem in items if p == name or matches(name, p)
                     or (entry.get("name") and matches(stem, p))} for p in patterns}
    unmatched = [p for p, chosen in chosen_by.items() if not chosen]
    if unmatched:
        raise ConfigurationError(f"--only {' '.join(map(repr, unmatched))}: no entry of {suite_path} matches (an "
                                 f"fnmatch pattern, or an entry's exact name); its entries: "
                                 f"{', '.join(dict.fromkeys(names))}")
    return set().union(*chosen_by.values()) if patterns else set(names)


def plan(suite_path: str | Path, suite: dict, runs_root: str | Path = "runs", only: str | Sequence[str] | None = None,
         jsonnet_paths: Sequence[str] = (), timeout: Optional[float] = 30.0,
         check_data_paths: bool = True, seeds: Optional[Sequence[int]] = None,
         overrides: Sequence[str] = ()) -> list[SuiteRun]:
    """Every run of the suite, specs resolved and validated (all problems at once, each under its
    entry's path); ``only``: one or several (the entries any of them selects, each of which must select
    one) entry's exact name (``resume_plte [no_porous]``) or fnmatch pattern
    on the names (``resume_*`` takes the tagged configurations too, ``resume_*_m3e`` only the untagged
    ones, ``resume_*_m3e [e1]`` those tagged ``e1``: brackets are literal), or on the spec stems of
    entries with a ``name`` of their own;
    ``check_data_paths`` false (``--dry-run``): data files and vectors need not exist yet; ``seeds``:
    only the runs of these seeds (``--seeds 13``: a first pass of every entry, the others later);
    ``overrides``: ``-o`` texts applied to every run after its entry's (a rehearsal's data cut), part
    of each run's spec and hash."""
    folder = Path(suite_path).resolve().parent
    items = [(i, suite["entries"][i], tag, (suite["entries"][i].get("configs") or {"": {}})[tag], name, stem)
             for i, tag, name, stem in entry_labels(suite)]  # (entry index, entry, tag, tagged overrides, name, stem)
    patterns = [only] if isinstance(only, str) else list(only or [])
    selected = selected_entries(suite_path, suite, only)
    chosen = set(selected)
    for i, entry, _, _, name, _ in reversed(items):  # what the chosen entries read (run_of), transitively
        if name in chosen:
            chosen |= {v["run_of"] for v in (entry.get("ext_vars") or {}).values() if isinstance(v, dict)}
    planned: dict[str, dict[int, SuiteRun]] = {}
    runs, problems, seen, bases = [], [], {}, {}
    for i, entry, tag, tagged, name, stem in items:
        if name not in chosen:
            continue
        where, spec_file = f"entries[{i}]", folder / entry["spec"]
        texts = override_texts(entry.get("overrides") or {}) + override_texts(tagged) + list(overrides)
        for seed in entry.get("seeds") or [None]:
            needs, ext_vars = [], {}
            for key, value in (entry.get("ext_vars") or {}).items():
                if isinstance(value, str):
                    ext_vars[key] = value
                    continue
                earlier = planned.get(value["run_of"], {})
                if "seed" in value:
                    need = earlier.get(value["seed"])
                else:
                    need = earlier.get(seed) or (next(iter(earlier.values())) if len(earlier) == 1 else None)
                if need is None:
                    wanted = f"seed {value['seed']}" if "seed" in value else f"seed {seed} (or with one seed)"
                    hint = "" if earlier else did_you_mean(value["run_of"], planned)
                    problems.append(Problem(f"{where}.ext_vars.{key}", f"run_of {value['run_of']!r}: no earlier entry "
                                            f"of that name with {wanted}{hint}", "value"))
                    break
                needs.append(need)
                ext_vars[key] = need.run_dir
            else:
                key = (i, tag, tuple(sorted(ext_vars.items())))
                if key not in bases:  # evaluated once per configuration (and run_of directories)
                    bases[key] = _evaluated(where, entry, tag, spec_file, ext_vars, texts, jsonnet_paths, folder,
                                            timeout, problems)
                run = None if bases[key] is None else _planned_run(
                    where, entry, tag, name, stem, spec_file, seed, bases[key], texts, needs, runs_root,
                    check_data_paths and all(n.state() == "finished" for n in needs), problems, seen)
                if run is not None:
                    planned.setdefault(name, {})[run.seed] = run
                    runs.append(run)
                continue
            break  # a run_of that names no planned run: the entry's other seeds would say the same
    keep: dict[int, SuiteRun] = {}  # the chosen runs with what they read (run_of), earlier in the list
    for r in runs:
        if r.entry in selected and (seeds is None or r.seed in seeds):
            keep.update((id(n), n) for n in _needs_first(r) if id(n) not in keep)
    runs = list(keep.values())
    position = {id(r): index for index, r in enumerate(runs)}
    for r in runs:
        r.index, r.needs = position[id(r)], [position[id(n)] for n in r.needs]
    if problems:
        raise SpecError(list(dict.fromkeys(problems)), str(suite_path))
    if not runs and seeds is not None:
        raise ConfigurationError(f"--seeds {' '.join(map(str, seeds))}: no run of {suite_path}"
                                 f"{' matching --only ' + ' '.join(map(repr, patterns)) if patterns else ''} "
                                 f"has one of these seeds")
    return runs


def _evaluated(where: str, entry: dict, tag: str, spec_file: Path, ext_vars: dict, texts: list[str],
               jsonnet_paths: Sequence[str], folder: Path, timeout: Optional[float], problems: list) -> Optional[dict]:
    """The entry's spec with its configuration's overrides, or None (its problems appended)."""
    from multigrain.platform.specs import apply_overrides, evaluate_jsonnet

    try:
        return apply_overrides(evaluate_jsonnet(spec_file, ext_vars, [*jsonnet_paths, str(folder)], timeout), texts)
    except SpecError as e:
        problems += [p.at(f"{where}{'.configs.' + tag if tag else ''}: {entry['spec']}" + (f": {p.path}" if p.path else ""))
                     for p in e.problems]
    except ConfigurationError as e:
        problems.append(Problem(f"{where}.spec", str(e), "file"))
    return None


def _planned_run(where: str, entry: dict, tag: str, name: str, stem: str, spec_file: Path, seed: Optional[int],
                 base: dict, texts: list[str], needs: list, runs_root, check_data_paths: bool, problems: list,
                 seen: dict) -> Optional[SuiteRun]:
    """One run of an entry's configuration at ``seed`` (None: the spec's own), or None (a problem)."""
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.runs import default_run_dir
    from multigrain.platform.specs import spec_hash

    spec = {**base, "seed": base.get("seed", 13) if seed is None else seed}
    try:
        validate_spec(spec, str(spec_file), check_data_paths)
    except SpecError as e:
        problems += [p.at(f"{where}: {entry['spec']}: {p.path}") for p in e.problems]
        return None
    digest = spec_hash(spec)
    if digest in seen:
        problems.append(Problem(where, f"{name} seed {spec['seed']} is the same spec as {seen[digest]} (hash "
                                       f"{digest[:12]}): remove one", "value"))
        return None
    seen[digest] = f"{name} seed {spec['seed']}"
    options = {RESOURCE_KEYS[k]: (v * 2**30 if k == "memory_gb" else v) for k, v in (entry.get("resources") or {}).items()}
    options.setdefault("num_cpus", 1)
    run_dir = default_run_dir(f"{stem}-{tag}" if tag else stem, digest, runs_root)
    return SuiteRun(name, 0, str(spec_file), tag, spec["seed"], spec, digest, str(run_dir), options, texts, list(needs))


def _needs_first(run: SuiteRun) -> list[SuiteRun]:
    """``run`` after the runs it reads, theirs first (``needs`` still holds runs, not indices)."""
    out: list[SuiteRun] = []
    for need in run.needs:
        out += [n for n in _needs_first(need) if all(n is not o for o in out)]
    return out + [run]


def run_tags(r: SuiteRun, result: Optional[dict] = None, when: Optional[float] = None) -> dict[str, str]:
    """What makes a suite run a row of a results table (tags of its MLflow run): ``spec_name``
    (the spec's stem), ``config`` (the entry's tag), ``suite_entry``, ``overrides`` (JSON list of the
    entry's and the configuration's ``-o`` texts) and a ``note`` naming them, ``num_epochs``,
    ``device`` (``result``'s, where it trained) and ``date`` (``when`` in seconds since the epoch,
    else when its metrics.json was written, else today). Empty values are left out."""
    import time

    if when is None:
        try:
            when = (Path(r.run_dir) / "metrics.json").stat().st_mtime
        except OSError:
            when = time.time()
    trainer = r.spec.get("trainer") if isinstance(r.spec.get("trainer"), dict) else {}
    tags = {"spec_name": Path(r.spec_path).name.split(".")[0], "config": r.tag, "suite_entry": r.entry,
            "overrides": json.dumps(r.overrides, ensure_ascii=False), "note": "; ".join(f"-o {o}" for o in r.overrides),
            "num_epochs": str(trainer.get("num_epochs", "")), "device": str((result or {}).get("device") or ""),
            "date": time.strftime("%Y-%m-%d", time.localtime(when))}
    return {k: v for k, v in tags.items() if v}


def unplaceable(runs: list[SuiteRun], cluster: dict) -> list[str]:
    """Why runs can never start on a Ray of these total resources (``ray.cluster_resources()``):
    one line per entry asking for more CPUs, GPUs or memory than the whole cluster has."""
    names = {"num_cpus": ("CPU", "CPUs"), "num_gpus": ("GPU", "GPUs"), "memory": ("memory", "bytes of memory")}
    out = {}
    for r in runs:
        for option, (key, unit) in names.items():
            wanted, total = r.options.get(option, 0) or 0, cluster.get(key, 0)
            if wanted > total:
                out.setdefault(r.entry, f"{r.entry}: asks for {wanted:g} {unit}; this Ray has {total:g} in all")
    return list(out.values())


def describe_plan(runs: list[SuiteRun]) -> list[str]:
    """``--dry-run``: one line per run (state, resources, run directory)."""
    lines = []
    states = [r.state() for r in runs]
    for r, state in zip(runs, states):
        action = {"finished": "reuse (finished)", "partial": "resume", "new": "train"}[state]
        res = ", ".join(f"{k}={v / 2**30:g}GiB" if k == "memory" else f"{k}={v:g}" for k, v in r.options.items())
        lines.append(f"{r.label:<40} {action:<17} {res:<28} {r.run_dir}  (hash {r.spec_hash[:12]})")
    counts = {s: states.count(s) for s in ("finished", "partial", "new")}
    lines.append(f"{len(runs)} runs: {counts['new']} to train, {counts['partial']} to resume, "
                 f"{counts['finished']} to reuse")
    return lines
