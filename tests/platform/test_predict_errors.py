"""``predict`` and ``evaluate`` on bad input: one clear error each (exit 2), no traceback, no
half-written output."""
import json
import os
import shutil

import pytest

from multigrain.platform.runs import Run
from tests.conftest import DATA, run_cli


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("predict_errors")
    blocks = (DATA / "resume_ner" / "dev.char.bmes").read_text(encoding="utf-8").strip("\n").split("\n\n")
    (tmp / "train.bmes").write_text("\n\n".join(blocks[:12]) + "\n\n", encoding="utf-8")
    spec = {"task": "ner", "dataset": "tiny", "dataset_reader": {"type": "resume_ner"},
            "train_data_path": str(tmp / "train.bmes"), "validation_data_path": str(tmp / "train.bmes"),
            "data_loader": {"batch_size": 4},
            "model": {"type": "tagger", "embedder": {"type": "char_bigram", "char_dim": 8, "bigram_dim": 8},
                      "encoder": {"type": "bilstm", "hidden_size": 8}, "head": {"type": "crf"}},
            "trainer": {"num_epochs": 1, "optimizer": {"type": "adam", "lr": 0.01}}}
    Run(spec, tmp / "run").train()
    return tmp / "run"


def broken_copy(run_dir, tmp_path, damage):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    damage(copy)
    return copy


def check(out, message):
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_damaged_run_directories(run_dir, tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "张三在北京"}\n', encoding="utf-8")
    cases = [
        (lambda d: (d / "best.pt").write_bytes((d / "best.pt").read_bytes()[:100]),
         "best.pt: not a multigrain checkpoint, or damaged"),
        (lambda d: (d / "config.json").write_text('{"task": '), "config.json: damaged, not a JSON spec"),
        (lambda d: shutil.rmtree(d / "vocabulary"), "no vocabulary/vocabulary.json"),
        (lambda d: (d / "vocabulary" / "vocabulary.json").write_text("[1, 2"), "damaged vocabulary"),
    ]
    for n, (damage, message) in enumerate(cases):
        where = tmp_path / str(n)
        where.mkdir()
        check(run_cli("predict", broken_copy(run_dir, where, damage), tmp_path / "in.jsonl"), message)


DEEP = "[" * 100000 + "]" * 100000


@pytest.mark.parametrize("damage, message", [
    (lambda saved: {}, "no 'tags' namespace, which the model needs (the file has none)"),
    (lambda saved: [], "damaged vocabulary (holds a list, not an object of namespace -> list of tokens)"),
    (lambda saved: {k: v for k, v in saved.items() if k != "tags"},
     "no 'tags' namespace, which the model needs (the file has 'bigrams', 'chars')"),
    (lambda saved: {**saved, "tags": ["O", 7]}, "damaged vocabulary (namespace 'tags': token 1 is 7, not a string)"),
    (lambda saved: {**saved, "chars": "甲乙"}, "damaged vocabulary (namespace 'chars': a str, not a list of tokens)"),
    (lambda saved: DEEP, "damaged vocabulary (nested deeper than 200 levels)"),
    (lambda saved: {**saved, "tags": saved["tags"] + [saved["tags"][2]]},
     None),  # the message names the repeated label: filled in below
], ids=["empty_object", "empty_list", "no_tags", "int_token", "string_namespace", "deep", "repeated_label"])
def test_a_damaged_vocabulary_is_exit_2_naming_the_file_and_the_namespace(run_dir, tmp_path, capsys, damage, message):
    from multigrain.platform.commands import main as cli_main

    def write(copy):
        saved = json.loads((copy / "vocabulary" / "vocabulary.json").read_text(encoding="utf-8"))
        damaged = damage(saved)
        text = damaged if isinstance(damaged, str) else json.dumps(damaged)
        (copy / "vocabulary" / "vocabulary.json").write_text(text, encoding="utf-8")

    copy = broken_copy(run_dir, tmp_path, write)
    if message is None:  # a label twice: the later indices would not be the ones the model learned
        tags = json.loads((copy / "vocabulary" / "vocabulary.json").read_text(encoding="utf-8"))["tags"]
        message = f"damaged vocabulary (namespace 'tags': token {len(tags) - 1} repeats token 2, {json.dumps(tags[2])})"
    (tmp_path / "in.jsonl").write_text('{"text": "张三在北京"}\n', encoding="utf-8")
    code = cli_main(["predict", str(copy), str(tmp_path / "in.jsonl")])
    out = capsys.readouterr()
    assert (code, out.out, out.err) == (2, "", f"error: {copy / 'vocabulary' / 'vocabulary.json'}: {message}\n")


