"""Data-parallel training on Ray Train (``trainer.workers`` / ``--workers``, ``platform/ray/train.py``).

Oracle: the one-process training of the same spec. A BiLSTM-CRF (its loss is the mean over the
batch's sentences, dropout 0) on 11 sentences in global batches of 5 (slices 3+2, 3+2 and 1+0:
uneven slices and a replica with nothing to do) must give, on 2 gloo workers, the one-process
per-epoch loss curve, weights and metrics to float tolerance; both start their encoder from another
run (the spec's ``initializer``: each worker applies it, once). The 2-worker run is stopped after
epoch 1 and resumed from its ``last.pt``, so its end is also compared with that of an uninterrupted
training (the one-process one: an uninterrupted 2-worker run would cost a third Ray Train start-up,
20-50 s on a loaded 2-core machine). One MLflow run throughout; one local Ray for the module.
"""
import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import torch

from multigrain.platform.data_parallel import Replica
from multigrain.platform.runs import Run
from multigrain.platform.training import load_checkpoint
from multigrain.testing import SimulatedReplica
from tests.conftest import DATA, mlflow_runs

RTOL = 1e-4


def tagger_spec(folder: Path, epochs: int = 3, **trainer) -> dict:
    from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec

    src = DATA / "resume_ner" / "dev.char.bmes"
    folder.mkdir(parents=True, exist_ok=True)
    train = copy_sentences(src, folder / "train.bmes", 11)
    dev = copy_sentences(src, folder / "dev.bmes", 15, start=11)
    return tiny_spec(bilstm_tagger(hidden=8, dim=8, dropout=0.0), {"type": "resume_ner"}, train, dev, dev,
                     epochs=epochs, batch_size=5, lr=0.02, task="ner", **trainer)


def weights(run_dir: Path, name: str = "best.pt") -> dict:
    state = load_checkpoint(run_dir / name, "cpu")
    return state["model"] if "model" in state else state


