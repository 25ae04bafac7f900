"""``multigrain components [KIND]``: registered names, their classes and where they are defined."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("components", help="list registered components")
    p.add_argument("kind", nargs="?", help="one registry kind (encoder, head, reader, ...)")
    p.set_defaults(func=components)


def components(args) -> int:
    from multigrain.platform.console import output_console
    from rich.table import Table

    from multigrain.platform.registry import KINDS, kind_of, load_all

    load_all()
    kinds = [args.kind] if args.kind else sorted(KINDS)
    table = Table(title="registered components")
    for col in ("kind", "name", "class", "defined in"):
        table.add_column(col)
    for kind in kinds:
        base = kind_of(kind)
        for name, entry in sorted(base.registry().items()):
            cls_name = f"{entry.cls.__module__}.{entry.cls.__qualname__}"
            where = entry.where.split(" (", 1)[-1].rstrip(")") if "(" in entry.where else ""
            table.add_row(kind, name, cls_name, where)
    output_console(200).print(table)
    return 0
