"""``multigrain ui``: the MLflow UI over the project's store, on 127.0.0.1."""
from __future__ import annotations

from multigrain.platform.commands.serve import port_number


def register(sub) -> None:
    p = sub.add_parser("ui", help="browse the runs and leaderboards in the MLflow UI (127.0.0.1)")
    p.add_argument("--port", type=port_number, default=5000, help="the TCP port, 1-65535 (default 5000)")
    p.add_argument("--host", default="127.0.0.1", help="the address it listens on (default: this machine only)")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=ui)


def ui(args) -> int:
    from multigrain.platform.tracking import tracking_uri
    from multigrain.platform.ui import serve

    return serve(tracking_uri(args.tracking_uri), args.host, args.port)
