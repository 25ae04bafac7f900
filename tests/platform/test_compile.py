"""``trainer.compile: true``: the training forward runs through torch.compile (Inductor on the CPU
here) and trains as the eager model does; where torch.compile cannot run, the spec is refused
with the reason before the run directory exists."""
import pytest
import torch

from multigrain.platform import compiling
from multigrain.platform.batching import BatchIterator
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Model
from multigrain.platform.runs import Run
from multigrain.platform.compiling import refusal as compile_refusal
from multigrain.platform.training import Trainer, seed_everything, trainer_settings
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA


class Regression(Model):
    """y = MLP(x), mean squared error: a model small enough for Inductor to compile in seconds."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def tensorize(self, instances):
        return {"x": torch.stack([x for x, _ in instances]), "y": torch.stack([y for _, y in instances])}

    def forward(self, x, y):
        return {"loss": torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)}


def regression_trainer(tmp_path, compile: bool) -> Trainer:
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(96, 4, generator=g)
    data = [(x, torch.sin(x).sum() + 0.1 * x[0] ** 2) for x in xs]
    seed_everything(3)
    config = trainer_settings({"trainer": {"optimizer": {"type": "adam", "lr": 0.01}, "num_epochs": 4,
                                           **({"compile": True} if compile else {})}})
    batches = BatchIterator(data, Regression().tensorize, lambda _: 1, batch_size=16, shuffle=True, seed=1)
    return Trainer(config, Regression(), batches, None, tmp_path)


def test_compiled_training_follows_eager_training(tmp_path, single_thread):
    torch._dynamo.reset()
    losses, weights = {}, {}
    for compiled in (False, True):
        trainer = regression_trainer(tmp_path, compiled)
        assert isinstance(trainer.stepped, torch._dynamo.eval_frame.OptimizedModule) == compiled
        losses[compiled] = [trainer._train_epoch(epoch)["loss"] for epoch in range(4)]
        weights[compiled] = trainer.model.state_dict()
    assert losses[False][-1] < 0.5 * losses[False][0]  # it learns
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
    for name, eager in weights[False].items():
        torch.testing.assert_close(weights[True][name], eager, rtol=1e-4, atol=1e-5)
    from torch._dynamo.utils import counters

    assert counters["stats"]["unique_graphs"] >= 1  # Dynamo did capture the forward


def test_refusals_say_why(monkeypatch):
    cpu = torch.device("cpu")
    assert compile_refusal(cpu) is None  # this machine has g++
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    assert compile_refusal(cpu).startswith("trainer.compile: torch.compile cannot run here: TorchDynamo does not "
                                           "support Python ")
    monkeypatch.undo()

    from torch._inductor import cpp_builder

    def no_compiler():
        raise RuntimeError("No working C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    assert compile_refusal(cpu) == ("trainer.compile: torch.compile cannot run here: Inductor finds no C++ compiler "
                                    "(RuntimeError: No working C++ compiler found); remove the key (or -o "
                                    "trainer.compile=false) to train eagerly")
    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", lambda: "no-such-g++")
    assert "Inductor's C++ compiler 'no-such-g++' is not on PATH" in compile_refusal(cpu)


def test_compile_where_it_cannot_run_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 8)
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, task="ner", compile=True)
    monkeypatch.setattr(compiling, "refusal", lambda device: "trainer.compile: torch.compile cannot run "
                                                                    "here: no compiler (test)")
    with pytest.raises(ConfigurationError, match=r"^trainer\.compile: torch\.compile cannot run here: no compiler"):
        Run(spec, tmp_path / "run").train()
    assert not (tmp_path / "run").exists()
    without = dict(spec, trainer={k: v for k, v in spec["trainer"].items() if k != "compile"})
    assert Run(without, tmp_path / "plain").spec_hash != Run(spec, tmp_path / "run").spec_hash
