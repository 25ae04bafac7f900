"""An MLflow environment variable MLflow cannot parse: one line (exit 2) naming it, its value and
what MLflow takes, before any training work (``MLFLOW_ENABLE_ASYNC_LOGGING=maybe`` failed after the
first epoch: a ValueError traceback, a run directory without ``metrics.json``, an MLflow run FAILED)."""
import json
from pathlib import Path

import pytest

from multigrain.platform.commands import main as cli_main
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA

NO_RUNS = "leaderboard all experiments: no finished runs tagged leaderboard=true\n"


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def write_spec(folder: Path) -> Path:
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", folder / "train.bmes", 8)
    spec = folder / "spec.json"
    spec.write_text(json.dumps(tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, task="ner",
                                         dataset="resume")), encoding="utf-8")
    return spec



@pytest.mark.parametrize("name, value, takes, good", [
    ("MLFLOW_ENABLE_ASYNC_LOGGING", "maybe", "true, false, 1 or 0 (any case)", "TRUE"),  # read at log_batch: epoch 1
    ("MLFLOW_HTTP_REQUEST_TIMEOUT", "1.5", "a whole number", "7"),
    ("MLFLOW_CONFIGURE_LOGGING", "maybe", "true, false, 1 or 0 (any case)", "false"),  # `import mlflow` failed
])
def test_an_mlflow_variable_mlflow_cannot_parse_is_one_line_before_training(in_tmp, capsys, monkeypatch, name, value,
                                                                             takes, good):
    spec = write_spec(in_tmp)
    uri = f"sqlite:///{in_tmp / 'm.db'}"
    monkeypatch.setenv(name, value)
    line = f"error: environment variable {name}={value!r}: MLflow takes {takes}; change it or unset it\n"
    assert cli(capsys, "train", spec, "-s", in_tmp / "run", "--tracking-uri", uri) == (2, "", line)
    assert not (in_tmp / "run").exists() and not (in_tmp / "m.db").exists()
    assert cli(capsys, "leaderboard", "--all", "--tracking-uri", uri) == (2, "", line)
    monkeypatch.setenv(name, good)  # MLflow's own spellings pass
    assert cli(capsys, "leaderboard", "--all", "--tracking-uri", uri)[:2] == (0, NO_RUNS)
