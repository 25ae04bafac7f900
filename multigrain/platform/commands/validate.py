"""``multigrain validate SPEC``: every problem of a spec at once; builds nothing."""
from __future__ import annotations

from multigrain.platform.commands.common import add_spec_args, load_spec_args


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a spec and report every error; builds nothing")
    add_spec_args(p)
    p.set_defaults(func=validate)


def validate(args) -> int:
    spec = load_spec_args(args)  # before torch is imported: the Jsonnet child forks from a small process
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.specs import spec_hash

    validate_spec(spec, args.spec)
    print(f"{args.spec}: valid (spec hash {spec_hash(spec)})")
    return 0
