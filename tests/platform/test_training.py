"""Trainer: bit-identical resume, the tagger's model test case, the run directory as an archive."""
import json

import pytest
import torch

from multigrain.platform.runs import Run
from multigrain.platform.training import load_checkpoint
from multigrain.testing import ModelTestCase, bilstm_tagger, copy_sentences, lattice_embedder, tiny_spec
from tests.conftest import DATA

RESUME = {"type": "resume_ner"}
#: the spec keys every run of this file shares
NER = {"task": "ner", "grad_clipping": 5.0}


@pytest.fixture
def tiny_files(tmp_path):
    src = DATA / "resume_ner" / "dev.char.bmes"
    return copy_sentences(src, tmp_path / "train.bmes", 24), copy_sentences(src, tmp_path / "dev.bmes", 8)


@pytest.mark.parametrize("trainer", [{}, {"adversarial": {"epsilon": 0.5, "parameters": "^embedder"}}],
                         ids=["plain", "adversarial"])
def test_resume_is_bit_identical(tmp_path, tiny_files, trainer):
    train, dev = tiny_files
    spec = tiny_spec(bilstm_tagger(dropout=0.3), RESUME, train, dev, epochs=2,
                     scheduler={"type": "linear_warmup", "warmup_steps": 2}, **NER, **trainer)
    full = Run(spec, tmp_path / "full").train()
    part = Run(spec, tmp_path / "split").train(stop_after_epoch=1)
    assert part["finished"] is False and part["epochs_completed"] == 1
    resumed = Run(spec, tmp_path / "split").train(resume=True)
    assert resumed["finished"] is True
    a = load_checkpoint(tmp_path / "full" / "last.pt", "cpu")
    b = load_checkpoint(tmp_path / "split" / "last.pt", "cpu")
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert a["history"] == b["history"]
    assert a["optimizer"]["state"].keys() == b["optimizer"]["state"].keys()
    for k, st in a["optimizer"]["state"].items():
        assert torch.equal(st["exp_avg"], b["optimizer"]["state"][k]["exp_avg"])
    assert full["validation"] == resumed["validation"]


class Crash(Exception):
    pass


@pytest.mark.parametrize("trainer", [{}, {"moving_average": 0.8, "validation_metric": "-loss"},
                                     {"adversarial": {"epsilon": 0.5, "parameters": "^embedder"}}],
                         ids=["plain", "moving_average", "adversarial"])
