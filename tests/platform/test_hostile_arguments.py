"""Hostile input, round two: values no range check covered, and hostile command-line arguments.
Each is one clear error (a SpecError naming its spec path, or a ConfigurationError / argparse
error naming the option), exit 2, no traceback, and nothing written: no run directory.

1. ``trainer.optimizer.lr`` infinite, NaN or negative; a size (``*_dim``, ``*_size``, ``num_*``)
   of 0 or less; any integer beyond its bound (``2**64`` epochs, batch sizes): refused when the
   spec is validated (property tests over the families); a model too big for the machine
   (``hidden_size=10000000``): refused with both numbers before any parameter is allocated.
2. ``--device foo`` and ``--device cuda`` without a GPU (evaluate, predict).
3. ``-s`` naming a file, a path under a file, a place that cannot be written (``/proc``) or a
   name longer than the file system allows.
4. a Jsonnet spec that never ends: stopped after ``--jsonnet-timeout`` seconds.
5. ``ui --port`` outside 1..65535.
6. a path argument longer than the file system allows (a spec, a run directory, a data file).
"""
import math
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multigrain.platform.commands import main
from multigrain.platform.config import MAX_INT, validate
from multigrain.platform.hints import MAX_COUNT
from multigrain.platform.errors import SpecError
from multigrain.platform.experiment import Experiment
from multigrain.platform.specs import apply_overrides, load_spec
from multigrain.platform.hints import Range
from tests.conftest import ROOT, children_of, resume_tagger_spec, run_cli, write_spec