def assert_close_weights(a: dict, b: dict, rtol: float) -> None:
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        torch.testing.assert_close(tensor, b[name], rtol=rtol, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")


def losses(result: dict) -> list:
    return [h["train_loss"] for h in result["history"]]


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(address="local", num_cpus=4, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, ray_local):
    """The spec's one-process run, and its 2-worker run stopped after epoch 1 and resumed, logged
    to MLflow (two Ray Train fits: each costs seconds of process start-up, the training none)."""
    from multigrain.platform.ray.train import RayTrainCluster
    from multigrain.platform.tracking import RunLogger

    folder = tmp_path_factory.mktemp("dp")
    with contextlib.redirect_stderr(io.StringIO()):  # the run both start their encoder from (``initializer``)
        Run({**tagger_spec(folder / "data", epochs=1), "seed": 3}, folder / "source").train()
    spec = {**tagger_spec(folder / "data"), "initializer": {"weights": str(folder / "source"),
                                                            "parameters": [r"^encoder\."]}}
    spec2 = {**spec, "trainer": {**spec["trainer"], "workers": 2}}
    uri = f"sqlite:///{folder / 'mlruns.db'}"
    err = {"one": io.StringIO(), "two": io.StringIO()}  # the epoch lines (stderr) of each training
    with contextlib.redirect_stderr(err["one"]):
        one = Run(spec, folder / "one").train()
    ray_train = RayTrainCluster().launcher  # the local Ray of the module
    with contextlib.redirect_stderr(err["two"]):
        stopped = Run(spec2, folder / "two").train(stop_after_epoch=1, logger=RunLogger(uri), data_parallel=ray_train)
    between = {"epoch": load_checkpoint(folder / "two" / "last.pt", "cpu")["epoch"],
               "mlflow": [r.info.status for r in mlflow_runs(uri)]}
    with contextlib.redirect_stderr(err["two"]):
        two = Run(spec2, folder / "two").train(resume=True, logger=RunLogger(uri), data_parallel=ray_train)
    return {"folder": folder, "uri": uri, "one": one, "stopped": stopped, "between": between, "two": two,
            "lines": {k: [line for line in v.getvalue().splitlines() if line.startswith("epoch ")]
                      for k, v in err.items()}}


def test_two_workers_train_as_one_process_with_the_same_global_batch(trained):
    folder, one, two = trained["folder"], trained["one"], trained["two"]
    assert len(losses(one)) == 3 and losses(one)[2] < losses(one)[0]  # it learns
    assert losses(two) == pytest.approx(losses(one), rel=RTOL)
    assert [h["validation_loss"] for h in two["history"]] == pytest.approx(
        [h["validation_loss"] for h in one["history"]], rel=RTOL)
    for name in ("best.pt", "last.pt"):
        assert_close_weights(weights(folder / "two", name), weights(folder / "one", name), RTOL)
    assert two["test"]["loss"] == pytest.approx(one["test"]["loss"], rel=RTOL)
    # the same run directory and results format; rank 0 wrote the checkpoints
    assert sorted(p.name for p in (folder / "two").iterdir()) == sorted(
        [p.name for p in (folder / "one").iterdir()] + ["tracking.json"])
    saved = json.loads((folder / "two" / "metrics.json").read_text(encoding="utf-8"))
    assert saved.keys() == one.keys() and saved["history"][0].keys() == one["history"][0].keys()
    assert saved["device"].startswith("Ray Train: 2 workers (gloo") and saved["finished"] is True
    last = load_checkpoint(folder / "two" / "last.pt", "cpu")
    assert last["epoch"] == 3 and len(last["replica_rng"]) == 2
    assert json.loads((folder / "two" / "config.json").read_text(encoding="utf-8"))["trainer"]["workers"] == 2


def test_a_stopped_two_worker_run_resumes_from_its_checkpoint_in_one_mlflow_run(trained):
    from mlflow.tracking import MlflowClient

    uri, stopped, two = trained["uri"], trained["stopped"], trained["two"]
    assert stopped["finished"] is False and stopped["epochs_completed"] == 1
    assert trained["between"] == {"epoch": 1, "mlflow": ["KILLED"]}  # stopped: resumable
    assert two["finished"] is True and two["epochs_completed"] == 3
    assert two["history"][0] == stopped["history"][0]  # epoch 1 is the stopped run's, not trained again
    [run] = mlflow_runs(uri)  # the stopped run continued, not a second one
    assert run.info.status == "FINISHED"
    history = MlflowClient(tracking_uri=uri).get_metric_history(run.info.run_id, "train_loss")
    assert sorted((m.step, m.value) for m in history) == [(i + 1, pytest.approx(v, rel=1e-9))
                                                          for i, v in enumerate(losses(two))]


def test_two_workers_print_the_one_process_epoch_line(trained):
    """The same summary line per epoch as a one-process run (``epoch_log``): train loss, dev
    metrics, best so far, elapsed and remaining time (the training seconds of the whole run)."""
    lines = trained["lines"]
    assert len(lines["one"]) == 3 and len(lines["two"]) == 3  # epoch 1 (stopped), then epochs 2 and 3 (resumed)
    shape = re.compile(r"epoch (\d)/3 \| train loss \d+\.\d{4} \| dev f1 [\d. a-z]+ \| best f1 \d\.\d{4} "
                       r"\(epoch \d\) \| elapsed ([\d.]+)s \| remaining ~([\d.]+)s")
    for k, (one, two, record) in enumerate(zip(lines["one"], lines["two"], trained["two"]["history"]), start=1):
        assert shape.fullmatch(one) and shape.fullmatch(two), (one, two)
        assert two.startswith(f"epoch {k}/3 | train loss {record['train_loss']:.4f} | dev f1 "
                              f"{record['validation_f1']:.4f} ")  # the numbers of the run's history
    elapsed = [float(shape.fullmatch(line).group(2)) for line in lines["two"]]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0  # the whole run's training time, across the resume
    assert lines["two"][-1].endswith("remaining ~0.0s")


# ------------------------------------------------------------------------------- without Ray
def test_replica_slices_cover_every_global_batch_once():
    for n in range(1, 12):
        for world in (1, 2, 3, 4):
            parts = [Replica(r, world, torch.device("cpu"), wrap=None).part(list(range(100, 100 + n)))
                     for r in range(world)]
            real = [(idx, share) for idx, share in parts if share > 0]
            assert sorted(i for idx, _ in real for i in idx) == list(range(100, 100 + n))
            assert sum(share for _, share in parts) == pytest.approx(1.0)
            assert max(len(i) for i, _ in real) - min(len(i) for i, _ in real) <= 1
            assert all(idx == [100] for idx, share in parts if share == 0)  # a placeholder of weight 0


def test_loss_count_weights_make_a_token_mean_loss_exact():
    """A loss averaged over tokens (``loss_count`` = the slice's tokens): the DDP average of
    W * w_r * grad L_r equals the gradient of the whole batch's token mean."""
    torch.manual_seed(0)
    tokens = [torch.randn(k, 3) for k in (5, 1, 7, 2, 4)]  # five instances of 5, 1, 7, 2, 4 tokens
    weight = torch.randn(3, requires_grad=True)

    def token_mean(items):
        return torch.cat([t @ weight for t in items]).pow(2).mean()

    full = torch.autograd.grad(token_mean(tokens), weight)[0]
    world = 2
    slices = [Replica(r, world, torch.device("cpu"), wrap=None).part(list(range(5))) for r in range(world)]
    counts = [sum(len(tokens[i]) for i in idx) for idx, _ in slices]
    averaged = torch.zeros(3)
    for r, (idx, share) in enumerate(slices):
        loss = token_mean([tokens[i] for i in idx])
        w = SimulatedReplica(r, [[c] for c in counts]).loss_weight(share, {"loss": loss, "loss_count": counts[r]})
        averaged += torch.autograd.grad(loss * (w * world), weight)[0] / world
    torch.testing.assert_close(averaged, full)
    # weighted by instances instead (no loss_count), the step is another one
    by_instances = sum(torch.autograd.grad(token_mean([tokens[i] for i in idx]) * share, weight)[0]
                       for idx, share in slices)
    assert not torch.allclose(by_instances, full)


def test_workers_flag_is_an_override_recorded_in_the_spec():
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.training import with_workers

    spec = {"trainer": {"num_epochs": 1, "optimizer": {"type": "adam"}}}
    same, note = with_workers(spec, 1)  # absent means 1: the one-process hash does not move
    assert spec_hash(same) == spec_hash(spec) and note is None
    two, note = with_workers(spec, 2)
    assert two["trainer"]["workers"] == 2 and spec_hash(two) != spec_hash(spec) and note is None
    assert "workers" not in spec["trainer"]  # the caller's spec is not changed
    four = {"trainer": {**spec["trainer"], "workers": 4}}
    replaced, note = with_workers(four, 2)
    assert replaced["trainer"]["workers"] == 2 and note == "--workers 2 replaces trainer.workers 4 of the spec"
    assert with_workers(four, 4) == (four, None)


def test_workers_without_an_executor_are_refused_before_anything_is_written(tmp_path):
    """The run knows no Ray: ``trainer.workers`` above 1 needs the executor its caller hands over
    (``data_parallel``), called with the run and the number of workers."""
    from multigrain.platform.errors import ConfigurationError

    spec = tagger_spec(tmp_path / "data", epochs=1, workers=2)
    for train in (lambda run: run.train(), lambda run: run.train_or_reuse()):
        with pytest.raises(ConfigurationError, match=r"^trainer.workers is 2: a data-parallel training needs an "
                                                     r"executor and none was given"):
            train(Run(spec, tmp_path / "run"))
        assert not (tmp_path / "run").exists()

    class Handed(Exception):
        pass

    class Launcher:
        device = torch.device("cpu")

        def train(self, *args, **kwargs):
            raise Handed()

    asked = []
    with pytest.raises(Handed):
        Run(spec, tmp_path / "run").train(data_parallel=lambda run, workers: asked.append((run, workers)) or Launcher())
    assert [(type(run).__name__, run.run_dir, workers) for run, workers in asked] == [("Run", tmp_path / "run", 2)]


def test_mixed_precision_on_the_cpu_is_refused_before_anything_is_written(tmp_path):
    from multigrain.platform.errors import ConfigurationError

    spec = tagger_spec(tmp_path / "data", epochs=1, mixed_precision="bf16", cuda_device=-1)
    with pytest.raises(ConfigurationError, match=r"trainer.mixed_precision: 'bf16' is autocast on a CUDA GPU"):
        Run(spec, tmp_path / "run").train()
    assert not (tmp_path / "run").exists()


def test_mixed_precision_names_its_choices(tmp_path):
    from multigrain.platform.errors import SpecError

    with pytest.raises(SpecError, match='trainer.mixed_precision: expected one of "bf16", "fp16", "auto", got "fp8"'):
        Run(tagger_spec(tmp_path / "data", mixed_precision="fp8"), tmp_path / "run")


def test_cli_workers_and_address_errors_write_nothing(tmp_path, in_tmp, capsys):
    from multigrain.platform.commands import main as cli_main
    from tests.conftest import write_spec

    spec = write_spec(tmp_path, tagger_spec(tmp_path / "data", epochs=1, workers=1))
    run = tmp_path / "run"
    assert cli_main(["train", spec, "--workers", "2", "-o", "trainer.workers=3", "-s", str(run), "--no-tracking"]) == 2
    assert "--workers and -o trainer.workers=... both set trainer.workers" in capsys.readouterr().err
    assert cli_main(["train", spec, "--address", "127.0.0.1:1", "-s", str(run), "--no-tracking"]) == 2
    assert "--address: this run trains in this process (trainer.workers is 1)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_code:
        cli_main(["train", spec, "--workers", "0", "-s", str(run)])
    assert exit_code.value.code == 2 and "expected at least 1" in capsys.readouterr().err
    assert not run.exists()


def test_cli_workers_replaces_the_specs_value_with_a_note(tmp_path, in_tmp, capsys):
    from multigrain.platform.commands import main as cli_main
    from tests.conftest import write_spec

    spec = write_spec(tmp_path, tagger_spec(tmp_path / "data", epochs=1, workers=2))
    assert cli_main(["train", spec, "--workers", "1", "-s", str(tmp_path / "run"), "--no-tracking"]) == 0
    assert "note: --workers 1 replaces trainer.workers 2 of the spec" in capsys.readouterr().err
    saved = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert saved["trainer"]["workers"] == 1
    assert json.loads((tmp_path / "run" / "metrics.json").read_text(encoding="utf-8"))["device"].startswith("CPU")


def test_a_workers_error_reaches_the_user_as_its_own_message():
    from ray.train import ControllerError, WorkerGroupError

    from multigrain.platform.errors import ConfigurationError, MultigrainError
    from multigrain.platform.ray.train import _worker_error

    damaged = WorkerGroupError("...", {0: RuntimeError("gloo timeout"), 1: ConfigurationError("x/last.pt: damaged")})
    seen = _worker_error(damaged)
    assert isinstance(seen, MultigrainError) and str(seen) == "x/last.pt: damaged"  # the CLI: exit 2, no trace
    nan = _worker_error(WorkerGroupError("...", {1: FloatingPointError("epoch 2: the loss became nan")}))
    assert isinstance(nan, FloatingPointError) and str(nan) == "epoch 2: the loss became nan"
    other = _worker_error(WorkerGroupError("...", {0: RuntimeError("boom"), 1: KeyError("k")}))
    assert str(other) == "Ray Train workers failed:\nrank 0: RuntimeError: boom\nrank 1: KeyError: 'k'"
    controller = _worker_error(ControllerError(ValueError("no placement group")))
    assert str(controller) == "Ray Train failed: ValueError: no placement group"
