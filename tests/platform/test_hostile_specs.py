"""Hostile Jsonnet specs: an evaluation that grows without bound (5.8 GB for a comprehension of
5,000,000 keys, then the evaluator's "FATAL ERROR" line and SIGABRT). Each is one error naming
the spec, exit 2, with nothing from the evaluator's child on stderr."""
from multigrain.platform.commands import main as cli_main


def validate(capfd, spec, *extra):
    code = cli_main(["validate", str(spec), *map(str, extra)])
    out = capfd.readouterr()
    return code, out.out, out.err


def test_an_evaluation_past_the_memory_bound_is_one_error_naming_the_bound(tmp_path, capfd, monkeypatch):
    from multigrain.platform import jsonnet_child

    assert jsonnet_child.MEMORY_BOUND == 2 * 1024 ** 3
    monkeypatch.setattr(jsonnet_child, "MEMORY_BOUND", 256 * 1024 ** 2)  # the same, sooner
    spec = tmp_path / "keys.jsonnet"
    spec.write_text("{ ['k' + i]: i for i in std.range(1, 5000000) }\n", encoding="utf-8")
    code, out, err = validate(capfd, spec)
    assert (code, out) == (2, "") and err == (f"error: {spec}: 1 error in spec:\n  the Jsonnet evaluation needed more "
                                              f"than 0.25 GiB of memory and was stopped (a huge computation?)\n")