def test_a_run_stopped_inside_an_epoch_resumes_from_its_last_step_bit_identically(tmp_path, tiny_files, trainer,
                                                                                   monkeypatch):
    """MULTIGRAIN_CHECKPOINT_SECONDS=0 writes last.pt after every step but an epoch's last: a run that
    stops after one (here: a crash right after the 8th such checkpoint, step 3 of epoch 2's 6) resumes
    at the next step without building the batches before it, and ends with the weights, optimizer
    state, history and scores of the run that never stopped, which wrote last.pt at the ends of
    epochs only (the default interval is longer than this run)."""
    import multigrain.platform.training as training

    train, dev = tiny_files
    spec = tiny_spec(bilstm_tagger(dropout=0.3), RESUME, train, dev, epochs=3,
                     scheduler={"type": "linear_warmup", "warmup_steps": 2}, **NER)
    spec["trainer"].update(trainer)
    full = Run(spec, tmp_path / "full").train()
    monkeypatch.setenv("MULTIGRAIN_CHECKPOINT_SECONDS", "0")
    saves, save = [], training.atomic_save

    def crash_after_the_eighth(state, path):
        save(state, path)
        if "step_in_epoch" in state:
            saves.append((state["epoch"], state["step_in_epoch"]))
            if len(saves) == 8:
                raise Crash

    monkeypatch.setattr(training, "atomic_save", crash_after_the_eighth)
    with pytest.raises(Crash):
        Run(spec, tmp_path / "split").train()
    assert saves == [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 1), (1, 2), (1, 3)]  # 24 sentences, batches of 4
    stopped = load_checkpoint(tmp_path / "split" / "last.pt", "cpu")
    assert (stopped["epoch"], stopped["step_in_epoch"], len(stopped["history"])) == (1, 3, 1)
    built = []
    tensorize = training.BatchIterator.epoch

    def counted(self, epoch, start=0):
        for chunk, batch in tensorize(self, epoch, start):
            built.append(epoch)
            yield chunk, batch

    monkeypatch.setattr(training.BatchIterator, "epoch", counted)
    monkeypatch.setattr(training, "atomic_save", save)
    resumed = Run(spec, tmp_path / "split").train(resume=True)
    assert built.count(1) == 3 and built.count(2) == 6  # epoch 2's last 3 batches, then epoch 3's 6
    a = load_checkpoint(tmp_path / "full" / "last.pt", "cpu")
    b = load_checkpoint(tmp_path / "split" / "last.pt", "cpu")
    assert "step_in_epoch" not in b  # the last one, written at the end of the last epoch
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    for k, st in a["optimizer"]["state"].items():
        assert torch.equal(st["exp_avg_sq"], b["optimizer"]["state"][k]["exp_avg_sq"])
    if "moving_average" in trainer:
        assert all(torch.equal(v, b["moving_average"]["shadow"][k]) for k, v in a["moving_average"]["shadow"].items())
    assert a["history"] == b["history"]  # the epoch losses too: the stopped epoch's sum came back from last.pt
    assert full["validation"] == resumed["validation"] and full["best_epoch"] == resumed["best_epoch"]


@pytest.mark.parametrize("value", ["-1", "ten", "nan", "inf"])
def test_a_bad_checkpoint_interval_is_refused_before_the_run_directory_exists(tmp_path, tiny_files, value,
                                                                               monkeypatch):
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    monkeypatch.setenv("MULTIGRAIN_CHECKPOINT_SECONDS", value)
    with pytest.raises(ConfigurationError, match=rf"^MULTIGRAIN_CHECKPOINT_SECONDS='{value}': expected a number of "
                                                 r"seconds >= 0 \(0: after every step\) or 'off'"):
        Run(tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=1, **NER), tmp_path / "run").train()
    assert not (tmp_path / "run").exists()


def test_resume_refuses_changed_spec(tmp_path, tiny_files):
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    spec = tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=2, **NER)
    Run(spec, tmp_path / "run").train(stop_after_epoch=1)
    with pytest.raises(ConfigurationError, match=r"different spec .*resume with the run's own spec$"):
        Run(tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=2, lr=0.02, **NER), tmp_path / "run").train(resume=True)
    with pytest.raises(ConfigurationError, match=r"only trainer.num_epochs differs: 2 in the run, 1 given; "
                                                 r"a run can be extended, not cut"):
        Run(tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=1, **NER), tmp_path / "run").train(resume=True)
    with pytest.raises(ConfigurationError, match="not empty"):
        Run(spec, tmp_path / "run").train()
    warm = tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=2,
                     scheduler={"type": "linear_warmup", "warmup_steps": 2}, **NER)
    Run(warm, tmp_path / "warm").train(stop_after_epoch=1)
    warm["trainer"]["num_epochs"] = 3
    with pytest.raises(ConfigurationError, match=r"only trainer.num_epochs differs, but the 'linear_warmup' "
                                                 r"schedule depends on it"):
        Run(warm, tmp_path / "warm").train(resume=True)


