"""A configuration tag in brackets survives every leaderboard format (Rich markup is escaped), and
``-o +KEY=VALUE`` adds a key where plain ``-o`` stays strict with a hint naming ``+``."""
import io
import json

import pytest
from rich.console import Console

from multigrain.platform.errors import SpecError
from multigrain.platform.leaderboard import as_csv, markdown, render
from multigrain.platform.specs import apply_overrides

ROW = {"rank": 1, "experiment": "pair/bq", "name": "bq_mwa [small]", "model": "pair_classifier",
       "encoder": "mwa [bold]x[/bold]", "metric": "test_accuracy", "ours": "84.10", "seeds": 3, "paper": None,
       "spec_hash": "0123456789abcdef", "date": "2026-11-27 12:00",
       "value": 0.841, "std": 0.002, "run_id": "r1"}


def test_bracketed_names_are_shown_as_written_in_every_format(capsys):
    out = io.StringIO()
    render("pair/[bq]", [ROW], "table", console=Console(file=out, width=300))
    table = out.getvalue()
    assert "bq_mwa [small]" in table and "mwa [bold]x[/bold]" in table and "leaderboard: pair/[bq]" in table
    assert "bq_mwa [small]" in markdown([ROW]) and "bq_mwa [small]" in as_csv([ROW])
    render("pair/bq", [ROW], "json")
    assert json.loads(capsys.readouterr().out)[0]["name"] == "bq_mwa [small]"


SPEC = {"dataset_reader": {"type": "msra"}, "trainer": {"optimizer": {"lr": 0.1}}}


def test_plus_adds_a_key_and_plain_override_stays_strict():
    spec = apply_overrides(SPEC, ["+dataset_reader.max_instances=300", "trainer.optimizer.lr=0.01"])
    assert spec == {"dataset_reader": {"type": "msra", "max_instances": 300}, "trainer": {"optimizer": {"lr": 0.01}}}
    assert SPEC["dataset_reader"] == {"type": "msra"}  # the input is not changed
    with pytest.raises(SpecError) as e:
        apply_overrides(SPEC, ["dataset_reader.max_instances=300"])
    assert ("override dataset_reader.max_instances: dataset_reader has no key 'max_instances'; keys there: type; "
            "to add it, use -o +dataset_reader.max_instances=VALUE") in str(e.value)


def test_plus_refuses_an_existing_key_and_a_missing_parent():
    with pytest.raises(SpecError) as e:
        apply_overrides(SPEC, ["+trainer.optimizer.lr=0.5", "+trainer.optimiser.lr=0.5"])
    text = str(e.value)
    assert "override +trainer.optimizer.lr: trainer.optimizer already has key 'lr'; replace its value with " \
           "-o trainer.optimizer.lr=VALUE" in text
    assert "override +trainer.optimiser.lr: trainer has no key 'optimiser' (did you mean 'optimizer'?)" in text
