"""The shipped smoke suite (``jsonnet_configs/suites/smoke.jsonnet``: NER, classification, sentence
pairs and translation at tiny sizes, 7 runs) trained twice from nothing on a local Ray of 2 CPUs:
the second training is checked (``multigrain suite --check``) against the board exported from the
first, and every row is reproduced. A few minutes on 2 cores: the one test that runs the real
suite end to end."""
import json
import re
from pathlib import Path

from multigrain.platform.commands import main as cli_main
from tests.conftest import ROOT
from tests.platform.distributed.test_suite import ray_local  # noqa: F401  (a local Ray of 2 CPUs per module)

SMOKE = "jsonnet_configs/suites/smoke.jsonnet"


def train_smoke(tmp: Path, name: str, capsys) -> tuple[str, str]:
    runs, uri = str(tmp / name / "runs"), f"sqlite:///{tmp / name / 'mlruns.db'}"
    (tmp / name).mkdir()
    assert cli_main(["suite", SMOKE, "--runs-dir", runs, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "7 runs: 7 to train, 0 to resume, 0 to reuse" in out
    finished = [line for line in out.splitlines() if line.startswith("finished ")]
    assert len(finished) == 7, out
    mt = next(line for line in finished if "tvsub_transformer_small [smoke]" in line)
    for scored in (r"; tvsub bleu \d+\.\d{4};", r"; wmt22 bleu_cased \d+\.\d{4}$"):  # each test set's score
        assert re.search(scored, mt), mt
    return runs, uri


def test_the_smoke_suite_reproduces_a_board_written_by_an_earlier_run_of_it(ray_local, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the specs' data paths are relative to the repository root
    monkeypatch.setenv("CI", "true")
    _, first_store = train_smoke(tmp_path, "first", capsys)
    board = tmp_path / "board.json"
    assert cli_main(["leaderboard", "--all", "--tracking-uri", first_store, "--export", str(board)]) == 0
    exported = json.loads(board.read_text(encoding="utf-8"))["runs"]
    assert {r["experiment"] for r in exported} >= {"ner/resume", "cls/chnsenticorp", "pair/bq", "mt/tvsub"}

    second_runs, _ = train_smoke(tmp_path, "second", capsys)  # from nothing: other directories, other store
    assert cli_main(["suite", SMOKE, "--runs-dir", second_runs, "--check", str(board)]) == 0
    out = capsys.readouterr().out
    assert "5 reproduced, 0 differs, 0 missing, 0 new" in out, out
    for task in ("ner/resume", "cls/chnsenticorp", "pair/bq", "mt/tvsub"):
        assert re.search(rf"^reproduced {re.escape(task)} ", out, re.MULTILINE), (task, out)

    # one score moved by a point on the board: that row differs, and the check fails
    moved = json.loads(board.read_text(encoding="utf-8"))
    for run in moved["runs"]:
        if run["tags"].get("suite_entry") == "bq_backbone [smoke]":
            run["metrics"] = {k: v + 0.01 for k, v in run["metrics"].items()}
    board.write_text(json.dumps(moved), encoding="utf-8")
    assert cli_main(["suite", SMOKE, "--runs-dir", second_runs, "--check", str(board)]) == 1
    assert "4 reproduced, 1 differs" in capsys.readouterr().out
