"""The ``multigrain`` command line: one module per command (AllenNLP's layout).

Each module holds only argparse at module level and a ``register(subparsers)`` that adds its
parser with ``set_defaults(func=...)``; heavy libraries are imported inside the command, so
``multigrain --help`` imports no torch, Ray or MLflow.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: command modules in the order ``--help`` lists them
COMMANDS = ("train", "evaluate", "predict", "validate", "components", "log", "leaderboard", "compare", "ui", "quickstart",
            "sweep", "serve", "evaluate_all", "submit", "jobs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="multigrain",
                                     description="Chinese multi-granularity NLP: train, evaluate and rank "
                                                 "lattice models from Jsonnet specs.")
    parser.add_argument("--include-package", action="append", default=[], metavar="MODULE",
                        help="import a local module that registers components")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    from multigrain.platform.errors import MultigrainError

    try:
        if args.include_package:
            import os

            from multigrain.platform.registry import import_package

            for name in args.include_package:
                import_package(name, search_dir=os.getcwd())
        return args.func(args) or 0
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
