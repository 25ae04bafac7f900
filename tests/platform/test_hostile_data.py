"""Bad data, round three: numbers longer than Python reads, tags a tagger was not trained with,
malformed ``answers`` in predict input, reference files that are no files, and a source too long
for the translator found before a run's files are written. One clear error each, exit 2."""
from __future__ import annotations

import json
import os
import re
import sys

import pytest

from multigrain.components.readers.mrc import SquadFormatReader
from multigrain.components.readers.parallel import ParallelRefsReader
from multigrain.platform.commands import main
from multigrain.platform.data import json_lines
from multigrain.platform.errors import ConfigurationError, DataError, SpecError
from multigrain.platform.jsonio import JsonTextError, loads, too_long_number_line
from multigrain.platform.ray.sweep_options import parse_grid, parse_resources
from multigrain.platform.runs import Run
from multigrain.platform.specs import parse_override
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA, write_spec

LIMIT = sys.get_int_max_str_digits()
LONG = "9" * (LIMIT + 1)
TOO_LONG = f"a number of more than {LIMIT:,} digits"


@pytest.fixture(scope="module")
def tagger_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile_data")
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp / "train.bmes", 12)
    Run(tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, train, task="ner"),
        tmp / "run").train()
    return tmp / "run"


def cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


# ------------------------------------------------------------------ integers of more digits than int() takes
def test_a_number_too_long_to_read_is_a_json_error_with_its_line(tmp_path):
    with pytest.raises(JsonTextError, match=TOO_LONG):
        loads('{"n": ' + LONG + "}")
    assert loads('{"n": "' + LONG + '", "m": 1.5}')["n"] == LONG  # in a string it is text
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "好"}\n{"text": "好", "n": ' + LONG + "}\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        list(json_lines(str(path)))
    assert (e.value.line, e.value.detail) == (2, TOO_LONG + " (too long to read as a number)")
    text = '{\n "s": "' + LONG + '",\n "data": [\n  ' + LONG + "\n ]\n}"
    assert too_long_number_line(text) == 4
    document = tmp_path / "squad.json"
    document.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        list(SquadFormatReader().read(str(document)))
    assert e.value.line == 4 and TOO_LONG in e.value.detail


def test_a_number_too_long_on_the_command_line_is_refused(tagger_run, tmp_path, capsys):
    with pytest.raises(SpecError, match=f"override seed: {TOO_LONG}"):
        parse_override("seed=" + LONG)
    with pytest.raises(SpecError, match=f"--grid seed: {TOO_LONG}"):
        parse_grid([f"seed=[{LONG}]"])
    with pytest.raises(ConfigurationError, match=f"--resources: {TOO_LONG}"):
        parse_resources('{"num_cpus": ' + LONG + "}")
    code, err = cli(capsys, "predict", tagger_run, write_lines(tmp_path, '{"text": "张三", "n": ' + LONG + "}"))
    assert code == 2 and err.startswith(f"error: {tmp_path / 'in.jsonl'}:1: {TOO_LONG}"), err


def write_lines(folder, *lines) -> str:
    path = folder / "in.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ tags the tagger was not trained with
@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_a_tag_the_model_does_not_know_names_its_line(tagger_run, tmp_path, capsys, command):
    data = tmp_path / "unk.bmes"
    data.write_text("张 B-NAME\n三 E-NAME\n\n中 B-FOO\n国 E-FOO\n\n", encoding="utf-8")
    code, err = cli(capsys, command, tagger_run, data)
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"error: {data}:4: tag 'B-FOO' is not one of the model's tags (O, ")


# ------------------------------------------------------------------ predict input of a span reader
@pytest.mark.parametrize("answers, message", [
    ('"中国"', '"answers": expected a list of {"text", "answer_start"} objects, found str'),
    ('[["中国", 0]]', '"answers"[0]: expected an object {"text", "answer_start"}, found list'),
    ('[{"text": "中国"}]', '"answers"[0]: no "answer_start"'),
    ('[{"text": "中国", "answer_start": "0"}]', '"answers"[0].answer_start: expected an integer, found str'),
    ('[{"text": "中国", "answer_start": true}]', '"answers"[0].answer_start: expected an integer, found bool'),
    ('[{"text": 5, "answer_start": 0}]', '"answers"[0].text: expected a string, found int'),
])
def test_malformed_answers_in_a_span_readers_input(answers, message):
    from multigrain.components.models.span_reader import _answers

    with pytest.raises(ValueError) as e:
        _answers(json.loads(answers))
    assert str(e.value) == message
    assert _answers([{"text": "中国", "answer_start": 0, "extra": 1}]) == [{"text": "中国", "answer_start": 0}]


