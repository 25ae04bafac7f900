"""Trainer: bit-identical resume, overfitting a small set, the run directory as an archive."""
import json

import pytest
import torch

from multigrain.platform.runs import Run, train_experiment
from tests.conftest import DATA


def head_sentences(src, n, dst):
    blocks = src.read_text(encoding="utf-8").strip("\n").split("\n\n")[:n]
    dst.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return str(dst)


def tiny_spec(train, dev, epochs, lr=0.01, hidden=16, dropout=0.0, scheduler=None, head="crf"):
    spec = {
        "task": "ner", "dataset": "tiny",
        "dataset_reader": {"type": "resume_ner"},
        "train_data_path": train, "validation_data_path": dev,
        "data_loader": {"batch_size": 4},
        "model": {"type": "tagger",
                  "embedder": {"type": "char_bigram", "char_dim": 16, "bigram_dim": 16, "dropout": dropout},
                  "encoder": {"type": "bilstm", "hidden_size": hidden}, "head": {"type": head}},
        "trainer": {"num_epochs": epochs, "optimizer": {"type": "adam", "lr": lr}, "grad_clipping": 5.0},
        "seed": 7,
    }
    if scheduler:
        spec["trainer"]["scheduler"] = scheduler
    return spec


@pytest.fixture
def tiny_files(tmp_path):
    src = DATA / "resume_ner" / "dev.char.bmes"
    return head_sentences(src, 24, tmp_path / "train.bmes"), head_sentences(src, 8, tmp_path / "dev.bmes")


def test_resume_is_bit_identical(tmp_path, tiny_files):
    train, dev = tiny_files
    spec = tiny_spec(train, dev, epochs=2, dropout=0.3,
                     scheduler={"type": "linear_warmup", "warmup_steps": 2})
    full = train_experiment(spec, tmp_path / "full")
    part = train_experiment(spec, tmp_path / "split", stop_after_epoch=1)
    assert part["finished"] is False and part["epochs_completed"] == 1
    resumed = train_experiment(spec, tmp_path / "split", resume=True)
    assert resumed["finished"] is True
    a = torch.load(tmp_path / "full" / "last.pt", weights_only=False)
    b = torch.load(tmp_path / "split" / "last.pt", weights_only=False)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert a["history"] == b["history"]
    assert a["optimizer"]["state"].keys() == b["optimizer"]["state"].keys()
    for k, st in a["optimizer"]["state"].items():
        assert torch.equal(st["exp_avg"], b["optimizer"]["state"][k]["exp_avg"])
    assert full["validation"] == resumed["validation"]


def test_resume_refuses_changed_spec(tmp_path, tiny_files):
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    spec = tiny_spec(train, dev, epochs=2)
    train_experiment(spec, tmp_path / "run", stop_after_epoch=1)
    with pytest.raises(ConfigurationError, match=r"different spec .*resume with the run's own spec$"):
        train_experiment(tiny_spec(train, dev, epochs=2, lr=0.02), tmp_path / "run", resume=True)
    with pytest.raises(ConfigurationError, match=r"only trainer.num_epochs differs: 2 in the run, 1 given; "
                                                 r"a run can be extended, not cut"):
        train_experiment(tiny_spec(train, dev, epochs=1), tmp_path / "run", resume=True)
    with pytest.raises(ConfigurationError, match="not empty"):
        train_experiment(spec, tmp_path / "run")
    warm = tiny_spec(train, dev, epochs=2, scheduler={"type": "linear_warmup", "warmup_steps": 2})
    train_experiment(warm, tmp_path / "warm", stop_after_epoch=1)
    warm["trainer"]["num_epochs"] = 3
    with pytest.raises(ConfigurationError, match=r"only trainer.num_epochs differs, but the 'linear_warmup' "
                                                 r"schedule depends on it"):
        train_experiment(warm, tmp_path / "warm", resume=True)


def test_a_run_extended_to_more_epochs_equals_the_longer_run(tmp_path, tiny_files, monkeypatch):
    from multigrain.platform.tracking import RunLogger
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    scheduler = {"type": "inverse_time", "decay": 0.1}  # per epoch: independent of num_epochs
    short = tiny_spec(train, dev, epochs=2, dropout=0.3, scheduler=scheduler)
    longer = tiny_spec(train, dev, epochs=4, dropout=0.3, scheduler=scheduler)
    full = train_experiment(longer, tmp_path / "full")
    runs, uri = tmp_path / "runs", f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # mlflow.set_tracking_uri exports it: undone after the test
    first = Run(short, runs / "e2").train_or_reuse(logger=RunLogger(uri))
    assert first["finished"] and first["epochs_completed"] == 2
    other = tiny_spec(train, dev, epochs=1, lr=0.02, scheduler=scheduler)  # not a shorter run of `longer`
    train_experiment(other, runs / "other-lr")
    extended = Run(longer, runs / "e4").train_or_reuse(logger=RunLogger(uri))
    assert extended["finished"] and extended["epochs_completed"] == 4
    assert extended["history"] == full["history"] and extended["validation"] == full["validation"]
    assert extended["seconds"] >= first["training_seconds"]  # the earlier epochs' time is counted
    a = torch.load(tmp_path / "full" / "best.pt", weights_only=False)
    b = torch.load(runs / "e4" / "best.pt", weights_only=False)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((runs / "e4" / "config.json").read_text())["trainer"]["num_epochs"] == 4
    assert (runs / "e4" / "spec_hash").read_text().strip() == extended["spec_hash"]
    assert json.loads((runs / "e2" / "metrics.json").read_text())["epochs_completed"] == 2  # the short run is kept
    assert sorted(p.name for p in runs.iterdir()) == ["e2", "e4", "other-lr"]
    with pytest.raises(ConfigurationError, match=r"e2: holds a finished run of another spec"):
        Run(longer, runs / "e2").train_or_reuse(logger=RunLogger(uri))


