"""Arguments shared by the commands that take a spec. Only argparse at module level:
``multigrain --help`` imports no torch, Ray or MLflow."""
from __future__ import annotations

import argparse


def add_spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="a Jsonnet or JSON spec")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one spec value (JSON, or a bare string); the key must exist")
    parser.add_argument("--ext-var", action="append", default=[], metavar="NAME=VALUE",
                        help="a Jsonnet external variable (only these are visible to the spec)")
    parser.add_argument("--jsonnet-path", action="append", default=[], metavar="DIR",
                        help="a folder the spec's imports may read besides its own folder and jsonnet_configs/")


def add_reader_arg(parser: argparse.ArgumentParser) -> None:
    """``--reader train|validation|test``: which of the spec's readers reads a data file."""
    parser.add_argument("--reader", choices=("train", "validation", "test"), default="test",
                        help="read the data with the spec's test_dataset_reader (default; it falls back to "
                             "the validation reader, then the training reader), validation_dataset_reader or "
                             "dataset_reader")


def load_spec_args(args) -> dict:
    """The resolved spec named by ``add_spec_args``' arguments (not yet validated)."""
    from multigrain.platform.specs import load_spec, parse_ext_vars

    return load_spec(args.spec, args.override, parse_ext_vars(args.ext_var), args.jsonnet_path)


def spec_stem(path: str) -> str:
    """``jsonnet_configs/ner/resume_big.jsonnet`` -> ``resume_big``: a spec's short name."""
    from pathlib import PurePath

    return PurePath(path).name.split(".")[0]


def positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1 (``--batch-size``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


class AtomicOutput:
    """A text file written in full or not at all: lines go to ``PATH.tmp``, renamed to ``PATH``
    when the block ends without an error (removed when it does not). ``None`` writes to stdout."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        import sys

        if self.path is None:
            self.file = sys.stdout
        else:
            self.tmp = f"{self.path}.tmp"
            self.file = open(self.tmp, "w", encoding="utf-8")
        return self.file

    def __exit__(self, kind, error, trace):
        import os

        if self.path is None:
            return False
        self.file.close()
        if kind is None:
            os.replace(self.tmp, self.path)
        else:
            os.unlink(self.tmp)
        return False
