"""benchmarks/mt_pairs.py: the device session's pair count from the plan_mt line."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import mt_pairs  # noqa: E402

# as cuda_checks.py printed it (CPU rehearsal of 2026-11-26)
PLAN = ("PASS plan_mt (22.1 s): transformer base: 8505 ms/step, one epoch of 429,501 pairs ~475.7 min; "
        "big base: 8264 ms/step, one epoch of 429,501 pairs ~462.2 min\n")


def test_the_slower_encoder_sets_the_step_time():
    assert mt_pairs.step_seconds("epoch 1/1 | ...\n" + PLAN + "1 of 1 checks passed\n") == pytest.approx(8.505)
    assert mt_pairs.step_seconds("FAIL plan_mt (3.0 s): RuntimeError: CUDA out of memory\n") is None


def test_the_plan_line_of_the_size_asked_for():
    small = PLAN.replace("base", "small").replace("8505", "300").replace("8264", "250")
    assert mt_pairs.step_seconds(small, "small") == pytest.approx(0.3)
    assert mt_pairs.step_seconds(small, "base") is None


def test_the_batch_sizes_are_the_specs():
    import mt_results

    for size, batch in mt_pairs.BATCH.items():
        assert mt_results.prepared_spec("big", size, 13)["data_loader"]["batch_size"] == batch


def test_pairs_fit_the_seconds_left():
    per_step, seconds = 0.09, 330.0
    pairs = mt_pairs.affordable_pairs(per_step, seconds, epochs=1)
    assert pairs % 1000 == 0

    def needed(n, size="base", stretch=mt_pairs.SIDE_BY_SIDE):
        return mt_pairs.OVERHEAD_S + n * mt_pairs.READ_S_PER_PAIR + n / mt_pairs.BATCH[size] * per_step * stretch

    assert needed(pairs) <= seconds < needed(pairs + 1000)
    six = mt_pairs.affordable_pairs(per_step, seconds, epochs=1, size="small", processes=6)
    six_stretch = 6 * mt_pairs.STRETCH_PER_PROCESS
    assert needed(six, "small", six_stretch) <= seconds < needed(six + 1000, "small", six_stretch)
    assert (mt_pairs.stretch(1), mt_pairs.stretch(2)) == (1.0, mt_pairs.SIDE_BY_SIDE)
    assert mt_pairs.stretch(4) == 4 * mt_pairs.STRETCH_PER_PROCESS > mt_pairs.SIDE_BY_SIDE
    assert mt_pairs.affordable_pairs(per_step, seconds, epochs=2) < pairs
    assert mt_pairs.affordable_pairs(0.001, 10_000, epochs=1) == mt_pairs.TVSUB_TRAIN_PAIRS
    assert mt_pairs.affordable_pairs(10.0, 60, epochs=1) == 1000


def test_cli(tmp_path, capsys):
    log = tmp_path / "session.log"
    log.write_text(PLAN, encoding="utf-8")
    assert mt_pairs.main(["--log", str(log), "--seconds", "5000"]) == 0
    assert int(capsys.readouterr().out) == mt_pairs.affordable_pairs(8.505, 5000, 1)
    assert mt_pairs.main(["--log", str(log), "--seconds", "5000", "--size", "small"]) == 2
    assert "no 'PASS plan_mt' line with small ms/step figures" in capsys.readouterr().err
    assert mt_pairs.main(["--log", str(log), "--seconds", "5000", "--pairs", "20000"]) == 0
    assert capsys.readouterr().out.strip() == "20000"
    log.write_text("PASS beam (1.0 s): ...\n", encoding="utf-8")
    assert mt_pairs.main(["--log", str(log), "--seconds", "5000"]) == 2
    assert "no 'PASS plan_mt' line" in capsys.readouterr().err


def test_token_batches_count_their_pairs_per_step():
    per_step, seconds = 0.25, 480.0
    pairs = mt_pairs.affordable_pairs(per_step, seconds, epochs=1, size="small", processes=6, batch_pairs=350)

    def needed(n):
        return mt_pairs.OVERHEAD_S + n * mt_pairs.READ_S_PER_PAIR + n / 350 * per_step * mt_pairs.stretch(6)

    assert needed(pairs) <= seconds < needed(pairs + 1000)
    assert pairs > mt_pairs.affordable_pairs(per_step, seconds, epochs=1, size="small", processes=6)