@pytest.mark.parametrize("head", ["crf", "softmax_tagger"])
def test_overfits_twenty_sentences(tmp_path, head):
    src = DATA / "resume_ner" / "train.char.bmes"
    train = head_sentences(src, 20, tmp_path / "twenty.bmes")
    spec = tiny_spec(train, train, epochs=40, lr=0.02, hidden=48, head=head)
    spec["data_loader"]["batch_size"] = 5
    result = train_experiment(spec, tmp_path / "run")
    assert result["validation"]["f1"] >= 0.99, result["validation"]


def test_archive_reloads_and_predicts(tmp_path, tiny_files):
    train, dev = tiny_files
    result = train_experiment(tiny_spec(train, dev, epochs=1), tmp_path / "run")
    run = tmp_path / "run"
    for name in ("config.json", "spec_hash", "vocabulary/vocabulary.json", "best.pt", "last.pt", "metrics.json"):
        assert (run / name).exists(), name
    assert json.loads((run / "metrics.json").read_text())["spec_hash"] == result["spec_hash"]
    archive = Run.open(run).load_archive()
    preds = list(archive.predict_batches(archive.read(dev)))
    assert len(preds) == 8 and all(len(p["tags"]) == len(p["text"]) for p in preds)


def test_lattice_model_predicts_from_raw_text(tmp_path):
    """`predict` input carries no lattice: the archive's reader builds it with the training builder."""
    from tests.test_encoders_support import lattice_embedder, overfit

    model = {"type": "tagger", "embedder": lattice_embedder(16),
             "encoder": {"type": "big", "hidden_size": 16, "num_layers": 1, "num_heads": 2, "dropout": 0.0},
             "head": {"type": "crf"}}
    overfit(tmp_path, model, lattice=True, epochs=1, lr=0.01)
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
    spec = tiny_spec(str(tmp_path / "train.bmes"), str(tmp_path / "dev.bmes"), epochs=1, lr=0.0)
    spec["vocabulary"] = {"pretrained_files": {"chars": str(vec)}}
    spec["model"]["embedder"].update(char_dim=4, char_pretrained_file=str(vec))
    with pytest.warns(UserWarning, match="2 of 4 tokens found"):
        train_experiment(spec, tmp_path / "run")
    archive = Run.open(tmp_path / "run").load_archive()
    chars = archive.vocab.tokens("chars")
    assert "丁" in chars and "戊" not in chars and "己" not in chars  # 己 is in no split
    weight = archive.model.embedder.chars.weight
    assert weight[chars.index("丁")].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_missing_pretrained_file_is_a_configuration_error(tmp_path, tiny_files):
    from multigrain.platform.errors import ConfigurationError

    train, dev = tiny_files
    spec = tiny_spec(train, dev, epochs=1)
    spec["vocabulary"] = {"pretrained_files": {"chars": str(tmp_path / "nope.vec")}}
    with pytest.raises(ConfigurationError, match=r"vocabulary\.pretrained_files\.chars: no such file"):
        train_experiment(spec, tmp_path / "run")
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
    from multigrain.platform.runs import train_experiment as train
    from multigrain.platform.errors import SpecError

    train_file, dev = tiny_files
    spec = tiny_spec(train_file, dev, epochs=3, dropout=0.3, lr=0.05)
    spec["trainer"].update(moving_average=0.8, validation_metric="-loss")  # the loss falls every epoch here
    full = train(spec, tmp_path / "full")
    train(spec, tmp_path / "split", stop_after_epoch=2)
    resumed = train(spec, tmp_path / "split", resume=True)
    a = torch.load(tmp_path / "full" / "last.pt", weights_only=False)
    b = torch.load(tmp_path / "split" / "last.pt", weights_only=False)
    assert a["moving_average"]["updates"] == 3 * 6  # 24 sentences in batches of 4
    for key, value in a["moving_average"]["shadow"].items():
        assert torch.equal(value, b["moving_average"]["shadow"][key]), key
    assert a["history"] == b["history"] and full["validation"] == resumed["validation"]
    # best.pt holds the averaged weights of its epoch, not the raw ones last.pt trains on
    best = torch.load(tmp_path / "full" / "best.pt", weights_only=False)
    assert a["best_epoch"] == 3
    for key, value in best.items():
        if value.is_floating_point():
            assert torch.equal(value, a["moving_average"]["shadow"][key]), key
    assert any(not torch.equal(best[k], a["model"][k]) for k in best)
    # the epoch's validation score is the averaged model's: re-evaluating best.pt gives it again
    assert full["validation"]["loss"] == pytest.approx(a["history"][-1]["validation_loss"], rel=1e-5)
    spec["trainer"]["moving_average"] = 1.5
    with pytest.raises(SpecError, match=r"trainer: TrainerConfig: moving_average is a decay between 0 and 1"):
        train(spec, tmp_path / "bad")