def test_a_run_extended_to_more_epochs_equals_the_longer_run(tmp_path, tiny_files, monkeypatch):
    from multigrain.platform.tracking import RunLogger
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    scheduler = {"type": "inverse_time", "decay": 0.1}  # per epoch: independent of num_epochs
    short = tiny_spec(bilstm_tagger(dropout=0.3), RESUME, train, dev, epochs=2, scheduler=scheduler, **NER)
    longer = tiny_spec(bilstm_tagger(dropout=0.3), RESUME, train, dev, epochs=4, scheduler=scheduler, **NER)
    full = Run(longer, tmp_path / "full").train()
    runs, uri = tmp_path / "runs", f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # mlflow.set_tracking_uri exports it: undone after the test
    first = Run(short, runs / "e2").train_or_reuse(logger=RunLogger(uri))
    assert first["finished"] and first["epochs_completed"] == 2
    other = tiny_spec(bilstm_tagger(dropout=0.3), RESUME, train, dev, epochs=1, lr=0.02, scheduler=scheduler,
                      **NER)  # not a shorter run of `longer`
    Run(other, runs / "other-lr").train()
    extended = Run(longer, runs / "e4").train_or_reuse(logger=RunLogger(uri))
    assert extended["finished"] and extended["epochs_completed"] == 4
    assert extended["history"] == full["history"] and extended["validation"] == full["validation"]
    assert extended["seconds"] >= first["training_seconds"]  # the earlier epochs' time is counted
    a = load_checkpoint(tmp_path / "full" / "best.pt", "cpu")
    b = load_checkpoint(runs / "e4" / "best.pt", "cpu")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((runs / "e4" / "config.json").read_text())["trainer"]["num_epochs"] == 4
    assert (runs / "e4" / "spec_hash").read_text().strip() == extended["spec_hash"]
    assert json.loads((runs / "e2" / "metrics.json").read_text())["epochs_completed"] == 2  # the short run is kept
    assert sorted(p.name for p in runs.iterdir()) == ["e2", "e4", "other-lr"]
    with pytest.raises(ConfigurationError, match=r"e2: holds a finished run of another spec"):
        Run(longer, runs / "e2").train_or_reuse(logger=RunLogger(uri))


@pytest.mark.parametrize("head", ["crf", "softmax_tagger"])
def test_tagger_model_test_case(tmp_path, head):
    """Fits 20 sentences; the run directory is an archive that evaluates as trained; predict
    scores as evaluate, also on 8 held-out sentences."""
    train = copy_sentences(DATA / "resume_ner" / "train.char.bmes", tmp_path / "twenty.bmes", 20)
    held_out = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "dev.bmes", 8)
    spec = tiny_spec(bilstm_tagger(hidden=48, head=head), RESUME, train, train, held_out, epochs=40, lr=0.02,
                     batch_size=5, **NER)
    case = ModelTestCase(spec, tmp_path / "run")
    result = case.check("f1", 0.99)
    assert 0 < result["test"]["f1"] < 1
    run = tmp_path / "run"
    for name in ("config.json", "spec_hash", "vocabulary/vocabulary.json", "best.pt", "last.pt", "metrics.json"):
        assert (run / name).exists(), name
    assert json.loads((run / "metrics.json").read_text())["spec_hash"] == result["spec_hash"]
    predictions = list(case.archive.predict_batches(case.archive.read(held_out)))
    assert len(predictions) == 8 and all(len(p["tags"]) == len(p["text"]) for p in predictions)


def test_lattice_model_predicts_from_raw_text(tmp_path, tagger_overfit_data):
    """`predict` input carries no lattice: the archive's reader builds it with the training builder."""

    model = {"type": "tagger", "embedder": lattice_embedder(16),
             "encoder": {"type": "big", "hidden_size": 16, "num_layers": 1, "num_heads": 2, "dropout": 0.0},
             "head": {"type": "crf"}}
    Run(tagger_overfit_data.spec(model, lattice=True, epochs=1), tmp_path / "run").train()
    run = tmp_path / "run"
    archive = Run.open(run).load_archive()
    sentence = "".join(archive.read(archive.spec["train_data_path"])[0]["chars"])
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": sentence}, ensure_ascii=False) + "\n", encoding="utf-8")
    instances = archive.read_json_lines(str(tmp_path / "in.jsonl"))
    assert instances[0]["lattice"].n_words > 0
    from_text = list(archive.predict_batches(instances))
    from_file = list(archive.predict_batches(archive.read(archive.spec["train_data_path"])[:1]))
    assert from_text[0]["tags"] == from_file[0]["tags"]


