"""What a leaderboard row says about how its run was made, beyond the spec hash at its start:

- **Extension.** ``train --resume`` with a larger ``trainer.num_epochs`` continues the run
  directory's one MLflow run (``live_log``). When it finishes, the run is brought up to date
  (``bring_up_to_date``): tag ``spec_hash`` (the run's identity, searched by ``compare``) becomes
  the current spec's, the earlier hashes are kept oldest first in ``spec_hash_history``, and
  ``seed_group`` and the run name follow. MLflow params cannot change value, so the flattened spec
  keys that changed (``trainer.num_epochs``) are tag ``spec_changes`` (JSON ``{key: value}``), laid
  over the params when a record is read (``current_params``); tag ``num_epochs`` is the current count
  and ``last_epoch_at`` the time of the last epoch (``RunLogger.log_epoch``). A test set's earlier row of the same
  run directory is retired (``leaderboard=false``, ``superseded_by``): one row per run and set.
- **Ext-vars.** The Jsonnet external variables a spec was resolved with (``--ext-var
  variant=mwa``) go into ``metrics.json`` (``ext_vars``) and onto the MLflow run (tag ``ext_vars``,
  JSON), and into its leaderboard name: two variants of one spec file are two names. Every ext-var
  given is named: only those given are visible to the spec, and a different value resolves to a
  different spec (a path is named by its file name).
"""
from __future__ import annotations

import json
from pathlib import PurePath
from typing import Optional

from multigrain.platform.paths import same_folder

#: tag: the spec hashes a run had before it was extended, oldest first, comma-separated
HISTORY_TAG = "spec_hash_history"
#: tag: JSON ``{flattened spec key: value}`` of the keys an extension changed (params cannot change)
CHANGES_TAG = "spec_changes"
#: tag: JSON ``{name: value}`` of the Jsonnet external variables the spec was resolved with
EXT_VARS_TAG = "ext_vars"


def ext_vars_label(ext_vars: Optional[dict]) -> str:
    """``variant=mwa vectors=sgns.vec``: sorted by name, a path value named by its file name."""
    if not ext_vars:
        return ""
    shown = []
    for name in sorted(ext_vars):
        value = str(ext_vars[name])
        if "/" in value:
            value = PurePath(value).name or value
        shown.append(f"{name}={value}")
    return " ".join(shown)


def ext_vars_of_tags(tags: dict) -> dict:
    try:
        value = json.loads(tags.get(EXT_VARS_TAG) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def ext_vars_problem(value) -> Optional[str]:
    """Why a ``metrics.json``'s ``ext_vars`` cannot be logged (None when it can: absent, or an object
    of short strings)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return "ext_vars: expected an object of NAME: VALUE strings"
    if len(json.dumps(value, ensure_ascii=False)) > 4000:
        return "ext_vars: longer than 4000 characters (an MLflow tag)"
    return None


def hash_history(tags: dict) -> list[str]:
    return [h for h in (tags.get(HISTORY_TAG) or "").split(",") if h]


def current_params(params: dict, tags: dict) -> dict:
    """The run's flattened spec as it is now: its params with ``spec_changes`` laid over them."""
    try:
        changes = json.loads(tags.get(CHANGES_TAG) or "{}")
    except ValueError:
        changes = {}
    return {**params, **changes} if isinstance(changes, dict) and changes else params


def bring_up_to_date(client, run_id: str, spec: dict, digest: str, run_dir: str, flat: dict, group: str) -> bool:
    """After an extension (the run's ``spec_hash`` tag is not ``digest``): retag the MLflow run with
    the current ``spec`` (``flat``: it flattened as params are, ``group``: its seed group; see the
    module docstring). False when nothing had to change."""
    from mlflow.entities import RunTag

    run = client.get_run(run_id)
    tags, params = run.data.tags, run.data.params
    old = tags.get("spec_hash")
    if not old or old == digest:
        return False
    history = [h for h in hash_history(tags) if h != digest]
    history.append(old)
    changes = {k: v for k, v in flat.items() if params.get(k) != v}
    name = tags.get("mlflow.runName", "").replace(old[:8], digest[:8])
    new = {"spec_hash": digest, HISTORY_TAG: ",".join(history), "seed_group": group,
           CHANGES_TAG: json.dumps(changes, ensure_ascii=False, sort_keys=True), "mlflow.runName": name,
           "run_dir": str(run_dir)}
    if isinstance(spec.get("trainer"), dict) and spec["trainer"].get("num_epochs") is not None:
        new["num_epochs"] = str(spec["trainer"]["num_epochs"])
    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in new.items()], synchronous=True)
    return True


def retire_earlier_rows(client, experiment_id: str, run_dir: str, test_set: str, digest: str, keep: str) -> None:
    """A test set's finished rows of ``run_dir`` made under another spec hash (before an
    extension) leave the leaderboard: ``leaderboard=false``, ``superseded_by=<keep>``."""
    for row in client.search_runs([experiment_id], filter_string=(
            f"tags.test_set = '{test_set}' and tags.leaderboard = 'true' and attributes.status = 'FINISHED'")):
        tags = row.data.tags
        if row.info.run_id != keep and same_folder(tags.get("run_dir"), run_dir) and tags.get("spec_hash") != digest:
            client.set_tag(row.info.run_id, "leaderboard", "false")
            client.set_tag(row.info.run_id, "superseded_by", keep)
