"""The sweep command's options: ``--grid`` into (key, values) pairs, ``--resources`` and
``--gpus-per-trial`` into each trial's Ray options; every mistake named with its option."""
from __future__ import annotations

import json
from typing import Optional

from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.jsonio import too_long_number

RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type")


def parse_grid(texts: list[str]) -> list[tuple[str, list]]:
    """``--grid trainer.optimizer.lr=[1e-3,3e-3]`` -> ``[("trainer.optimizer.lr", [0.001, 0.003])]``."""
    grid, problems, seen = [], [], set()
    for text in texts or []:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.append(f"--grid {text!r}: expected KEY.PATH=[VALUE,...], e.g. trainer.optimizer.lr=[1e-3,3e-3]")
            continue
        try:
            values = json.loads(raw)
        except json.JSONDecodeError as e:
            problems.append(f"--grid {key}: {raw!r} is not a JSON list ({e.msg}); write e.g. {key}=[1e-3,3e-3] "
                            f"and quote strings: {key}=[\"a\",\"b\"]")
            continue
        except ValueError:
            problems.append(f"--grid {key}: {too_long_number()}")
            continue
        if not isinstance(values, list) or not values:
            problems.append(f"--grid {key}: expected a non-empty JSON list of values, got {raw!r}")
            continue
        if key in seen:
            problems.append(f"--grid {key}: given twice; put all its values in one list")
        seen.add(key)
        grid.append((key, values))
    if problems:
        raise SpecError(problems)
    return grid


def parse_resources(text: Optional[str]) -> Optional[dict]:
    """``--resources '{"num_cpus": 2, "num_gpus": 0.5}'``: Ray options of each trial."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigurationError(f"--resources {text!r}: not JSON ({e.msg}); e.g. '{{\"num_cpus\":1,\"num_gpus\":0}}'")
    except ValueError:
        raise ConfigurationError(f"--resources: {too_long_number()}") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"--resources {text!r}: expected a JSON object")
    problems = [f"--resources: unknown key {k!r}; allowed: {', '.join(RESOURCE_KEYS)}" for k in value
                if k not in RESOURCE_KEYS]
    for k in ("num_cpus", "num_gpus", "memory"):
        v = value.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            problems.append(f"--resources: {k} must be a number >= 0, got {json.dumps(v)}")
    custom = value.get("resources")
    if custom is not None and not (isinstance(custom, dict) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in custom.values())):
        problems.append(f"--resources: resources must be an object of numbers >= 0 (Ray's custom resources), got "
                        f"{json.dumps(custom)[:60]}")
    if "accelerator_type" in value and not (isinstance(value["accelerator_type"], str) and value["accelerator_type"]):
        problems.append(f"--resources: accelerator_type must be a name (e.g. \"A100\"), got "
                        f"{json.dumps(value['accelerator_type'])[:60]}")
    if isinstance(value.get("num_gpus"), (int, float)) and value["num_gpus"] > 1 and value["num_gpus"] % 1:
        problems.append("--resources: num_gpus above 1 must be a whole number")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return value


def with_gpus_per_trial(requested: Optional[dict], gpus: Optional[float]) -> Optional[dict]:
    """``--gpus-per-trial F`` into the trial's Ray options (not with ``--resources`` num_gpus)."""
    if gpus is None:
        return requested
    if not 0 < gpus < float("inf"):  # NaN too
        problems = [f"--gpus-per-trial {gpus}: expected a number of GPUs more than 0 (0.25: four trials a GPU)"]
    else:
        problems = [f"--gpus-per-trial {gpus:g}: above 1 it must be a whole number"] if gpus > 1 and gpus % 1 else []
    if requested and "num_gpus" in requested:
        problems.append("--gpus-per-trial and --resources num_gpus both set: give one")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return dict(requested or {}, num_gpus=gpus)
