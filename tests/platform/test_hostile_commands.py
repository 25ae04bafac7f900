"""Bad command lines and suite files, round three: each is one clear error (exit 2) before Ray
starts or anything is written, never a traceback, a silent choice or a wait without end."""
from __future__ import annotations

import json
import re
import sys

import pytest

from multigrain.platform.commands import main
from multigrain.platform.commands.sweep import refuse_grid_overrides
from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.ray.serve_batching import RequestError, check_declared_length
from multigrain.platform.ray.sweep import MAX_TRIALS, check_placement, expand_sweep
from multigrain.platform.ray.sweep_options import parse_grid, parse_resources
from multigrain.platform.specs import apply_overrides
from multigrain.platform.suite import load_suite
from tests.conftest import resume_tagger_spec, write_spec


@pytest.fixture
def spec_file(tmp_path):
    return write_spec(tmp_path, resume_tagger_spec(tmp_path / "data"))


def cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("index", ["²", "١", "9" * 5000])
def test_a_list_index_is_ascii_digits(index):
    with pytest.raises(SpecError, match="b is a list of 2; .* is not an index in it"):
        apply_overrides({"b": [1, 2]}, [f"b.{index}=3"])
    assert apply_overrides({"b": [1, 2]}, ["b.1=3"]) == {"b": [1, 3]}


@pytest.mark.parametrize("declared", ["²", "١٠", "-1", "0x10"])
def test_a_content_length_is_ascii_digits(declared):
    with pytest.raises(RequestError) as e:
        check_declared_length(declared, 100)
    assert e.value.status == 400 and e.value.message == f"Content-Length {declared!r} is not a number of bytes"
    with pytest.raises(RequestError, match="the body is more than 10\\^19 bytes"):
        check_declared_length("9" * 5000, 100)


def suite_file(tmp_path, spec_file, entries) -> str:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"entries": [{"spec": spec_file, "seeds": [1], **e} for e in entries]}),
                    encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("entries, message", [
    ([{"name": [1]}], "entries[0].name: expected a non-empty string, got [1]"),
    ([{"name": 5}], "entries[0].name: expected a non-empty string, got 5"),
    ([{}, {"overrides": {"trainer.num_epochs": 2}}], "entries[1]: named 'tiny' as entries[0] is; give one of them a "
                                                     "name of its own"),
    ([{"name": "a", "configs": {"x": {}}}, {"name": "a [x]"}], "entries[1]: named 'a [x]' as entries[0] is"),
    ([{"configs": {"a": ["trainer.num_epochs=1", "trainer.num_epochs=4"]}}],
     "entries[0].configs.a: override trainer.num_epochs: given twice (1 and 4); give it once"),
    ([{"overrides": ["seed=1", "+seed=2"]}], "entries[0].overrides: override seed: given twice (1 and 2)"),
], ids=["name a list", "name a number", "two entries one name", "a name and a tag", "a key twice in a configuration",
        "a key twice in overrides"])
def test_suite_entries_are_named_once_and_set_a_key_once(tmp_path, spec_file, entries, message):
    with pytest.raises(SpecError) as e:
        load_suite(suite_file(tmp_path, spec_file, entries))
    assert message in str(e.value)


def test_a_suite_named_apart_is_read(tmp_path, spec_file):
    suite = load_suite(suite_file(tmp_path, spec_file, [{}, {"name": "longer", "overrides": ["trainer.num_epochs=2"]}]))
    assert len(suite["entries"]) == 2


def test_a_grid_over_the_limit_is_refused_before_it_is_expanded(spec_file):
    from multigrain.platform.specs import load_spec

    spec = load_spec(spec_file)
    grid = parse_grid([f"trainer.optimizer.lr={json.dumps([i / 1000 for i in range(1, 1001)])}",
                       f"model.encoder.hidden_size={json.dumps(list(range(1, 1001)))}"])
    with pytest.raises(ConfigurationError, match=f"1,000,000 trials \\(1000 x 1000 points x 1 seed\\); a sweep runs at "
                                                 f"most {MAX_TRIALS:,}"):
        expand_sweep(spec, grid, 1, "tiny")
    with pytest.raises(ConfigurationError, match="2,000 trials"):
        expand_sweep(spec, grid[:1], 2, "tiny")


def test_a_key_in_both_the_grid_and_an_override_is_refused():
    grid = parse_grid(["trainer.optimizer.lr=[0.1,0.2]"])
    with pytest.raises(SpecError, match="--grid trainer.optimizer.lr: also set by -o trainer.optimizer.lr"):
        refuse_grid_overrides(grid, ["trainer.num_epochs=2", "trainer.optimizer.lr=NaN"])
    refuse_grid_overrides(grid, ["trainer.num_epochs=2"])


def test_resources_the_cluster_lacks_are_refused_on_a_local_ray():
    cluster = {"CPU": 2.0, "memory": 4e9}
    for options, message in (({"num_cpus": 1, "resources": {"foo": 1}}, "resources.foo=1 but the cluster has 0 foo"),
                             ({"num_cpus": 1, "memory": 1e18}, "memory=1e+18 but the cluster has 4e+09 memory"),
                             ({"num_cpus": 1, "accelerator_type": "A100"}, "accelerator_type")):
        with pytest.raises(ConfigurationError, match=re.escape(message)):
            check_placement(options, [], cluster, local=True)
        assert check_placement(options, [], cluster, local=False)  # a remote cluster may grow: a warning
    for text, message in (('{"resources": "x"}', "resources must be an object of numbers >= 0"),
                          ('{"resources": {"foo": -1}}', "resources must be an object of numbers >= 0"),
                          ('{"accelerator_type": 5}', "accelerator_type must be a name")):
        with pytest.raises(ConfigurationError, match=message):
            parse_resources(text)


@pytest.mark.parametrize("args, message", [
    (["suite", "s.json", "--num-gpus", "-1"], "argument --num-gpus: -1: must be a number of 0 or more"),
    (["suite", "s.json", "--num-gpus", "nan"], "argument --num-gpus: nan: expected a finite number"),
    (["submit", "s.json", "--num-cpus", "nan"], "argument --num-cpus: nan: expected a finite number"),
    (["evaluate-all", "r", "--data", "d", "--num-cpus", "0"], "argument --num-cpus: 0: must be a number more than 0"),
])
def test_resource_counts_on_the_command_line(capsys, args, message):
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_submit_checks_the_spec_as_train_does(spec_file, capsys):
    code, err = cli(capsys, "submit", spec_file, "-o", "dataset=../../x", "--address", "http://127.0.0.1:9")
    assert code == 2 and "dataset: not a safe name" in err and "cannot reach" not in err, err


def test_a_plugin_that_exits_at_import_is_an_error(tmp_path, spec_file, capsys, monkeypatch):
    (tmp_path / "plug_exit.py").write_text("import sys\nsys.exit(0)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "plug_exit", raising=False)
    code, err = cli(capsys, "--include-package", "plug_exit", "validate", spec_file)
    assert code == 2 and "--include-package plug_exit: importing it failed: SystemExit: 0" in err, err


def test_leaderboard_json_and_another_format_is_refused(capsys, tmp_path):
    code, err = cli(capsys, "leaderboard", "--all", "--json", "--format", "md", "--tracking-uri",
                    f"sqlite:///{tmp_path / 'm.db'}")
    assert code == 2 and err.strip() == "error: --json and --format md: give one of them"
    assert not (tmp_path / "m.db").exists()
