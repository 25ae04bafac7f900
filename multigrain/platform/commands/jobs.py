"""``multigrain jobs``: list the multigrain jobs of a cluster, or show one with its logs."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "jobs", help="list multigrain jobs of a cluster, or show one (with --logs)")
    p.add_argument("id", nargs="?", help="a submission id (multigrain-<hash16>)")
    p.add_argument("--address", required=True, help="the head's Jobs API, e.g. http://HEAD:8265")
    p.add_argument("--logs", action="store_true")
    p.add_argument("--all", action="store_true", help="list every job of the cluster, not only multigrain's")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs)


def cmd_jobs(args) -> int:
    import json

    from multigrain.platform.ray.jobs import job_details, list_jobs

    if args.id:
        info = job_details(args.address, args.id, logs=args.logs)
        if args.json:
            print(json.dumps(info, indent=2, ensure_ascii=False))
            return 0
        print(f"{info['submission_id']}: {info['status']}" + (f" ({info['message']})" if info["message"] else ""))
        print(f"entrypoint: {info['entrypoint'][:200]}")
        if args.logs:
            print(info["logs"], end="")
        return 0
    rows = list_jobs(args.address, everything=args.all)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    from multigrain.platform.console import output_console
    from rich.table import Table

    table = Table(title=f"jobs at {args.address}")
    for col in ("submission id", "status", "spec", "message"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["submission_id"], r["status"], r["spec"], r["message"][:80])
    output_console(160).print(table)
    return 0