EXAMPLES = int(os.environ.get("MULTIGRAIN_HYPOTHESIS_EXAMPLES", "40"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=True)
SPEC_FILE = ROOT / "jsonnet_configs" / "ner" / "resume_bilstm_crf.jsonnet"
SPEC = load_spec(SPEC_FILE)

RATES = ["trainer.optimizer.lr"]
SIZES = ["model.embedder.char_dim", "model.encoder.hidden_size", "data_loader.batch_size", "trainer.num_epochs"]
huge_ints = st.sampled_from([2**31, 2**53, 2**64, 10**30]) | st.integers(min_value=MAX_COUNT + 1)
hostile_rates = (st.sampled_from([math.inf, -math.inf, math.nan, 10**400, -1e-9])
                 | st.floats(max_value=-1e-300) | st.integers(max_value=-1))
hostile_sizes = st.integers(max_value=0) | huge_ints | st.sampled_from([-(2**64), -(10**30)])


def problems_at(key: str, value) -> list[str]:
    """The problems of SPEC with ``key`` set to ``value`` (as ``-o`` sets it)."""
    spec = apply_overrides(SPEC, [f"{key}={value!r}" if not isinstance(value, float) else f"{key}={_json(value)}"])
    return [str(p) for p in validate(spec, Experiment)]


def _json(value: float) -> str:
    return "NaN" if value != value else "Infinity" if value == math.inf else "-Infinity" if value == -math.inf \
        else repr(value)


@PROPERTY
@given(st.sampled_from(RATES), hostile_rates)
def test_a_hostile_learning_rate_is_one_problem_at_its_path(key, value):
    found = problems_at(key, value)
    assert len(found) == 1 and found[0].startswith(f"{key}: "), found
    assert "finite" in found[0] or "expected >= 0" in found[0]


@PROPERTY
@given(st.sampled_from(SIZES), hostile_sizes)
def test_a_hostile_size_or_count_is_one_problem_naming_its_bound(key, value):
    found = problems_at(key, value)
    assert len(found) == 1 and found[0].startswith(f"{key}: {value} is out of range: expected "), found
    assert "2147483647" in found[0] or ">= 1" in found[0] or str(MAX_INT) in found[0]


@PROPERTY
@given(st.sampled_from(SIZES), st.integers(min_value=1, max_value=MAX_COUNT))
def test_sizes_and_counts_in_range_are_accepted(key, value):
    assert problems_at(key, value) == []


@PROPERTY
@given(st.floats(min_value=0, max_value=1e6, allow_nan=False) | st.integers(min_value=0, max_value=10**6))
def test_learning_rates_in_range_are_accepted(value):
    assert problems_at("trainer.optimizer.lr", value) == []


@PROPERTY
@given(st.sampled_from(["seed", "trainer.patience"]), st.sampled_from([2**53, 2**64, 10**30]))
def test_any_integer_beyond_what_jsonnet_holds_is_refused(key, value):
    spec = apply_overrides(SPEC, [f"{key}={value}"]) if key == "seed" else dict(
        SPEC, trainer=dict(SPEC["trainer"], patience=value))
    (found,) = [str(p) for p in validate(spec, Experiment)]
    assert found.startswith(f"{key}: {value} is out of range") and str(MAX_INT) in found


def test_zero_stays_meaningful_where_the_hint_says_so():
    assert problems_at("model.embedder.bigram_dim", 0) == []  # no bigram embedding
    assert problems_at("model.embedder.bigram_dim", -1) == ["model.embedder.bigram_dim: -1 is out of range: "
                                                            "expected >= 0"]
    assert problems_at("model.embedder.char_dim", 0) == ["model.embedder.char_dim: 0 is out of range: expected a "
                                                         "value in [1, 2147483647]"]
    assert problems_at("trainer.num_epochs", 0) == ["trainer.num_epochs: 0 is out of range: expected >= 1"]


@pytest.mark.parametrize("bound, inside, outside, described", [
    (Range(0.0), [0.0, 3.0], [-0.5], ">= 0"),
    (Range(0.0, low_open=True), [1e-9, 3.0], [0.0, -0.5], "> 0"),
    (Range(0.0, 1.0), [0.0, 1.0], [-0.1, 1.1], "a value in [0, 1]"),
    (Range(0.0, 1.0, high_open=True), [0.0, 0.5], [1.0], "a value in [0, 1)"),
    (Range(0.0, 1.0, low_open=True, high_open=True), [1e-9, 0.999], [0.0, 1.0], "a value in (0, 1)"),
    (Range(None, 5), [5, -10], [6], "<= 5"),
    (Range(None, 5, high_open=True), [4, -10], [5], "< 5"),
])
def test_a_range_keeps_each_end_open_or_closed_as_declared(bound, inside, outside, described):
    assert [bound.problem(v) for v in inside] == [None] * len(inside)
    assert [bound.problem(v) for v in outside] == [f"{v!r} is out of range: expected {described}" for v in outside]


# ---------------------------------------------------------------------------- train: exit 2, nothing written
def train(tmp_path, capsys, *args) -> tuple[int, str]:
    code = main(["train", *map(str, args), "--no-tracking"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("override, message", [
    ("trainer.optimizer.lr=Infinity", "trainer.optimizer.lr: expected a finite number, got Infinity"),
    ("trainer.optimizer.lr=NaN", "trainer.optimizer.lr: expected a finite number, got NaN"),
    ("trainer.optimizer.lr=-0.001", "trainer.optimizer.lr: -0.001 is out of range: expected >= 0"),
    ("model.embedder.char_dim=0", "model.embedder.char_dim: 0 is out of range: expected a value in [1, 2147483647]"),
    ("model.encoder.hidden_size=-3", "model.encoder.hidden_size: -3 is out of range"),
    (f"trainer.num_epochs={2**64}", f"trainer.num_epochs: {2**64} is out of range: expected a value in [1, "
                                    f"2147483647]"),
    (f"data_loader.batch_size={2**64}", f"data_loader.batch_size: {2**64} is out of range"),
])
def test_train_refuses_hostile_values_before_writing_anything(tmp_path, capsys, override, message):
    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    code, err = train(tmp_path, capsys, spec, "-s", tmp_path / "runs" / "run", "-o", override)
    assert code == 2 and "1 error in spec" in err and message in err, err
    assert not (tmp_path / "runs").exists()


def test_a_model_bigger_than_the_machine_is_refused_with_both_numbers(tmp_path, capsys):
    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    started = time.monotonic()
    code, err = train(tmp_path, capsys, spec, "-s", tmp_path / "runs" / "run",
                      "-o", "model.encoder.hidden_size=10000000")
    assert code == 2 and "model: " in err and "parameters: training them takes about" in err, err
    assert "PiB" in err and "memory (" in err  # the need and what the machine has
    assert not (tmp_path / "runs" / "run").exists() and time.monotonic() - started < 120


def test_counting_parameters_on_meta_allocates_nothing_and_keeps_the_random_state(tmp_path):
    import numpy as np
    import torch

    from multigrain.platform.config import build
    from multigrain.platform.experiment import build_vocabulary, read_all
    from multigrain.platform.memory import check_training_memory, parameter_count

    exp = build(Experiment, resume_tagger_spec(tmp_path / "data"))
    train_set = read_all(exp.dataset_reader, exp.train_data_path)
    vocab = build_vocabulary(exp, exp.model_class(), train_set, [])
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    count = parameter_count(exp.model, vocab)
    after = torch.rand(3), random.random(), np.random.rand()
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    assert (torch.equal(after[0], torch.rand(3)), after[1], after[2]) == (True, random.random(), np.random.rand())
    real = exp.model.construct(vocab=vocab)
    assert count == sum(p.numel() for p in real.parameters())
    assert check_training_memory(exp.model, vocab, available=16 * count) == count
    with pytest.raises(SpecError, match=r"model: .* parameters: training them takes about .* more than this "
                                        r"machine's memory \(.*\)"):
        check_training_memory(exp.model, vocab, available=16 * count - 1)


# ---------------------------------------------------------------------------- --device, --port, counts
@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_an_unknown_device_lists_the_valid_ones(tmp_path, capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, str(tmp_path / "run"), str(tmp_path / "data"), "--device", "foo"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --device: 'foo' is not a device; valid devices: cpu, cuda, cuda:N" in err


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_cuda_without_a_gpu_is_one_error(tmp_path, capsys, command):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = run_cli(command, tmp_path / "run", tmp_path / "data", "--device", "cuda")
    assert out.returncode == 2 and "argument --device: cuda: this machine has no CUDA GPU" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [["train", "{long}"], ["validate", "{long}"], ["evaluate", "{long}", "data"],
                                  ["predict", "{long}", "input"], ["log", "{long}"]])
def test_a_path_too_long_to_look_up_is_one_error_naming_it_shortened(capsys, args):
    long = "z" * 5000  # Python 3.11's pathlib raises ENAMETOOLONG where the file system refuses the name
    assert main([a.format(long=long) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {'z' * 60}...") and "characters): File name too long" in err
    assert len(err) < 300 and "Traceback" not in err


@pytest.mark.parametrize("port", ["0", "70000", "-1", "65536", "http"])
def test_ui_ports_outside_1_to_65535_are_refused(capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["ui", "--port", port])
    assert exit_.value.code == 2 and "expected a TCP port from 1 to 65535" in capsys.readouterr().err


def test_counts_on_the_command_line_have_a_bound(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", "run", "data", "--batch-size", str(2**64)])
    assert exit_.value.code == 2 and "expected at most 2147483647" in capsys.readouterr().err


# ---------------------------------------------------------------------------- -s
def run_dirs(tmp_path) -> dict:
    (tmp_path / "a_file").write_text("x")
    return {
        "a file": (tmp_path / "a_file", "is a file, not a folder"),
        "under a file": (tmp_path / "a_file" / "run", f"{tmp_path / 'a_file'} is a file, not a folder"),
        "in /proc": (Path("/proc/multigrain-run"), "cannot make folders in /proc"),
        "a name of 300 characters": (tmp_path / ("r" * 300), "is 300 bytes long; the file system allows 255"),
        "under a name of 300 characters": (tmp_path / ("r" * 300) / "run", "is 300 bytes long"),
    }


@pytest.mark.parametrize("case", ["a file", "under a file", "in /proc", "a name of 300 characters",
                                  "under a name of 300 characters"])
def test_a_run_directory_that_cannot_be_one_is_refused_before_training(tmp_path, capsys, case):
    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    path, message = run_dirs(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    code, err = train(tmp_path, capsys, spec, "-s", path)
    assert code == 2 and err.startswith("error: -s ") and message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before and (tmp_path / "a_file").read_text() == "x"


@pytest.mark.parametrize("command", ["suite", "sweep"])
def test_a_runs_folder_that_cannot_hold_runs_is_refused_before_ray_starts(tmp_path, capsys, monkeypatch, command):
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    suite = tmp_path / "suite.json"
    suite.write_text(f'{{"entries": [{{"spec": "{spec}", "seeds": [13]}}]}}', encoding="utf-8")
    option, target = ("--runs-dir", suite) if command == "suite" else ("--runs-root", spec)
    (tmp_path / "a_file").write_text("x")
    for value, message in (("", f"error: {option}: an empty path (name a folder, or leave the option out)"),
                           (tmp_path / "a_file", f"{tmp_path / 'a_file'} is a file, not a folder (a run directory of "
                                                 f"{option} {tmp_path / 'a_file'})")):
        code = main([command, str(target), option, str(value), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, err
    with pytest.raises(SystemExit) as exit_:
        main([command, str(target), "--max-retries", "-1"])
    assert exit_.value.code == 2 and "--max-retries: expected at least 0, got -1" in capsys.readouterr().err
    assert (tmp_path / "a_file").read_text() == "x" and not (tmp_path / "m.db").exists()


def test_a_run_directory_in_a_read_only_folder_is_refused(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes in a read-only folder")
    spec = write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))
    (tmp_path / "locked").mkdir(mode=0o555)
    code, err = train(tmp_path, capsys, spec, "-s", tmp_path / "locked" / "run")
    assert code == 2 and "cannot make folders in" in err


# ---------------------------------------------------------------------------- Jsonnet that never ends
ENDLESS = "local f(x) = f(x) tailstrict; f(1)\n"
HUGE = "local fib(n) = if n < 2 then n else fib(n - 1) + fib(n - 2); { a: fib(60) }\n"  # time, not memory


@pytest.mark.parametrize("text", [ENDLESS, HUGE], ids=["endless recursion", "huge computation"])
def test_jsonnet_evaluation_is_stopped_at_its_time_limit(tmp_path, text):
    path = tmp_path / "endless.jsonnet"
    path.write_text(text)
    before, started = children_of(os.getpid()), time.monotonic()
    with pytest.raises(SpecError) as error:
        load_spec(path, jsonnet_timeout=1.5)
    assert 1.5 <= time.monotonic() - started < 30
    assert error.value.source == str(path) and len(error.value.problems) == 1
    assert "took longer than 1.5 s and was stopped" in str(error.value) and "--jsonnet-timeout" in str(error.value)
    assert children_of(os.getpid()) <= before  # the evaluator was killed and reaped: no process, no zombie left


@pytest.mark.parametrize("command", ["validate", "train", "quickstart"])
def test_jsonnet_timeout_on_the_command_line(tmp_path, command):
    path = tmp_path / "endless.jsonnet"
    path.write_text(ENDLESS)
    out = run_cli(command, path, "--jsonnet-timeout", "2", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"error: {path}: 1 error in spec:") and "took longer than 2 s" in out.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_jsonnet_timeout_must_be_a_positive_number_of_seconds(capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["validate", str(SPEC_FILE), "--jsonnet-timeout", value])
    assert exit_.value.code == 2 and "--jsonnet-timeout: expected a number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["validate", "train", "suite", "quickstart"])
def test_a_jsonnet_path_that_is_no_folder_is_refused(tmp_path, capsys, command):
    (tmp_path / "file").write_text("x")
    for value, why in (("", "an empty path (name a folder)"), (str(tmp_path / "none"), f"{tmp_path / 'none'}: no such "
                       f"folder"), (str(tmp_path / "file"), f"{tmp_path / 'file'}: not a folder")):
        with pytest.raises(SystemExit) as exit_:
            main([command, str(SPEC_FILE), "--jsonnet-path", value])
        assert exit_.value.code == 2 and f"argument --jsonnet-path: {why}" in capsys.readouterr().err


def test_the_child_evaluates_exactly_as_before(tmp_path):
    from multigrain.platform.commands.common import JSONNET_TIMEOUT
    from multigrain.platform.specs import JSONNET_TIMEOUT as SPECS_TIMEOUT

    assert JSONNET_TIMEOUT == SPECS_TIMEOUT
    assert load_spec(SPEC_FILE, jsonnet_timeout=None) == SPEC  # in-process: the spec of the child
    (tmp_path / "bad.jsonnet").write_text('{ a: std.extVar("missing") }')
    with pytest.raises(SpecError, match="missing ext var 'missing'"):
        load_spec(tmp_path / "bad.jsonnet")
    (tmp_path / "surrogate.jsonnet").write_text("{ a: std.char(55296) }")  # no UTF-8 for it in the output
    for timeout in (None, 30):
        with pytest.raises(SpecError, match="not valid UTF-8"):
            load_spec(tmp_path / "surrogate.jsonnet", jsonnet_timeout=timeout)


def test_a_runs_root_is_probed_once_for_all_its_run_directories(tmp_path, monkeypatch):
    import tempfile
    from multigrain.platform.commands.checks import check_runs_root

    made = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(kw["dir"]) or real(**kw))
    (tmp_path / "b").mkdir()
    check_runs_root(str(tmp_path), [tmp_path / "a1", tmp_path / "a2", tmp_path / "b" / "r", tmp_path / "a1"], "--x")
    assert sorted(made) == sorted([str(tmp_path), str(tmp_path / "b")])  # one probe a folder, none left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"] and not list((tmp_path / "b").iterdir())
