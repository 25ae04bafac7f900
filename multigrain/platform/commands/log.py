"""``multigrain log RUN_DIR...``: log finished runs trained with ``--no-tracking`` (another machine)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("log", help="log finished run directories trained with --no-tracking to MLflow")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=log)


def log(args) -> int:
    import json
    from pathlib import Path

    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.tracking import logged_run, replay

    runs = []
    for path in map(Path, args.run_dirs):
        files = [path / "metrics.json", path / "config.json"]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise ConfigurationError(f"{path}: not a run directory (missing {', '.join(missing)})")
        try:
            result, spec = [json.loads(f.read_text(encoding="utf-8")) for f in files]
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigurationError(f"{path}: unreadable run files ({e})") from None
        if not result.get("finished"):
            raise ConfigurationError(f"{path}: the run is not finished (resume it with multigrain train --resume)")
        runs.append((path, dict(result, run_dir=str(path)), spec))
    for path, result, spec in runs:  # every directory checked before anything is logged
        known = logged_run(result, args.tracking_uri)
        if known:
            print(f"{path}: already logged as MLflow run {known}; skipped")
            continue
        run_id = replay(result, spec, args.tracking_uri)
        print(f"{path}: logged as MLflow run {run_id} ({result['task']}/{result['dataset']}, {tested(result)})")
    return 0


def tested(result: dict) -> str:
    """``test {...}``, or for a run with named test sets (a translator) ``test tvsub bleu 0.72, ...``."""
    if result.get("test") is not None or not result.get("test_sets"):
        return f"test {result.get('test')}"
    key = result.get("leaderboard_metric", "")
    return "test " + ", ".join(f"{name} {key} {scores['metrics'][key]:.2f}" for name, scores in
                               result["test_sets"].items() if key in scores.get("metrics", {}))
