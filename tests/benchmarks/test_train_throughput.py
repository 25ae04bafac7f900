"""``benchmarks/train_throughput.py``: the bare loop it compares the trainer with does the trainer's
arithmetic (the same batches, optimizer, schedule, clipping and dropout masks give the same
weights, bit for bit), and a tiny run writes the results JSON with consistent ratios."""
import argparse
import dataclasses
import json
import statistics
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import train_throughput  # noqa: E402


@pytest.mark.parametrize("pack_targets", [False, True])
def test_the_bare_loop_trains_as_the_trainer_does(tmp_path, single_thread, pack_targets):
    args = argparse.Namespace(instances=120, batch_size=8, device="cpu", warmup=2, steps=2, pack_targets=pack_targets,
                              override=[])
    setup = train_throughput.Setup("small", args, tmp_path)
    initial = {k: v.clone() for k, v in setup.initial.items()}
    wall, cpu = setup.ours()
    assert wall > 0 and cpu > 0
    ours = {k: v.clone() for k, v in setup.model.state_dict().items()}
    setup.bare()
    bare = setup.model.state_dict()
    assert any(not torch.equal(ours[k], initial[k]) for k in ours)  # it trained
    assert all(torch.equal(ours[k], bare[k]) for k in ours)
    for diagnosis in ({"prebuilt": True}, {"prefetch": 0}):  # --diagnose's systems: the same steps again
        setup.ours(**diagnosis)
        assert all(torch.equal(ours[k], v) for k, v in setup.model.state_dict().items()), diagnosis
    assert setup.model.decoder.pack_targets is pack_targets
    assert all(t > 0 for t in setup.marian())
    assert setup.tokens == sum(int(b["mask"].sum()) + int((b["target_output"] != setup.model.subwords.pad).sum())
                               for b in (setup.model.tensorize([setup.instances[i] for i in idx])
                                         for idx in setup.measured))


def test_a_tiny_run_writes_its_json(tmp_path, monkeypatch, single_thread):
    out = tmp_path / "throughput.json"
    monkeypatch.setattr(sys, "argv", ["train_throughput.py", "--models", "plte", "--steps", "1", "--warmup", "1",
                                      "--rounds", "2", "--instances", "40", "--batch-size", "8", "--diagnose",
                                      "-o", "model.encoder.num_layers=1", "--out", str(out)])
    train_throughput.main()
    result = json.loads(out.read_text())
    assert result["threads"] == 1 and result["torch"] == torch.__version__ and len(result["load_average_before"]) == 3
    (row,) = result["models"]
    assert row["model"] == "plte" and "marian" not in row["cpu_seconds"]  # Marian only beside the translator
    ours, bare = (statistics.median(row["cpu_seconds"][k]) for k in ("ours", "bare"))
    assert row["ours_over_bare_cpu"] == round(bare / ours, 3) or abs(row["ours_over_bare_cpu"] - bare / ours) < 0.02
    assert row["ours_over_bare_wall"] > 0 and len(row["wall_seconds"]["ours"]) == 2
    assert set(row["wall_seconds"]) == {"ours", "bare", "ours_prebuilt", "ours_inline"}
    assert all(row[f"ours_{k}_over_bare_wall"] > 0 for k in ("prebuilt", "inline"))
    assert result["overrides"] == ["model.encoder.num_layers=1"]


def test_compile_where_it_cannot_run_is_skipped_with_its_reason(tmp_path, monkeypatch, single_thread):
    out = tmp_path / "throughput.json"
    monkeypatch.setattr(train_throughput, "refusal", lambda device: "trainer.compile: no Triton here")
    monkeypatch.setattr(sys, "argv", ["train_throughput.py", "--models", "plte", "--steps", "1", "--warmup", "1",
                                      "--rounds", "1", "--instances", "40", "--batch-size", "8", "--compile",
                                      "--out", str(out)])
    train_throughput.main()
    result = json.loads(out.read_text())
    assert result["compile_refused"] == "trainer.compile: no Triton here"
    assert set(result["models"][0]["wall_seconds"]) == {"ours", "bare"}


def test_each_models_row_is_written_as_it_lands(tmp_path, monkeypatch, single_thread):
    """A call stopped during its second model (a device call's time limit) keeps the first one's row."""
    out = tmp_path / "throughput.json"
    made, original = [], train_throughput.Setup

    def setup(*args, **kwargs):
        made.append(1)
        if len(made) == 2:
            raise KeyboardInterrupt  # as the time limit's signal would stop it
        return original(*args, **kwargs)

    monkeypatch.setattr(train_throughput, "Setup", setup)
    monkeypatch.setattr(sys, "argv", ["train_throughput.py", "--models", "plte,small", "--steps", "1", "--warmup", "1",
                                      "--rounds", "1", "--instances", "40", "--batch-size", "8", "--out", str(out)])
    with pytest.raises(KeyboardInterrupt):
        train_throughput.main()
    result = json.loads(out.read_text())
    assert [row["model"] for row in result["models"]] == ["plte"] and list(tmp_path.iterdir()) == [out]


def test_the_profile_names_what_ours_does_beyond_bare(tmp_path, single_thread):
    """``--profile``: ours does per step what bare does, plus one ``.to(device)`` per batch tensor
    (bare's batches were on the device before its clock started) and one in the loss sum, and over
    the epoch one read of that sum, at its end."""
    import throughput_profile

    steps = 4
    args = argparse.Namespace(instances=80, batch_size=8, device="cpu", warmup=1, steps=steps, pack_targets=False,
                              override=["model.encoder.num_layers=1"])
    setup = train_throughput.Setup("plte", args, tmp_path)
    result = throughput_profile.profile(setup, steps)
    ours, bare = result["ours"], result["bare"]
    assert ours["steps"] == bare["steps"] == steps and ours["host_ms"] > 0 and bare["host_ms"] > 0
    assert len(ours["top"]) == throughput_profile.TOP and "device_busy" not in ours  # a CPU run


    def tensors(value) -> int:
        if isinstance(value, torch.Tensor):
            return 1
        if isinstance(value, dict):
            return sum(map(tensors, value.values()))
        if dataclasses.is_dataclass(value):  # a LatticeBatch
            return sum(tensors(getattr(value, f.name)) for f in dataclasses.fields(value))
        return sum(map(tensors, value)) if isinstance(value, (list, tuple)) else 0

    moved = sum(tensors(setup.model.tensorize([setup.instances[i] for i in idx])) for idx in setup.measured)
    more = {row["op"]: (row["ours_calls"] - row["bare_calls"]) * steps for row in result["more_calls"]}
    # and one a step in the epoch's loss sum (float64, the loss float32)
    assert moved > 4 * steps and round(more["aten::to"]) == moved + steps
    reads = (ours["calls"]["aten::_local_scalar_dense"] - bare["calls"]["aten::_local_scalar_dense"]) * steps
    assert round(reads) == 1
