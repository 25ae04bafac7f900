"""``multigrain quickstart`` (``make run``): train the quickstart spec(s) once per spec hash and
print their leaderboards."""
from __future__ import annotations

QUICKSTART_SPECS = ["jsonnet_configs/ner/resume_quickstart.jsonnet"]


def register(sub) -> None:
    from multigrain.platform.commands.common import JSONNET_TIMEOUT, folder, seconds

    p = sub.add_parser("quickstart", help="train the quickstart spec(s) and print the leaderboard (make run)")
    p.add_argument("specs", nargs="*")
    p.add_argument("-o", "--override", action="append", default=[])
    p.add_argument("--jsonnet-path", action="append", default=[], metavar="DIR", type=folder,
                   help="a folder the specs' imports may read besides their own folder and jsonnet_configs/")
    p.add_argument("--jsonnet-timeout", type=seconds, default=JSONNET_TIMEOUT, metavar="SECONDS",
                   help=f"stop evaluating a spec's Jsonnet after this long (default {JSONNET_TIMEOUT:g})")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=quickstart)


def quickstart(args) -> int:
    from multigrain.platform import run_marker
    from multigrain.platform.commands.train import print_result
    from multigrain.platform.runs import Run
    from multigrain.platform.errors import SpecError
    from multigrain.platform.specs import load_spec, repeated_overrides
    from multigrain.platform.leaderboard import leaderboard, render
    from multigrain.platform.tracking import RunLogger, experiment_name

    if problems := repeated_overrides(args.override):
        raise SpecError(problems)
    boards = []
    for path in args.specs or QUICKSTART_SPECS:
        run = Run(load_spec(path, args.override, None, args.jsonnet_path, args.jsonnet_timeout), source=path)
        if run.finished_result() is not None:
            print(f"{path}: already trained in {run.run_dir} (spec hash {run.spec_hash[:12]}); "
                  f"delete that directory to train again")
        else:
            run_marker.clear(run.run_dir)  # an interrupted quickstart starts over (only our files go)
            print(f"training {path} -> {run.run_dir}", flush=True)
            print_result(run.train(logger=RunLogger(args.tracking_uri)))
        boards.append(experiment_name(run.identity))
    for board in dict.fromkeys(boards):
        render(board, leaderboard(board, args.tracking_uri))
    return 0
