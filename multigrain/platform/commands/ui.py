"""``multigrain ui``: the MLflow UI over the project's store, on 127.0.0.1, opening on model
training (runs, not GenAI traces); each experiment's ``leaderboard`` view shows its runs ranked by
``leaderboard_score`` (``platform/mlflow_views``)."""
from __future__ import annotations

from multigrain.platform.commands.common import host_address
from multigrain.platform.commands.serve import port_number

#: the experiments whose leaderboard view is printed as a link (the others: the runs page's Views menu)
LINKS_SHOWN = 20


def register(sub) -> None:
    p = sub.add_parser("ui", help="browse the runs and leaderboards in the MLflow UI (127.0.0.1)")
    p.add_argument("--port", type=port_number, default=5000, help="the TCP port, 1-65535 (default 5000)")
    p.add_argument("--host", default="127.0.0.1", type=host_address,
                   help="the address it listens on (default: this machine only)")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=ui)


def ui(args) -> int:
    from multigrain.platform.tracking import tracking_uri
    from multigrain.platform.ui import serve

    uri = tracking_uri(args.tracking_uri)
    print_views(uri, args.host, args.port)
    return serve(uri, args.host, args.port)


def print_views(uri: str, host: str, port: int) -> None:
    """Bring the store's experiments up to date (``mlflow_views.prepare_store``: experiments made by
    older versions) and print each one's leaderboard view. A missing store is left to ``serve``'s error."""
    from multigrain.platform.mlflow_views import prepare_store, view_url
    from multigrain.platform.store_checks import check_store
    from multigrain.platform.tracking import open_store

    check_store(uri)
    client = open_store(uri, create=False)
    if client is None:
        return
    try:
        experiments = prepare_store(client)
    except Exception as e:  # noqa: BLE001 - a read-only store is still browsed, without the views
        import sys

        print(f"note: the experiments' leaderboard views were not written ({type(e).__name__}: {e})", file=sys.stderr)
        return
    base = f"http://{host}:{port}"
    for name, exp_id in experiments[:LINKS_SHOWN]:
        print(f"{name}: {view_url(base, exp_id)}", flush=True)
    if len(experiments) > LINKS_SHOWN:
        print(f"... and {len(experiments) - LINKS_SHOWN} more experiments (each runs page's Views menu: "
              f"'leaderboard')", flush=True)