def test_bad_arguments_and_files(run_dir, tmp_path):
    check(run_cli("predict", run_dir, tmp_path / "missing.jsonl"), "missing.jsonl: no such input file")
    check(run_cli("evaluate", run_dir, tmp_path / "missing.bmes"), "missing.bmes: no such data file")
    check(run_cli("evaluate", run_dir, tmp_path), f"{tmp_path}: not a data file (a folder or a device)")
    check(run_cli("evaluate", run_dir, os.devnull), f"{os.devnull}: not a data file (a folder or a device)")
    check(run_cli("predict", run_dir, ""), "an empty path (name a data file)")
    check(run_cli("evaluate", run_dir, "--test-set", "wmt22"), "its spec has no test set 'wmt22' (it has none: give a "
                                                                 "DATA file)")
    out = run_cli("predict", run_dir, tmp_path / "x.jsonl", "--batch-size", "0")
    assert out.returncode == 2 and "--batch-size: expected at least 1, got 0" in out.stderr


def test_a_bad_line_leaves_no_output_file(run_dir, tmp_path):
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"text": "张三在北京"}\n{"text": "李四"}\nnot json\n', encoding="utf-8")
    out_file = tmp_path / "out.jsonl"
    check(run_cli("predict", run_dir, lines, "--output-file", out_file), "in.jsonl:3: bad JSON")
    assert not out_file.exists() and not (tmp_path / "out.jsonl.tmp").exists()
    lines.write_text('{"text": "张三在北京"}\n', encoding="utf-8")
    assert run_cli("predict", run_dir, lines, "--output-file", out_file).returncode == 0
    assert json.loads(out_file.read_text(encoding="utf-8"))["text"] == "张三在北京"


def test_evaluate_says_how_many_examples_it_scored(run_dir):
    out = run_cli("evaluate", run_dir, run_dir.parent / "train.bmes")
    assert out.returncode == 0 and "train.bmes: 12 instances read with the test reader (resume_ner), 12 scored" in out.stderr
    assert json.loads(out.stdout)["f1"] >= 0.0


@pytest.mark.parametrize("line, message", [
    ('{"text": 123}', '"text" must be a non-empty string, got 123'),
    ('{"text": null}', '"text" must be a non-empty string, got null'),
    ('{"text": NaN}', '"text" must be a non-empty string, got NaN'),
    ('{"text": ["张", "三"]}', '"text" must be a non-empty string'),
    ('{"text": {"a": 1}}', '"text" must be a non-empty string'),
    ('{"text": ""}', '"text" must be a non-empty string'),
    ('{"text": "   "}', '"text" must be a non-empty string, got "   "'),
    ('{"chars": 5}', '"chars" must be a non-empty list of single characters'),
    ('{"chars": ["张三"]}', '"chars" must be a non-empty list of single characters'),
    ('{"text": "张三", "tags": ["O"]}', '"tags" must be a list of one tag per character (2)'),
    ('{"text": "张三", "tags": ["O", "B-XYZ"]}', "unknown tags B-XYZ"),
    ('{"words": "张三"}', 'expected "text" or "chars"'),
])
def test_bad_predict_lines_name_file_and_line(run_dir, tmp_path, line, message):
    from multigrain.platform.archive import read_json_lines
    from multigrain.platform.errors import DataError

    lines = tmp_path / "in.jsonl"
    lines.write_text('{"text": "张三在北京"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_json_lines(str(lines), model_of(run_dir))
    prefix = f"{lines}:2: cannot make an example: "
    assert str(e.value).startswith(prefix) and message in str(e.value)
    assert not str(e.value)[len(prefix):].startswith("'")  # the message, not a KeyError's repr of it


_MODELS = {}


def model_of(run_dir):
    if run_dir not in _MODELS:
        _MODELS[run_dir] = Run.open(run_dir).load_archive().model
    return _MODELS[run_dir]


def test_a_bad_predict_line_is_exit_2_from_the_command(run_dir, tmp_path):
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"text": 123}\n', encoding="utf-8")
    check(run_cli("predict", run_dir, lines), 'in.jsonl:1: cannot make an example: "text" must be a non-empty string')
