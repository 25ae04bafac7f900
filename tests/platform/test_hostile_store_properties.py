"""Properties of what may enter the tracking store (``platform/store_names.py``): experiment names
are refused exactly when unsafe (everywhere they enter: the rule, an import row, a spec) and their
artifacts land inside the store; metric/param/tag keys are refused exactly when MLflow would
refuse them midway through a write."""
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.platform.test_hostile_store import board_file, row

SAFE = set(string.ascii_letters + string.digits + "_-.")
ALPHABET = string.ascii_letters[:6] + string.digits[:3] + "_-./\\:\u0000 \n" + "é中Ａ／．\u2024"
safe_segment = st.text("".join(sorted(SAFE)), min_size=1, max_size=8)
segment = st.one_of(safe_segment, st.text(ALPHABET, max_size=6), st.sampled_from([".", "..", "...", "", "a" * 101]))
names = st.one_of(st.builds("{}/{}".format, safe_segment, safe_segment),  # mostly valid
                  st.builds("/".join, st.lists(segment, min_size=1, max_size=3)), st.text(ALPHABET, max_size=12))


def expected_name(name: str) -> bool:
    """The rule, spelled out: ``<task>/<dataset>``, each 1..100 of ASCII letters, digits, ``_-.``, not ``.``/``..``."""
    parts = name.split("/")
    return len(parts) == 2 and all(0 < len(p) <= 100 and set(p) <= SAFE and p not in (".", "..") for p in parts)


@settings(max_examples=300, deadline=None)
@given(names)
def test_property_experiment_names_are_refused_exactly_when_unsafe(name):
    from multigrain.platform.experiment import name_problems
    from multigrain.platform.portable import read_board
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.store_names import experiment_problem, inside

    valid = expected_name(name)
    assert (experiment_problem(name) is None) == valid, name
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "store" / "mlruns"
        if valid:  # where its artifacts go: inside the store
            assert inside(root / name, root) and (root / name).resolve().parent.parent == root.resolve()
        path = board_file(Path(folder) / "b.json", [row(experiment=name)])
        try:
            read_board(path)
            accepted = True
        except ConfigurationError as e:
            accepted = False
            assert f"{path}: runs[0] (id r1): experiment: " in str(e)
        assert accepted == valid
    task, _, dataset = name.partition("/")
    spec = {"task": task, "dataset": dataset, "train_data_path": "x/y.txt"}
    assert (name_problems(spec) == []) == expected_name(f"{task}/{dataset or 'x'}"), name  # x: the data's folder


keys = st.one_of(st.text(ALPHABET + "/ ", max_size=10),
                 st.sampled_from(["../x", "/abs", "a/../b", "a//b", "./a", "a/", ".", "..", "...", "", "x" * 251,
                                  "a\n", "a/."]))


@settings(max_examples=300, deadline=None)
@given(keys)
def test_property_we_refuse_exactly_the_keys_mlflow_would_refuse_midway(key):
    """Metric, param and tag keys: accepted exactly when MLflow stores them as they are, so a whole
    file is refused before its first write; stricter only on what MLflow lets through by accident
    (a trailing newline) or refuses later (empty, over 250 characters)."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_metric_name

    from multigrain.platform.store_names import key_problem

    try:
        _validate_metric_name(key)
        mlflow_stores = 0 < len(key) <= 250 and not key.endswith("\n")
    except MlflowException:
        mlflow_stores = False
    assert (key_problem(key) is None) == mlflow_stores, key
    if mlflow_stores:  # and nothing of it reads as a path elsewhere
        assert not key.startswith(("/", "..")) and ".." not in key.split("/") and "\0" not in key
