"""Runs side by side: their final metrics, the spec keys (flattened params) whose values differ,
and their learning curves overlaid in one PNG (written whole or not at all)."""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.portable import readable_mode
from multigrain.platform.records import experiments, is_curve, record, search


def resolve(client, ident: str, uri: str) -> dict:
    """The record of a run named by its run directory (``run_directory_record``), its MLflow run id,
    its spec hash (or a prefix of 6+ characters: the latest finished run of it; an extended run
    answers to its current hash, then to its earlier ones, ``provenance``) or its run name."""
    exps = {e.experiment_id: e.name for e in experiments(client)}
    if (Path(ident) / "config.json").is_file():
        return run_directory_record(client, Path(ident), uri, exps)
    if re.fullmatch(r"[0-9a-f]{32}", ident) and (run := logged_run(client, ident, exps)) is not None:
        return record(client, run, exps[run.info.experiment_id], history=True)
    quoted = ident.replace("'", "")
    found = []
    if re.fullmatch(r"[0-9a-f]{6,64}", ident):
        found = search(client, list(exps), f"tags.spec_hash LIKE '{quoted}%'")
        if not found:
            found = [r for r in search(client, list(exps), f"tags.spec_hash_history LIKE '%{quoted}%'")
                     if any(h.startswith(quoted) for h in r.data.tags.get("spec_hash_history", "").split(","))]
    if not found:
        found = search(client, list(exps), f"attributes.run_name = '{quoted}'")
    if not found:
        raise ConfigurationError(f"{ident}: no run with this id, spec hash or name in {uri}")
    return latest(client, found, exps)


def run_directory_record(client, run_dir: Path, uri: str, exps: dict) -> dict:
    """The record of the MLflow run that a run directory's ``tracking.json`` names for the store
    ``uri``, else of the latest finished run of the spec hash in its ``spec_hash``."""
    try:
        digest = (run_dir / "spec_hash").read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        digest = ""
    try:
        saved = json.loads((run_dir / "tracking.json").read_text(encoding="utf-8"))
        if isinstance(saved, dict) and saved.get("tracking_uri") == uri and isinstance(saved.get("run_id"), str):
            run = logged_run(client, saved["run_id"], exps)
            if run is not None and (not digest or _of_hash(run, digest)):  # a copied tracking.json is not believed
                return record(client, run, exps[run.info.experiment_id], history=True)
    except (OSError, ValueError):
        pass
    found = search(client, list(exps), f"tags.spec_hash = '{digest}'") if re.fullmatch(r"[0-9a-f]{64}", digest) else []
    if not found:
        raise ConfigurationError(f"{run_dir}: a run directory with no MLflow run in {uri} (trained with "
                                 f"--no-tracking, or logged to another store?); `multigrain log {run_dir}` logs it")
    return latest(client, found, exps)


def _of_hash(run, digest: str) -> bool:
    """Whether the MLflow run trained the spec of hash ``digest`` (its spec hash, or one it extended)."""
    tags = run.data.tags
    return tags.get("spec_hash") == digest or digest in tags.get("spec_hash_history", "").split(",")


def logged_run(client, run_id: str, exps: dict):
    """The MLflow run of this id in one of the experiments ``exps``, else None."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException:
        return None
    return run if run.info.experiment_id in exps else None


def latest(client, found: list, exps: dict) -> dict:
    """The record of the latest finished run of ``found`` (of the latest run when none finished)."""
    finished = [r for r in found if r.info.status == "FINISHED"] or found
    run = max(finished, key=lambda r: r.info.start_time or 0)
    return record(client, run, exps[run.info.experiment_id], history=True)


def differences(recs: list[dict]) -> dict[str, list]:
    """The spec keys whose values are not the same in every run (a missing key is None)."""
    keys = sorted({k for r in recs for k in r["params"]})
    return {k: [r["params"].get(k) for r in recs] for k in keys if len({r["params"].get(k) for r in recs}) > 1}


def compare_runs(client, idents: list[str], plot: str, uri: str) -> dict:
    from multigrain.platform.artifacts import plot_curves
    from multigrain.platform.provenance import hash_history

    recs, problems = [], []
    for ident in idents:  # every run that cannot be found in one error
        try:
            recs.append(resolve(client, ident, uri))
        except ConfigurationError as e:
            problems.append(str(e))
    if problems:
        raise ConfigurationError("\n".join(problems))
    labels = []
    for r in recs:  # a run named twice is shown twice, under distinct labels
        label = r["name"] or r["run_id"][:8]
        labels.append(label if label not in labels else f"{label} ({len(labels) + 1})")
    metric_keys = sorted({k for r in recs for k in r["metrics"] if not is_curve(k)})
    out = {"runs": [{"label": lab, "run_id": r["run_id"], "experiment": r["experiment"],
                     "spec_hash": r["tags"].get("spec_hash", ""), "spec_hash_history": hash_history(r["tags"]),
                     "epochs": _epochs(r)}
                    for lab, r in zip(labels, recs)],
           "metrics": {k: [r["metrics"].get(k) for r in recs] for k in metric_keys},
           "differences": differences(recs), "plot": str(plot)}
    path = Path(plot)
    if not path.parent.is_dir():
        raise ConfigurationError(f"--plot {plot}: the folder {path.parent} does not exist")
    lb = recs[0]["tags"].get("leaderboard_metric", "")
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        plot_curves({lab: r["history"] for lab, r in zip(labels, recs)}, Path(tmp),
                    lb[len("test_"):] if lb.startswith("test_") else None)
        os.chmod(tmp, readable_mode())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return out


def _epochs(rec: dict):
    done = rec["metrics"].get("epochs_completed")
    return int(done) if isinstance(done, (int, float)) else rec["params"].get("trainer.num_epochs")


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render(result: dict, fmt: str = "table") -> None:
    if fmt == "json":
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    head = ["", *(r["label"] for r in result["runs"])]
    identity = {"experiment": [r["experiment"] for r in result["runs"]],
                "spec hash": [r["spec_hash"] for r in result["runs"]],
                "earlier spec hashes": [" ".join(r["spec_hash_history"]) or None for r in result["runs"]],
                "epochs": [r["epochs"] for r in result["runs"]]}
    sections = [("run", identity), ("metric", result["metrics"])]
    if len(result["runs"]) > 1:
        sections.append(("spec key (differs)", result["differences"]))
    if fmt == "md":
        for title, rows in sections:
            print("| " + " | ".join([title, *head[1:]]) + " |")
            print("|" + "---|" * len(head))
            for key, values in rows.items():
                print("| " + " | ".join([key, *map(_cell, values)]) + " |")
            print()
    else:
        from multigrain.platform.console import output_console
        from rich.markup import escape  # '[small]' in a run's name is text, not Rich markup
        from rich.table import Table

        console = output_console(200)
        for title, rows in sections:
            table = Table(title=title)
            for col in [title, *head[1:]]:
                table.add_column(escape(col))
            for key, values in rows.items():
                table.add_row(escape(key), *(escape(_cell(v)) for v in values))
            console.print(table)
        if not result["differences"] and len(result["runs"]) > 1:
            console.print("the runs' specs are the same")
    print(f"learning curves: {result['plot']}")
