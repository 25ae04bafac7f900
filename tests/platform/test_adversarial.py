"""``trainer.adversarial``: the fast gradient method (Miyato et al. 2017). The step's gradient is
grad L(E) + grad L(E + epsilon g / ||g||), checked against the same sum computed by hand with
``torch.func.functional_call``; the embeddings come back bit for bit; a Trainer runs the second
pass on matrices moved by exactly epsilon; bad settings are refused before anything is written."""
import pytest
import torch
from torch.func import functional_call

from multigrain.platform.adversarial import AdversarialConfig, FastGradient
from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.runs import Run
from multigrain.platform.training import trainer_settings
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA
from tests.platform.test_step_loop_sync import syncs_in_epoch, tagger_trainer


class Bag(torch.nn.Module):
    """Mean of token embeddings -> linear -> cross-entropy; the embedding is the attacked matrix."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(12, 5)
        self.out = torch.nn.Linear(5, 3)

    def forward(self, tokens, labels):
        return torch.nn.functional.cross_entropy(self.out(torch.tanh(self.embed(tokens)).mean(1)), labels)


def batch():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 8, (6, 4), generator=g), torch.randint(0, 3, (6,), generator=g)


def test_the_step_gradient_is_the_clean_plus_the_perturbed_one():
    torch.manual_seed(0)
    model = Bag()
    tokens, labels = batch()
    params = dict(model.named_parameters())
    clean = torch.autograd.grad(model(tokens, labels), list(params.values()))
    g = clean[0]
    r = 0.7 * g / torch.linalg.vector_norm(g)
    moved = {**params, "embed.weight": params["embed.weight"] + r}
    perturbed = torch.autograd.grad(functional_call(model, moved, (tokens, labels)), list(params.values()))
    before = model.embed.weight.detach().clone()

    model(tokens, labels).backward()
    attack = FastGradient(model, AdversarialConfig(epsilon=0.7, parameters=r"^embed\."))
    with attack.perturbed():
        assert torch.allclose(model.embed.weight - before, r, atol=1e-7)
        model(tokens, labels).backward()
    assert torch.equal(model.embed.weight, before)
    for (name, p), c, a in zip(params.items(), clean, perturbed):
        assert torch.allclose(p.grad, c + a, atol=1e-6), name
    assert not torch.allclose(perturbed[1], clean[1])  # the attack changes the loss surface the step sees
    unused = [row for row in range(12) if row not in tokens]
    assert torch.equal(perturbed[0][unused], torch.zeros(len(unused), 5))


def test_a_zero_gradient_moves_nothing():
    model = Bag()
    model.embed.weight.grad = torch.zeros_like(model.embed.weight)
    before = model.embed.weight.detach().clone()
    with FastGradient(model, AdversarialConfig(parameters="embed")).perturbed():
        assert torch.equal(model.embed.weight, before)


def test_the_trainer_runs_a_second_pass_at_embeddings_moved_by_epsilon(tmp_path, single_thread):
    trainer = tagger_trainer(tmp_path, adversarial={"epsilon": 0.5, "parameters": r"embedder\.\w+\.weight$"})
    matrices = trainer.adversary.params
    assert len(matrices) == 2  # the character and the bigram embeddings
    seen = []
    forward = trainer.stepped.forward

    def recording(**inputs):
        seen.append([m.detach().clone() for m in matrices])
        return forward(**inputs)

    trainer.stepped.forward = recording
    trainer._train_epoch(0)
    steps = trainer.train_data.num_batches(0)
    assert len(seen) == 2 * steps
    for clean, attacked in zip(seen[0::2], seen[1::2]):
        for c, a in zip(clean, attacked):
            assert torch.linalg.vector_norm(a - c).item() == pytest.approx(0.5, rel=1e-4)


def test_adversarial_training_adds_no_host_sync(tmp_path, single_thread):
    trainer = tagger_trainer(tmp_path, adversarial={"epsilon": 1.0, "parameters": "embedder"})
    trainer.sync_seconds = float("inf")
    syncs, metrics = syncs_in_epoch(trainer, 0)
    assert syncs == 1 and metrics["loss"] > 0


@pytest.mark.parametrize("adversarial, line", [
    ({"epsilon": 0.0}, "trainer.adversarial.epsilon: 0.0 is out of range: expected > 0"),
    ({"epsilon": -1.0}, "trainer.adversarial.epsilon: -1.0 is out of range: expected > 0"),
    ({"parameters": "embed("}, "trainer.adversarial: AdversarialConfig: parameters: 'embed(' is not a regular "
                               "expression (missing ), unterminated subpattern at position 5)"),
    ({"epsilon": 1.0, "size": 2}, "trainer.adversarial.size: unknown key for AdversarialConfig; valid keys: "
                                  "epsilon, parameters"),
])
def test_bad_settings_are_spec_errors_at_their_path(adversarial, line):
    with pytest.raises(SpecError) as caught:
        trainer_settings({"trainer": {"optimizer": {"type": "adam", "lr": 0.01}, "adversarial": adversarial}})
    assert str(caught.value).splitlines()[1:] == [f"  {line}"]


def resume_spec(tmp_path, **trainer) -> dict:
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "train.bmes", 8)
    return tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, task="ner", **trainer)


def test_a_pattern_that_names_no_parameter_is_refused_before_anything_is_written(tmp_path):
    spec = resume_spec(tmp_path, adversarial={"parameters": "word_embeddings"})
    with pytest.raises(ConfigurationError) as caught:
        Run(spec, tmp_path / "run").train()
    message = str(caught.value)
    assert message.startswith("trainer.adversarial.parameters: 'word_embeddings' matches no trainable parameter")
    assert "its embedding matrices: embedder." in message
    assert not (tmp_path / "run").exists()


def test_adversarial_training_with_several_workers_is_refused(tmp_path):
    spec = resume_spec(tmp_path, adversarial={"parameters": "embedder"}, workers=2)
    with pytest.raises(ConfigurationError, match=r"^trainer\.adversarial: adversarial training runs in one process"):
        Run(spec, tmp_path / "run").train(data_parallel=lambda run, workers: None)
    assert not (tmp_path / "run").exists()