def test_pretrained_files_add_held_out_tokens_with_their_vectors(tmp_path):
    """A character seen only in the validation file joins the vocabulary when the pretrained file
    has a vector for it (and gets that vector); one the file lacks stays out of vocabulary."""
    (tmp_path / "train.bmes").write_text("甲 B-ORG\n乙 E-ORG\n丙 O\n\n", encoding="utf-8")
    (tmp_path / "dev.bmes").write_text("丁 O\n戊 O\n甲 S-ORG\n\n", encoding="utf-8")
    vec = tmp_path / "chars.vec"
    vec.write_text("3 4\n丁 1 2 3 4\n甲 0.5 0.5 0.5 0.5\n己 9 9 9 9\n", encoding="utf-8")
    spec = tiny_spec(bilstm_tagger(), RESUME, tmp_path / "train.bmes", tmp_path / "dev.bmes", lr=0.0, **NER)
    spec["vocabulary"] = {"pretrained_files": {"chars": str(vec)}}
    spec["model"]["embedder"].update(char_dim=4, char_pretrained_file=str(vec))
    with pytest.warns(UserWarning, match="2 of 4 tokens found"):
        Run(spec, tmp_path / "run").train()
    archive = Run.open(tmp_path / "run").load_archive()
    chars = archive.vocab.tokens("chars")
    assert "丁" in chars and "戊" not in chars and "己" not in chars  # 己 is in no split
    weight = archive.model.embedder.chars.weight
    assert weight[chars.index("丁")].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_missing_pretrained_file_is_a_configuration_error(tmp_path, tiny_files):
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    spec = tiny_spec(bilstm_tagger(), RESUME, train, dev, **NER)
    spec["vocabulary"] = {"pretrained_files": {"chars": str(tmp_path / "nope.vec")}}
    with pytest.raises(ConfigurationError, match=r"vocabulary\.pretrained_files\.chars: file not found"):
        Run(spec, tmp_path / "run").train()
    assert not (tmp_path / "run" / "best.pt").exists()


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_adam_is_fused_by_default_and_follows_torch_foreach_adam(name):
    """The registered Adam/AdamW take torch's fused kernel on the CPU; its steps equal the
    unfused (foreach) implementation's within float rounding; ``fused: false`` is honoured."""
    from multigrain.platform.kinds import Optimizer

    cls = Optimizer.by_name(name)
    reference_cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    g = torch.Generator().manual_seed(0)
    ours_params = [torch.nn.Parameter(torch.randn(50, 7, generator=g)), torch.nn.Parameter(torch.randn(7, generator=g))]
    ref_params = [torch.nn.Parameter(p.detach().clone()) for p in ours_params]
    ours = cls(ours_params, lr=1e-2, weight_decay=0.1)
    ref = reference_cls(ref_params, lr=1e-2, weight_decay=0.1, foreach=True)
    assert ours.defaults["fused"] is True
    assert cls(ref_params).defaults["weight_decay"] == {"adam": 0.0, "adamw": 0.01}[name]  # torch's defaults
    assert cls(ref_params, fused=False).defaults["fused"] is False
    for _ in range(20):
        grads = [torch.randn(p.shape, generator=g) for p in ours_params]
        for params, opt in ((ours_params, ours), (ref_params, ref)):
            for p, grad in zip(params, grads):
                p.grad = grad.clone()
            opt.step()
    for a, b in zip(ours_params, ref_params):
        assert not torch.equal(a, a.new_zeros(a.shape))
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_moving_average_follows_its_formula_and_swaps_back():
    from multigrain.platform.training import MovingAverage

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    average = MovingAverage(model, decay=0.9)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    for t in range(1, 31):  # 30 updates: past the warm-up, (1 + t) / (10 + t) > 0.9 from t = 81 only
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        model(torch.randn(4, 3))  # moves the BatchNorm running statistics (float buffers)
        average.update()
        decay = min(0.9, (1 + t) / (10 + t))
        for k, v in model.state_dict().items():
            if v.is_floating_point():
                expected[k] = decay * expected[k] + (1 - decay) * v
    raw = {k: v.clone() for k, v in model.state_dict().items()}
    with average.swapped_in():
        for k, v in model.state_dict().items():
            want = expected[k] if v.is_floating_point() else raw[k]  # num_batches_tracked stays raw
            assert torch.allclose(v, want, atol=1e-6), k
    for k, v in model.state_dict().items():
        assert torch.equal(v, raw[k]), k


