"""``multigrain log RUN_DIR...``: log finished runs trained with ``--no-tracking`` (another machine)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("log", help="log finished run directories trained with --no-tracking to MLflow")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=log)


def log(args) -> int:
    from pathlib import Path

    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.jsonio import loads
    from multigrain.platform.provenance import ext_vars_problem
    from multigrain.platform.result_check import identity_problem, result_problems, spec_problems
    from multigrain.platform.store import adding_runs
    from multigrain.platform.store_checks import check_store
    from multigrain.platform.tracking import logged_run, replay, tracking_uri

    runs = []
    for path in map(Path, args.run_dirs):
        files = [path / "metrics.json", path / "config.json"]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise ConfigurationError(f"{path}: not a run directory (missing {', '.join(missing)})")
        try:
            result, spec = [loads(f.read_text(encoding="utf-8")) for f in files]
        except (ValueError, UnicodeDecodeError, OSError) as e:
            raise ConfigurationError(f"{path}: unreadable run files ({e})") from None
        if not isinstance(result, dict) or not result.get("finished"):
            raise ConfigurationError(f"{path}: the run is not finished (resume it with multigrain train --resume)")
        in_result = result_problems(result) + list(filter(None, [ext_vars_problem(result.get("ext_vars"))]))
        for file, problems in ((files[0], in_result), (files[1], spec_problems(spec))):
            if problems:  # before any MLflow run exists
                shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
                raise ConfigurationError(f"{file}: cannot be logged: {shown}")
        if problem := identity_problem(path, result, spec):
            raise ConfigurationError(f"{path}: cannot be logged: {problem}")
        runs.append((path, dict(result, run_dir=str(path)), spec))
    uri = tracking_uri(args.tracking_uri)
    check_store(uri, write=True)
    for path, result, spec in runs:  # every directory checked before anything is logged
        with adding_runs(uri):  # another `log` of this directory now waits, then finds it
            known = logged_run(result, uri)
            run_id = replay(result, spec, uri) if not known else None
        if known:
            print(f"{path}: already logged as MLflow run {known}; skipped")
            continue
        print(f"{path}: logged as MLflow run {run_id} ({result['task']}/{result['dataset']}, {tested(result)})")
    return 0


def tested(result: dict) -> str:
    """``test {...}``, or for a run with named test sets (a translator) ``test tvsub bleu 0.72, ...``."""
    if result.get("test") is not None or not result.get("test_sets"):
        return f"test {result.get('test')}"
    shown = []
    for name, scores in result["test_sets"].items():
        key = scores.get("leaderboard_metric") or result.get("leaderboard_metric", "")  # per set: cased BLEU or not
        if key in scores.get("metrics", {}):
            shown.append(f"{name} {key} {scores['metrics'][key]:.2f}")
    return "test " + ", ".join(shown)
