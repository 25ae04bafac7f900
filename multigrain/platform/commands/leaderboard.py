"""``multigrain leaderboard TASK``: the best finished run per spec hash, ranked, from MLflow."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("leaderboard", help="rank the runs of a task from MLflow")
    p.add_argument("task", help="an experiment such as ner/resume, or a task such as ner")
    p.add_argument("--metric", help="metric key (default: each run's leaderboard metric)")
    p.add_argument("--tracking-uri")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=leaderboard)


def leaderboard(args) -> int:
    import json

    from multigrain.platform.tracking import leaderboard as rows_of, print_leaderboard

    rows = rows_of(args.task, args.tracking_uri, args.metric)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        print_leaderboard(args.task, rows)
    return 0
