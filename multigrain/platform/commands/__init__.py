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
            "sweep", "suite", "serve", "evaluate_all", "submit", "jobs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="multigrain",
                                     description="Chinese multi-granularity NLP: train, evaluate and rank "
                                                 "lattice models from Jsonnet specs.")
    parser.add_argument("--include-package", action="append", default=[], metavar="MODULE", help=INCLUDE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    for command in set(sub.choices.values()):  # the flag also after the command (several allowed)
        command.add_argument("--include-package", action="append", default=[], metavar="MODULE",
                             dest="include_package_after", help=INCLUDE_HELP)
    return parser


INCLUDE_HELP = ("import a module (a file or package in the working directory, or on sys.path) that registers "
                "components; a run records the plugin modules its spec needs but never imports them: evaluate, "
                "predict, serve or train --resume of it needs the flag again, with the same source")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    from multigrain.platform.errors import MultigrainError

    args.include_package = [*args.include_package, *getattr(args, "include_package_after", [])]
    _plain_warnings()
    from multigrain.platform.commands.interrupt import SigtermAsInterrupt

    try:
        with SigtermAsInterrupt():  # SIGTERM unwinds like Ctrl-C: temporary files go, runs end KILLED
            if args.include_package:
                import os

                from multigrain.platform.plugins import check_sources_before_import, include

                check_sources_before_import(args.include_package, _run_dirs_opened(args), os.getcwd())
                for name in args.include_package:
                    include(name, search_dir=os.getcwd())
            code = args.func(args) or 0
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not as a traceback at exit
        return code
    except MultigrainError as e:
        _say_error(f"error: {e}")
        return 2
    except OSError as e:  # writing the output failed (ENOSPC, EPIPE...), or a path too long to look up
        from multigrain.platform.commands.common import report_path_error, report_write_error

        if not (report_write_error(e) or report_path_error(e)):
            raise
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _say_error(text: str) -> None:
    """``text`` on stderr; when stderr is a pipe its reader closed (``2>&1 | head``), the rest is
    dropped, so that the exit code stays the error's, not a BrokenPipeError's."""
    try:
        print(text, file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):
        from multigrain.platform.commands.common import to_devnull

        to_devnull(sys.stderr)


def _run_dirs_opened(args) -> list[str]:
    """The run directories the command will open (their plugin records are checked against the
    ``--include-package`` sources before those are imported)."""
    dirs = [args.archive] if getattr(args, "archive", None) else []
    dirs += getattr(args, "run_dirs", None) or []
    if getattr(args, "resume", False) and getattr(args, "serialization_dir", None):
        dirs.append(args.serialization_dir)
    return dirs


def _plain_warnings() -> None:
    """Our own warnings (a plugin entry point that failed to load, say) as one ``warning: ...``
    line, not Python's ``file:line: Category: ...`` with a source line."""
    import warnings

    default = warnings.formatwarning

    def formatwarning(message, category, filename, lineno, line=None):
        if getattr(category, "__module__", "").startswith("multigrain."):
            return f"warning: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning
