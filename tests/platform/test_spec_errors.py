"""Bad specs: one clear error naming the spec path, exit code != 0, nothing written."""
import json

import pytest

from multigrain.platform.config import validate
from multigrain.platform.errors import SpecError
from multigrain.platform.specs import apply_overrides, spec_hash
from multigrain.platform.experiment import Experiment
from tests.conftest import DATA, ROOT, run_cli

RESUME = DATA / "resume_ner"


def good_spec(**changes):
    spec = {
        "task": "ner", "dataset": "resume",
        "dataset_reader": {"type": "resume_ner"},
        "train_data_path": str(RESUME / "dev.char.bmes"),
        "validation_data_path": str(RESUME / "dev.char.bmes"),
        "model": {"type": "tagger", "embedder": {"type": "char_bigram", "char_dim": 8, "bigram_dim": 8},
                  "encoder": {"type": "bilstm", "hidden_size": 8}, "head": {"type": "crf"}},
        "trainer": {"num_epochs": 1, "optimizer": {"type": "adam", "lr": 0.01}},
    }
    spec.update(changes)
    return spec


def check(tmp_path, spec_text, *expected, cmd="validate", extra=(), suffix=".jsonnet"):
    path = tmp_path / f"spec{suffix}"
    path.write_text(spec_text if isinstance(spec_text, str) else json.dumps(spec_text))
    out = run_cli(cmd, path, *extra, cwd=tmp_path)
    assert out.returncode != 0, out.stdout
    for e in expected:
        assert e in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlruns.db").exists()
    return out.stderr


def test_good_spec_validates(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(good_spec()))
    out = run_cli("validate", path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert spec_hash(good_spec()) in out.stdout


def test_unknown_type_did_you_mean(tmp_path):
    spec = good_spec()
    spec["model"]["encoder"]["type"] = "bilstn"
    err = check(tmp_path, spec, "model.encoder.type: unknown encoder type 'bilstn'", "did you mean 'bilstm'",
                "valid choices:")
    assert "multigrain.components.encoders.bilstm" in err


def test_unknown_key_did_you_mean(tmp_path):
    spec = good_spec()
    spec["model"]["encoder"]["hiden_size"] = 8
    check(tmp_path, spec, "model.encoder.hiden_size: unknown key", "did you mean 'hidden_size'", "valid keys:")


def test_wrong_value_type(tmp_path):
    spec = good_spec()
    spec["model"]["encoder"]["hidden_size"] = "8x"
    check(tmp_path, spec, 'model.encoder.hidden_size: expected int, got "8x"')


def test_wrong_bool_and_float(tmp_path):
    spec = good_spec()
    spec["model"]["head"]["constrained"] = "yes"
    spec["trainer"]["optimizer"]["lr"] = "fast"
    check(tmp_path, spec, 'model.head.constrained: expected bool, got "yes"',
          'trainer.optimizer.lr: expected float, got "fast"', "2 errors")


def test_missing_required(tmp_path):
    spec = good_spec()
    del spec["train_data_path"]
    del spec["trainer"]["optimizer"]
    check(tmp_path, spec, "train_data_path: missing required argument",
          "trainer.optimizer: missing required argument")


def test_missing_type(tmp_path):
    spec = good_spec()
    del spec["model"]["head"]["type"]
    check(tmp_path, spec, "model.head.type: missing; choose one of:", "crf")


def test_unknown_top_level_key(tmp_path):
    check(tmp_path, good_spec(trainr={}), "trainr: unknown key for Experiment", "did you mean 'trainer'")


def test_all_errors_reported_at_once(tmp_path):
    spec = good_spec()
    spec["model"]["encoder"]["type"] = "nope"
    spec["trainer"]["num_epochs"] = "ten"
    spec["data_loader"] = {"batch_sise": 4}
    err = check(tmp_path, spec, "3 errors", "model.encoder.type", "trainer.num_epochs", "data_loader.batch_sise")
    assert err.count("\n  ") >= 3


def test_missing_data_file(tmp_path):
    check(tmp_path, good_spec(test_data_path="nowhere/test.bmes"), "test_data_path: file not found: nowhere/test.bmes")


def test_jsonnet_syntax_error(tmp_path):
    check(tmp_path, "{ model: { type: 'tagger', }", "Jsonnet error", "spec.jsonnet")


def test_missing_ext_var(tmp_path):
    check(tmp_path, "{ lr: std.extVar('lr') }", "missing ext var 'lr'", "--ext-var lr=")
    misspelt = check(tmp_path, "{ msra_run: std.extVar('msra_run') }", extra=("--ext-var", "msra_rn=runs/x"))
    assert ("missing ext var 'msra_run': pass it with --ext-var msra_run=VALUE; --ext-var msra_rn was given, which the "
            "spec does not read (") in misspelt


def test_an_ext_var_with_no_name_or_given_twice_is_refused(tmp_path):
    spec = "{ a: std.extVar('a') }"
    assert "--ext-var '=1': expected NAME=VALUE (the name is empty)" in check(tmp_path, spec, extra=(
        "--ext-var", "a=1", "--ext-var", "=1"))
    assert "--ext-var a: given twice ('1' and '2'); give it once" in check(tmp_path, spec, extra=(
        "--ext-var", "a=1", "--ext-var", "a=2"))


def test_a_spec_path_that_is_no_spec_file_says_what_it_is(tmp_path):
    import os

    (tmp_path / "folder").mkdir()
    for path, message in (("", "error: an empty path (name a spec file)"),
                          (tmp_path / "folder", f"error: {tmp_path / 'folder'}: not a spec file (a folder or a "
                                                f"device)"),
                          (os.devnull, f"error: {os.devnull}: not a spec file (a folder or a device)"),
                          (tmp_path / "none.jsonnet", f"error: {tmp_path / 'none.jsonnet'}: no such spec file")):
        out = run_cli("validate", path, cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.strip() == message, out.stderr


def test_spec_files_are_utf8_with_or_without_a_byte_order_mark(tmp_path):
    """Windows editors start a UTF-8 file with a byte-order mark, which Jsonnet cannot lex: it is
    dropped, in the spec and in what it imports. Other encodings are refused at the first bad byte,
    never read with U+FFFD in place of their Chinese."""
    from multigrain.platform.specs import load_spec

    plain = dict(good_spec(), description="简历")
    (tmp_path / "lib.libsonnet").write_bytes(b"\xef\xbb\xbf" + json.dumps(plain, ensure_ascii=False).encode())
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(plain, ensure_ascii=False).encode())
    (tmp_path / "imports.jsonnet").write_text("import 'lib.libsonnet'", encoding="utf-8")
    assert load_spec(tmp_path / "bom.json") == load_spec(tmp_path / "imports.jsonnet") == plain
    gbk = json.dumps(plain, ensure_ascii=False).replace("简历", "\n" + "简历").encode("gbk")
    (tmp_path / "gbk.json").write_bytes(gbk)
    stderr = run_cli("validate", tmp_path / "gbk.json").stderr
    assert f"{tmp_path / 'gbk.json'}: 1 error in spec:\n  not valid UTF-8 (byte 0xbc at line 2, column 1); save the " \
           f"file as UTF-8" in stderr
    (tmp_path / "gbk.libsonnet").write_bytes(gbk)
    (tmp_path / "imports_gbk.jsonnet").write_text("import 'gbk.libsonnet'", encoding="utf-8")
    out = run_cli("validate", tmp_path / "imports_gbk.jsonnet")
    assert out.returncode == 2 and ('couldn\'t open import "gbk.libsonnet": not valid UTF-8 (byte 0xbc at line 2, '
                                    'column 1)') in out.stderr, out.stderr


def test_environment_is_not_visible(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME_SECRET", "x")
    check(tmp_path, "{ a: std.extVar('HOME_SECRET') }", "missing ext var 'HOME_SECRET'")


def test_bad_override_key(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(good_spec()))
    out = run_cli("validate", path, "-o", "trainer.optimiser.lr=0.1", cwd=tmp_path)
    assert out.returncode != 0
    assert "override trainer.optimiser.lr: trainer has no key 'optimiser'" in out.stderr
    assert "did you mean 'optimizer'" in out.stderr


def test_an_override_given_twice_with_two_values_is_refused(tmp_path):
    spec = good_spec()
    for extra in (("-o", "trainer.optimizer.lr=0.1", "-o", "trainer.optimizer.lr=0.2"),
                  ("-o", "+trainer.optimizer.eps=0.1", "-o", "trainer.optimizer.eps=0.2")):
        key = extra[1].split("=")[0].lstrip("+")
        check(tmp_path, spec, f"override {key}: given twice (0.1 and 0.2); give it once", cmd="train", extra=extra)
    (tmp_path / "suite.json").write_text(json.dumps({"entries": [{"spec": "spec.jsonnet", "seeds": [13]}]}))
    out = run_cli("suite", tmp_path / "suite.json", "-o", "trainer.num_epochs=1", "-o", "trainer.num_epochs=2",
                  "--dry-run", cwd=tmp_path)
    assert out.returncode == 2 and "override trainer.num_epochs: given twice (1 and 2); give it once" in out.stderr
    out = run_cli("quickstart", "-o", "trainer.num_epochs=1", "-o", "trainer.num_epochs=2", cwd=tmp_path)
    assert out.returncode == 2 and "override trainer.num_epochs: given twice (1 and 2); give it once" in out.stderr
    assert not (tmp_path / "runs").exists()
    path = tmp_path / "spec.jsonnet"  # the same value twice says nothing new: accepted
    out = run_cli("validate", path, "-o", "trainer.optimizer.lr=0.1", "-o", "trainer.optimizer.lr=0.1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_malformed_override(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(good_spec()))
    out = run_cli("validate", path, "-o", "trainer.num_epochs", cwd=tmp_path)
    assert out.returncode != 0 and "expected KEY.PATH=VALUE" in out.stderr


def test_override_value_is_typed_and_checked():
    spec = apply_overrides(good_spec(), ["trainer.optimizer.lr=0.5", "model.encoder.hidden_size=\"big\""])
    assert spec["trainer"]["optimizer"]["lr"] == 0.5
    errors = validate(spec, Experiment)
    assert [str(e) for e in errors] == ['model.encoder.hidden_size: expected int, got "big"']


def test_literal_choice(tmp_path):
    spec = good_spec()
    spec["dataset_reader"] = {"type": "weibo_ner", "entity_kind": "NAME"}
    check(tmp_path, spec, "dataset_reader.entity_kind: expected one of", "did you mean 'NAM'")


def test_train_refuses_bad_spec_writes_nothing(tmp_path):
    spec = good_spec()
    spec["model"]["encoder"]["type"] = "bilstn"
    check(tmp_path, spec, "unknown encoder type", cmd="train")


def test_spec_hash_is_canonical():
    a = {"b": 1, "a": {"y": [1, 2], "x": "中"}}
    b = {"a": {"x": "中", "y": [1, 2]}, "b": 1}
    assert spec_hash(a) == spec_hash(b)
    assert spec_hash(a) != spec_hash({**a, "b": 2})


def test_spec_hash_of_integral_floats_is_the_jsonnet_hash(tmp_path):
    """Jsonnet manifests ``1.0`` as ``1``: the same spec built as a Python dict hashes the same."""
    from multigrain.platform.specs import load_spec

    path = tmp_path / "spec.jsonnet"
    path.write_text('{trainer: {grad_clipping: 1.0, lr: 0.5, steps: [2.0, 3]}, seed: 13}')
    by_hand = {"trainer": {"grad_clipping": 1.0, "lr": 0.5, "steps": (2.0, 3)}, "seed": 13.0}
    assert spec_hash(load_spec(path)) == spec_hash(by_hand)
    assert spec_hash(by_hand) != spec_hash({**by_hand, "seed": 13.5})
    assert spec_hash({"flag": True}) != spec_hash({"flag": 1})


def test_repo_specs_validate(monkeypatch, tmp_path):
    from multigrain.platform.specs import load_spec
    from multigrain.platform.experiment import validate_spec
    from multigrain.testing import reads_msra_run

    monkeypatch.chdir(ROOT)  # spec paths are relative to the repository root
    # the files the ext vars name, where the first weights come from: a new spec's must exist
    for name in ("chars.vec", "bigrams.vec", "words.vec", "m3e_chars.vec", "pretrained/best.pt",
                 "pretrained/vocabulary/vocabulary.json", "msra/best.pt"):
        (tmp_path / "vectors" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vectors" / name).touch()
    specs = sorted((ROOT / "jsonnet_configs").rglob("*.jsonnet"))
    assert len(specs) >= 30
    for spec in specs:
        if spec.parent.name == "suites":  # lists of specs, checked by their own loader (and those specs here)
            from multigrain.platform.suite import load_suite

            assert load_suite(spec)["entries"]
            continue
        ext_vars = {"vectors": str(tmp_path / "vectors")} if spec.stem.endswith("_vec") else None  # their one ext var
        if spec.parent.name == "finetune":  # the pre-training run to start from, and its encoder
            ext_vars = {"pretrained": str(tmp_path / "vectors" / "pretrained"), "encoder": "lattice_bert"}
        if reads_msra_run(spec.stem):  # the MSRA run whose backbone it starts from
            ext_vars = {"msra_run": str(tmp_path / "vectors" / "msra")}
        validate_spec(load_spec(spec, ext_vars=ext_vars), str(spec))
    missing = load_spec(ROOT / "jsonnet_configs" / "ner" / "resume_plte_vec.jsonnet", ext_vars={"vectors": "no/such"})
    with pytest.raises(SpecError, match=r"model\.embedder\.char_pretrained_file: file not found: no/such/chars\.vec"):
        validate_spec(missing)


def test_jsonnet_imports_only_from_allowed_folders(tmp_path):
    """``importstr`` of a file outside the spec's folder, jsonnet_configs/ and --jsonnet-path is
    refused without the file being read into the error (or anywhere else)."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOPSECRET-42")
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    for target in (str(secret), "../elsewhere/secret.txt", "/proc/self/environ"):
        path = spec_dir / "spec.jsonnet"
        path.write_text(f"{{ leak: importstr '{target}' }}")
        out = run_cli("validate", path, cwd=tmp_path)
        assert out.returncode == 2, out.stdout
        assert "refused: outside the folders specs may import from" in out.stderr
        assert "TOPSECRET" not in out.stderr + out.stdout and "PATH=" not in out.stderr
    (spec_dir / "lib.libsonnet").write_text("{ x: 1 }")
    path.write_text("(import 'lib.libsonnet') + { leak: importstr '../elsewhere/secret.txt' }")
    out = run_cli("validate", path, "--jsonnet-path", secret.parent, cwd=tmp_path)
    assert "refused" not in out.stderr and "unknown key" in out.stderr  # read, then judged as a spec


def test_a_path_too_long_to_look_up_is_a_spec_error_not_a_traceback(tmp_path):
    """Python 3.11's ``Path.exists`` raises for a name longer than the filesystem allows: every path
    the validation looks up (data, test sets, weight files, vocabulary, initializer) says "file not
    found" at its spec path instead, and the CLI exits 2."""
    from multigrain.platform.experiment import validate_spec
    from multigrain.testing import bilstm_tagger, tiny_spec

    long = "x" * 5000
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, long, task="ner")
    spec["model"]["embedder"]["char_pretrained_file"] = long
    spec.update(vocabulary={"directory": long, "pretrained_files": {"chars": long}}, initializer={"weights": long},
                test_sets={"other": {"path": long}})
    with pytest.raises(SpecError) as caught:
        validate_spec(spec)
    assert sorted(p.path for p in caught.value.problems) == [
        "initializer.weights", "model.embedder.char_pretrained_file", "test_sets.other.path", "train_data_path",
        "vocabulary.directory", "vocabulary.pretrained_files.chars"]
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    result = run_cli("validate", tmp_path / "spec.json")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "6 errors in spec" in result.stderr