def test_moving_average_validates_saves_and_resumes(tmp_path, tiny_files):
    from multigrain.platform.errors import SpecError

    train_file, dev = tiny_files
    spec = tiny_spec(bilstm_tagger(dropout=0.3), RESUME, train_file, dev, epochs=3, lr=0.05, **NER)
    spec["trainer"].update(moving_average=0.8, validation_metric="-loss")  # the loss falls every epoch here
    full = Run(spec, tmp_path / "full").train()
    Run(spec, tmp_path / "split").train(stop_after_epoch=2)
    resumed = Run(spec, tmp_path / "split").train(resume=True)
    a = load_checkpoint(tmp_path / "full" / "last.pt", "cpu")
    b = load_checkpoint(tmp_path / "split" / "last.pt", "cpu")
    assert a["moving_average"]["updates"] == 3 * 6  # 24 sentences in batches of 4
    for key, value in a["moving_average"]["shadow"].items():
        assert torch.equal(value, b["moving_average"]["shadow"][key]), key
    assert a["history"] == b["history"] and full["validation"] == resumed["validation"]
    # best.pt holds the averaged weights of its epoch, not the raw ones last.pt trains on
    best = load_checkpoint(tmp_path / "full" / "best.pt", "cpu")
    assert a["best_epoch"] == 3
    for key, value in best.items():
        if value.is_floating_point():
            assert torch.equal(value, a["moving_average"]["shadow"][key]), key
    assert any(not torch.equal(best[k], a["model"][k]) for k in best)
    # the epoch's validation score is the averaged model's: re-evaluating best.pt gives it again
    assert full["validation"]["loss"] == pytest.approx(a["history"][-1]["validation_loss"], rel=1e-5)
    for decay in (1.5, 0.0):
        spec["trainer"]["moving_average"] = decay
        expected = rf"trainer.moving_average: {decay} is out of range: expected a value in \(0, 1\)"
        with pytest.raises(SpecError, match=expected):
            Run(spec, tmp_path / "bad").train()
        assert not (tmp_path / "bad").exists()


def test_mixed_precision_auto_is_bf16_on_a_gpu_that_has_it_and_float32_elsewhere(tmp_path, tiny_files, monkeypatch):
    from multigrain.platform.precision import Precision, refusal, resolve

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert refusal("auto", cpu) is None and Precision("auto", cpu).mode is None
    assert Precision("auto", cpu).autocast().__class__.__name__ == "nullcontext"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve("auto", gpu) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve("auto", gpu) is None and refusal("auto", gpu) is None
    assert resolve("fp16", cpu) == "fp16" and resolve(None, gpu) is None
    monkeypatch.undo()
    train, dev = tiny_files  # a spec for a GPU trains on the CPU in float32, as the spec without the key
    spec = tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=1, **NER)
    auto = tiny_spec(bilstm_tagger(), RESUME, train, dev, epochs=1, mixed_precision="auto", **NER)
    a, b = Run(spec, tmp_path / "plain").train(), Run(auto, tmp_path / "auto").train()
    assert a["history"] == b["history"] and a["spec_hash"] != b["spec_hash"]