# ------------------------------------------------------------------ reference files that are no files
@pytest.mark.parametrize("kind", ["folder", "fifo", "device", "loop"])
def test_a_reference_that_is_no_file_is_refused_before_it_is_opened(tmp_path, kind):
    source = tmp_path / "s.zh"
    source.write_text("你好\n", encoding="utf-8")
    reference = tmp_path / "s.en"
    if kind == "folder":
        reference.mkdir()
    elif kind == "fifo":
        os.mkfifo(reference)  # opening it would block for ever
    elif kind == "device":
        reference.symlink_to("/dev/zero")  # reading it would never end
    else:
        reference.symlink_to(reference.name)
    with pytest.raises(DataError) as e:
        list(ParallelRefsReader(references=[str(reference)]).read(str(source)))
    why = "Too many levels of symbolic links" if kind == "loop" else "not a reference file (a folder or a device)"
    assert str(e.value) == f"{source}: its reference {reference}: {why}"


# ------------------------------------------------------------------ a source longer than the translator reads
def test_a_source_too_long_is_refused_before_the_runs_files(tmp_path, capsys):
    lines = (DATA / "tatoeba_cmn_eng" / "cmn.txt").read_text(encoding="utf-8-sig").splitlines()[2000:2010]
    train = tmp_path / "pairs.txt"
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    longest = max(len(line.split("\t")[1]) for line in lines)
    model = {"type": "translator", "embedder": {"type": "char_bigram", "char_dim": 16, "bigram_dim": 0},
             "encoder": {"type": "transformer", "hidden_size": 16, "num_layers": 1, "num_heads": 2, "ffn_dim": 32},
             "decoder": {"num_layers": 1, "num_heads": 2, "feedforward_dim": 32}, "target_vocab_size": 200,
             "beam_size": 1, "max_source_length": longest - 1, "truncate": False}
    spec = write_spec(tmp_path, tiny_spec(model, {"type": "tatoeba_cmn_eng"}, train, task="mt", dataset="tatoeba"))
    run_dir = tmp_path / "run"
    code, err = cli(capsys, "train", spec, "-s", run_dir, "--no-tracking")
    assert code == 2 and f"more than max_source_length {longest - 1} (truncate is off)" in err, err
    assert not (run_dir / "config.json").exists() and not (run_dir / "vocabulary").exists()
    fixed = ["-o", f"model.max_source_length={longest}"]
    code, err = cli(capsys, "train", spec, "-s", run_dir, "--no-tracking", *fixed)
    assert code == 2 and err.strip() == (f"error: {run_dir}: holds only what a training wrote there before it stopped, "
                                         f"before its first epoch; pass --resume to start it over or choose another -s")
    code, err = cli(capsys, "train", spec, "-s", run_dir, "--no-tracking", "--resume", *fixed)
    assert code == 0, err
    assert json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["finished"]


def test_a_given_label_is_checked_line_by_line(tmp_path):
    """The classifiers' predict input: a label out of the set, or no string, is refused whatever the
    lines beside it (it was checked only when every instance of a batch had one)."""
    from types import SimpleNamespace

    from multigrain.components.models.labelled import LabelledModel

    model = SimpleNamespace(labels=["0", "1"], label_index={"0": 0, "1": 1})
    assert LabelledModel.given_label(model, {"label": "1"}) == "1"
    assert LabelledModel.given_label(model, {"label": 0}) == "0"
    for label, message in (("zz", "\"label\" 'zz' is not in the label set (0, 1)"),
                           (None, "must be a string, got NoneType"), (True, "must be a string, got bool"),
                           ([1], "must be a string, got list")):
        with pytest.raises(ValueError, match=re.escape(message)):
            LabelledModel.given_label(model, {"label": label})


def test_the_server_says_a_number_is_too_long(tmp_path):
    from multigrain.platform.ray.serve_batching import Limits, RequestError, parse_instances

    with pytest.raises(RequestError) as e:
        parse_instances(b'{"instances": [{"text": "a", "n": ' + LONG.encode() + b"}]}", Limits())
    assert e.value.args[-1] == f"the body is not valid JSON: {TOO_LONG} (too long to read as a number)"
    with pytest.raises(RequestError, match="NaN is not a JSON value"):
        parse_instances(b'{"instances": NaN}', Limits())
