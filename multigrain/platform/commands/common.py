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


def load_spec_args(args) -> dict:
    """The resolved spec named by ``add_spec_args``' arguments (not yet validated)."""
    from multigrain.platform.specs import load_spec, parse_ext_vars

    return load_spec(args.spec, args.override, parse_ext_vars(args.ext_var), args.jsonnet_path)


def spec_stem(path: str) -> str:
    """``jsonnet_configs/ner/resume_big.jsonnet`` -> ``resume_big``: a spec's short name."""
    from pathlib import PurePath

    return PurePath(path).name.split(".")[0]
