"""Hostile Jsonnet specs: an evaluation that grows without bound (5.8 GB for a comprehension of
5,000,000 keys, then the evaluator's "FATAL ERROR" line and SIGABRT), an endless recursion (a
23-line Jsonnet stack trace), an import of a FIFO or a folder ("no such file"), a 1 GB sparse spec
(2.1 GB read, then "ValueError: embedded null character"). Each is one error naming the spec,
exit 2, with nothing from the evaluator's child on stderr."""
import os

import pytest

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


def test_an_endless_recursion_is_one_line_at_its_place_in_the_spec(tmp_path, capfd):
    spec = tmp_path / "rec.jsonnet"
    spec.write_text("local f(n) = if n == 0 then 0 else 1 + f(n - 1);\n{ a: f(100000) }\n", encoding="utf-8")
    code, _, err = validate(capfd, spec)
    assert code == 2 and err == (f"error: {spec}: 1 error in spec:\n  Jsonnet error: RUNTIME ERROR: max stack frames "
                                 f"exceeded. (at {spec}:1:17-23)\n")
    spec.write_text("local x = {a: 1};\n{ b: x.c }\n", encoding="utf-8")
    code, _, err = validate(capfd, spec)
    assert code == 2 and err.endswith("  Jsonnet error: RUNTIME ERROR: field does not exist: c "
                                      f"(at {spec}:2:6-9)\n")


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_an_import_of_a_fifo_or_a_folder_says_what_it_is(tmp_path, capfd, kind):
    target = tmp_path / "lib.libsonnet"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    spec = tmp_path / "spec.jsonnet"
    spec.write_text("{ a: import 'lib.libsonnet' }\n", encoding="utf-8")
    code, _, err = validate(capfd, spec)
    what = "a FIFO (named pipe)" if kind == "fifo" else "a directory"
    assert code == 2 and err == (f"error: {spec}: 1 error in spec:\n  Jsonnet error: RUNTIME ERROR: couldn't open "
                                 f"import \"lib.libsonnet\": not a regular file ({what}) (at {spec}:1:6-28)\n")


def test_a_huge_or_binary_spec_is_refused_unread(tmp_path, capfd):
    sparse = tmp_path / "sparse.jsonnet"
    with open(sparse, "wb") as f:
        f.truncate(1024 ** 3)
    code, _, err = validate(capfd, sparse)
    assert code == 2 and err == (f"error: {sparse}: 1,073,741,824 bytes, more than the 16,777,216 bytes (16 MiB) a "
                                 f"spec file may have\n")
    spec = tmp_path / "imports.jsonnet"
    spec.write_text("{ a: importstr 'sparse.jsonnet' }\n", encoding="utf-8")
    code, _, err = validate(capfd, spec)
    assert code == 2 and "couldn't open import \"sparse.jsonnet\": 1,073,741,824 bytes, more than the" in err
    nul = tmp_path / "nul.jsonnet"
    nul.write_bytes(b"{a: 1}\n{\0}")
    code, _, err = validate(capfd, nul)
    assert code == 2 and err == f"error: {nul}: 1 error in spec:\n  a NUL byte at line 2, column 2; a spec is text\n"
