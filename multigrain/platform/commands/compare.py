"""``multigrain compare RUN_OR_HASH...``: runs side by side (their metrics, only the spec keys that
differ) and their learning curves overlaid in one plot; one run alone: its metrics, identity (spec
hash, earlier hashes of an extended run, epochs) and curves."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare runs (or show one): metrics, differing spec keys, overlaid learning "
                                       "curves")
    p.add_argument("runs", nargs="+", metavar="RUN_OR_HASH",
                   help="a run directory, an MLflow run id, a spec hash (or its first 6+ characters) or a run name")
    p.add_argument("--plot", default="compare.png", metavar="FILE", help="the learning-curve plot (PNG)")
    p.add_argument("--format", choices=("table", "md", "json"), default="table")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=compare)


def compare(args) -> int:
    from multigrain.platform.commands.common import check_output_path
    from multigrain.platform.compare import compare_runs, render
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.store_checks import sqlite_file
    from multigrain.platform.tracking import open_store, tracking_uri

    uri = tracking_uri(args.tracking_uri)
    check_output_path(args.plot, "--plot", {sqlite_file(uri): "the tracking store"})  # refused before any work
    client = open_store(uri, create=False)
    if client is None:
        raise ConfigurationError(f"no MLflow store at {uri}")
    render(compare_runs(client, args.runs, args.plot, uri), args.format)
    return 0
