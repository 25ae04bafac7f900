"""Lattice-BERT pre-training (MSP + SOP) and fine-tuning from its checkpoint: segments against a
brute-force definition, masking that never leaves a token of a hidden segment visible, masks
reproducible from (seed, step), the MSP loss falling on a fixed tiny corpus, and fine-tuning
that loads the pre-trained weights and trains a tiny tagger; bad checkpoints are one error
naming the spec path."""
import random

import pytest
import torch

from multigrain.components.lattice.structure import segments
from multigrain.components.lattice.types import Lattice, LatticeBatch
from multigrain.components.models.masking import (KEPT, MASKED, RANDOM, choose_units, corrupt, hashed_uniform,
                                                  token_units)
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.experiment import build_vocabulary, read_all
from multigrain.platform.runs import Run
from multigrain.platform.training import load_checkpoint
from multigrain.testing import TaggerOverfitData, tiny_spec
from tests.conftest import DATA, run_cli

SIZE = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "dropout": 0.0, "attention_dropout": 0.0}


# ------------------------------------------------------------------------------------ masking
def random_lattices(rng, rows=4):
    lattices = []
    for _ in range(rows):
        n = rng.randint(1, 14)
        words = {(s, min(n - 1, s + rng.randint(1, 3))) for s in (rng.randrange(n) for _ in range(rng.randint(0, n)))}
        lattices.append(Lattice.from_words([chr(0x4E00 + rng.randrange(30)) for _ in range(n)],
                                           sorted(w for w in words if w[1] > w[0])))
    return lattices, LatticeBatch.collate(lattices, lambda t, c: 5 + len(t))


def brute_force_segments(lattice):
    """Segment of each token: cut after character t unless some word has start <= t < end."""
    n = lattice.n_chars
    cuts = [t for t in range(n - 1) if not any(s <= t < e for s, e in lattice.spans[n:].tolist())]
    char_seg = [sum(c < t for c in cuts) for t in range(n)]
    return [char_seg[s] for s, _ in lattice.spans.tolist()]


def test_segments_equal_the_brute_force_definition():
    rng = random.Random(0)
    for _ in range(30):
        lattices, batch = random_lattices(rng)
        seg = segments(batch.starts, batch.ends, batch.n_chars, batch.mask)
        for b, lat in enumerate(lattices):
            assert seg[b, :lat.n_tokens].tolist() == brute_force_segments(lat)


def overlapping_pairs(lat):
    spans = lat.spans.tolist()
    return [(i, j) for i, (si, ei) in enumerate(spans) for j, (sj, ej) in enumerate(spans) if si <= ej and sj <= ei]


def test_segment_masking_never_leaves_a_token_of_a_hidden_segment_visible():
    rng = random.Random(1)
    leaks_with_token_masking = 0
    for seed in range(100):
        lattices, batch = random_lattices(rng)
        eligible = batch.mask
        g = torch.Generator().manual_seed(seed)
        units = segments(batch.starts, batch.ends, batch.n_chars, batch.mask)
        draws = [torch.rand(batch.mask.shape, generator=g) for _ in range(3)]
        chosen, action = choose_units(units, eligible, 0.15, 20, draws[0], draws[1])
        ids = batch.token_ids
        out = corrupt(ids, chosen, action, batch.is_char, 1, (2, 9), (9, 30), draws[2])
        hidden = chosen & (action != KEPT)
        for b, lat in enumerate(lattices):
            for i, j in overlapping_pairs(lat):
                # an overlapping token of a hidden one is hidden too, by the same action
                assert not hidden[b, i] or (hidden[b, j] and action[b, i] == action[b, j])
                assert chosen[b, i] == chosen[b, j]
            assert int(chosen[b].sum()) <= 20
            masked_tokens = chosen[b] & (action[b] == MASKED)
            assert (out[b][masked_tokens] == 1).all()
            assert (out[b][~chosen[b]] == ids[b][~chosen[b]]).all()
            randomised = chosen[b] & (action[b] == RANDOM)
            chars = randomised & batch.is_char[b]
            assert ((out[b][chars] >= 2) & (out[b][chars] < 9)).all()
            assert ((out[b][randomised & ~batch.is_char[b]] >= 9)).all()
        # the same test fails for plain token masking (the -MSP ablation): the oracle can tell
        t_chosen, _ = choose_units(token_units(batch.mask), eligible, 0.15, 20, draws[0], draws[1])
        leaks_with_token_masking += sum(bool(t_chosen[b, i]) != bool(t_chosen[b, j])
                                        for b, lat in enumerate(lattices) for i, j in overlapping_pairs(lat))
    assert leaks_with_token_masking > 0


def test_about_fifteen_percent_of_tokens_in_whole_segments():
    rng = random.Random(2)
    lattices = [Lattice.from_words(list("研究生活很充实我们喜欢北京大学的学生") * 3, [(0, 1), (0, 2), (2, 3), (14, 15)])
                for _ in range(64)]
    batch = LatticeBatch.collate(lattices, lambda t, c: 5)
    units = segments(batch.starts, batch.ends, batch.n_chars, batch.mask)
    g = torch.Generator().manual_seed(rng.randrange(99))
    chosen, action = choose_units(units, batch.mask, 0.15, 20, *torch.rand(2, *batch.mask.shape, generator=g))
    per_row = chosen.sum(1).float()
    target = round(0.15 * batch.mask[0].sum().item())  # 58 tokens: 9
    largest = 7  # the segment 研究生活: 4 characters and 3 words
    # segments are added while fewer than the target are chosen: at most one overshoots
    assert per_row.max() <= 20 and (per_row >= target).all() and (per_row <= target - 1 + largest).all()
    assert (per_row == target).float().mean() > 0.5
    kinds = action[chosen]
    share = torch.stack([(kinds == k).float().mean() for k in (MASKED, RANDOM, KEPT)])
    assert abs(share[0] - 0.8) < 0.1 and share[1] < 0.2 and share[2] < 0.2


# ------------------------------------------------------------------------------- pre-training
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return TaggerOverfitData(DATA / "resume_ner" / "train.char.bmes", tmp_path_factory.mktemp("corpus"))


def pretrain_spec(corpus, encoder="lattice_bert", masking="segment", epochs=2):
    words = encoder == "lattice_bert"
    reader = {"type": "text_corpus", "sources": [{"path": corpus.train.name, "reader": {"type": "resume_ner"}}],
              "lattice_builder": {"type": "lexicon", "lexicon_path": str(corpus.lexicon)}, "max_chars_per_text": 30}
    spec = tiny_spec({"type": "pretrainer", "masking": masking, "use_words": words, "seed": 5,
                      "embedder": {"type": "lattice_tokens", "embedding_dim": 16, "words": words},
                      "encoder": dict(SIZE, type=encoder, cls="first")},
                     reader, str(corpus.train.parent), str(corpus.train.parent), epochs=epochs, lr=3e-3, batch_size=8,
                     task="pretrain", validation_metric="+msp_accuracy")
    spec["evaluate_on_test"] = False
    return spec


@pytest.fixture(scope="module")
def pretrained(corpus, tmp_path_factory):
    """A 2-epoch tiny Lattice-BERT pre-training run on the twenty sentences."""
    run_dir = tmp_path_factory.mktemp("pretrain") / "run"
    result = Run(pretrain_spec(corpus), run_dir).train()
    return run_dir, result


def test_pretraining_reports_msp_sop_and_the_leakage_check(pretrained):
    _, result = pretrained
    dev = result["validation"]
    for key in ("msp_accuracy", "msp_loss", "sop_accuracy", "segment_masked_accuracy", "token_masked_accuracy"):
        assert key in dev
    assert dev["msp_accuracy"] == dev["segment_masked_accuracy"]  # MSP's own masking is whole segments


def model_and_batch(corpus, masking="segment"):
    run = Run(pretrain_spec(corpus, masking=masking))
    exp = run.experiment
    train = read_all(exp.dataset_reader, exp.train_data_path)
    torch.manual_seed(0)
    model = exp.model.construct(vocab=build_vocabulary(exp, exp.model_class(), train, []))
    return model, model.tensorize(train), train


def test_masks_are_reproducible_from_seed_and_step(corpus):
    model, batch, _ = model_and_batch(corpus)
    model.train()
    first = [model(**batch)["masked"] for _ in range(3)]
    again, _, _ = model_and_batch(corpus)
    again.train()
    again.load_state_dict(model.state_dict())  # a resumed run: its step counter comes back with the weights
    model.step.zero_()
    assert not torch.equal(first[0], first[1])  # a new masking every step
    replay = [model(**batch)["masked"] for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(first, replay))
    assert torch.equal(again(**batch)["masked"], model(**batch)["masked"])


@pytest.mark.parametrize("flags", [{}, {"use_distance": False, "use_relation": False}])
def test_every_parameter_takes_part(corpus, flags):
    """A data-parallel run (DDP) needs a gradient for every parameter, ablations included."""
    spec = pretrain_spec(corpus)
    spec["model"]["encoder"].update(flags)
    exp = Run(spec).experiment
    train = read_all(exp.dataset_reader, exp.train_data_path)
    model = exp.model.construct(vocab=build_vocabulary(exp, exp.model_class(), train, []))
    model(**model.tensorize(train[:4]))["loss"].backward()
    assert [name for name, p in model.named_parameters() if p.grad is None] == []


def test_an_examples_masking_does_not_depend_on_its_batch(corpus):
    """Hashed draws: the same example at the same step is masked alike alone or in any batch (so
    data-parallel workers mask as one process would), and the draws look uniform."""
    model, _, instances = model_and_batch(corpus)
    model.train()
    for others in ([], instances[1:3], instances[3:10]):
        model.step.fill_(7)
        batch = model.tensorize([instances[0]] + others)
        masked = model(**batch)["masked"]
        row = masked[0, : int(batch["lattice"].mask[0].sum())]
        if not others:
            alone = row
        assert torch.equal(row, alone)
    draws = hashed_uniform(5, 3, torch.arange(200), 500, 0)
    assert abs(float(draws.mean()) - 0.5) < 0.01 and float(draws.min()) >= 0 and float(draws.max()) < 1
    assert not torch.equal(draws, hashed_uniform(5, 4, torch.arange(200), 500, 0))


def test_msp_loss_falls_on_a_fixed_tiny_corpus(corpus, single_thread):
    model, batch, _ = model_and_batch(corpus)
    model.eval()
    before = float(model(**batch)["msp_loss"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(40):  # a new masking at every step: the loss measured on the evaluation masks
        optimizer.zero_grad()
        model(**batch)["loss"].backward()
        optimizer.step()
    model.eval()
    model.get_metrics(reset=True)
    after = float(model(**batch)["msp_loss"])
    assert after < before - 0.5, (before, after)  # 5.68 -> 4.94 (ln 289 = 5.67: uniform at the start)


# ------------------------------------------------------------------------------- fine-tuning
def finetune_spec(corpus, run_dir, vocabulary=True, weights=None, **encoder):
    weights = str(weights or run_dir)
    model = {"type": "tagger", "embedder": {"type": "lattice_tokens", "embedding_dim": 16, "pretrained": weights},
             "encoder": dict(SIZE, type="lattice_bert", cls="prepend", pretrained=weights, **encoder),
             "head": {"type": "softmax_tagger"}}
    spec = corpus.spec(model, lattice=True, epochs=15, lr=5e-3)
    if vocabulary:
        spec["vocabulary"] = {"directory": str(run_dir / "vocabulary")}
    return spec


def test_finetuning_loads_the_pretrained_weights_and_trains_a_tagger(corpus, pretrained, tmp_path, single_thread):
    run_dir, _ = pretrained
    saved = load_checkpoint(run_dir / "best.pt", "cpu")
    run = Run(finetune_spec(corpus, run_dir), tmp_path / "ner")
    exp = run.experiment
    train = read_all(exp.dataset_reader, exp.train_data_path)
    model = exp.model.construct(vocab=build_vocabulary(exp, exp.model_class(), train, []))
    for prefix, module in (("embedder.", model.embedder), ("encoder.", model.encoder)):
        for name, tensor in module.state_dict().items():
            assert torch.equal(tensor, saved[prefix + name]), prefix + name
    result = run.train()
    assert result["validation"]["f1"] > 0.55, result["validation"]  # 0.67 on one thread


def test_a_missing_or_mismatching_checkpoint_is_one_error_naming_the_spec_path(corpus, pretrained, tmp_path):
    run_dir, _ = pretrained
    with pytest.raises(ConfigurationError, match=r"model\.embedder\.pretrained: file not found: \S*nowhere"):
        Run(finetune_spec(corpus, run_dir, weights=tmp_path / "nowhere"), tmp_path / "a").train()
    with pytest.raises(ConfigurationError, match=r"model\.embedder\.pretrained: file not found: \S*nowhere\S* "
                                                 r"\(paths .*\n  model\.encoder\.pretrained: file not found"):
        Run(finetune_spec(corpus, tmp_path / "nowhere"), tmp_path / "a").train()  # every missing file at once
    with pytest.raises(ConfigurationError, match=r"vocabulary.*nowhere/vocabulary holds no vocabulary.json"):
        no_vocabulary = {"vocabulary": {"directory": str(tmp_path / "nowhere" / "vocabulary")}}
        Run(finetune_spec(corpus, run_dir, vocabulary=False) | no_vocabulary, tmp_path / "a").train()
    with pytest.raises(ConfigurationError, match=r"model\.encoder.*size mismatch"):
        Run(finetune_spec(corpus, run_dir, hidden_size=16), tmp_path / "b").train()
    with pytest.raises(ConfigurationError, match=r"model\.embedder.*vocabulary differs"):
        Run(finetune_spec(corpus, run_dir, vocabulary=False), tmp_path / "c").train()
    char_spec = finetune_spec(corpus, run_dir)
    char_spec["model"]["embedder"]["words"] = False
    with pytest.raises(ConfigurationError, match=r"model\.embedder.*pre-trained with words: true"):
        Run(char_spec, tmp_path / "e").train()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigurationError, match=r"not a multigrain checkpoint"):
        Run(finetune_spec(corpus, run_dir, weights=tmp_path / "junk"), tmp_path / "d").train()
    assert not any((tmp_path / d).exists() and any((tmp_path / d).iterdir()) for d in "abcde")  # nothing written
    from multigrain.components.pretrained import load_pretrained

    (tmp_path / "empty").mkdir()  # past validation (a folder emptied since): the same words as the spec check's
    for path, message in ((tmp_path / "gone.pt", f"pretrained: file not found: {tmp_path / 'gone.pt'} (paths are"),
                          (tmp_path / "empty", f"pretrained: {tmp_path / 'empty'} is a folder with no best.pt")):
        with pytest.raises(ConfigurationError) as raised:
            load_pretrained(torch.nn.Linear(2, 2), str(path), "encoder.")
        assert str(raised.value).startswith(message), str(raised.value)


# ----------------------------------------------------------------------------- shipped specs
@pytest.mark.parametrize("encoder", ["lattice_bert", "char_bert"])
def test_shipped_finetune_specs_start_from_a_shipped_pretraining(encoder, corpus, tmp_path, monkeypatch):
    """jsonnet_configs/pretrain + jsonnet_configs/finetune wired together (tiny size, data cut to
    the twenty sentences): the fine-tuned tagger and classifier hold the pre-trained tensors."""
    from multigrain.platform.archive import write_run_files
    from multigrain.platform.specs import load_spec
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    name = "lattice_bert_tiny" if encoder == "lattice_bert" else "char_bert_tiny"
    spec = load_spec(f"jsonnet_configs/pretrain/{name}.jsonnet")
    spec["dataset_reader"].update(pretrain_spec(corpus)["dataset_reader"])
    spec["train_data_path"] = str(corpus.train.parent)
    exp = Run(spec, check_data_paths=False).experiment
    model = exp.model.construct(vocab=build_vocabulary(exp, exp.model_class(),
                                                       read_all(exp.dataset_reader, exp.train_data_path), []))
    run_dir = tmp_path / "pretrained"
    run_dir.mkdir()
    write_run_files(run_dir, spec, model.vocab)
    torch.save(model.state_dict(), run_dir / "best.pt")
    lexicon = {"type": "lexicon", "lexicon_path": str(corpus.lexicon)}
    for task in ("resume_ner", "chnsenticorp"):
        tuned = load_spec(f"jsonnet_configs/finetune/{task}.jsonnet",
                          ext_vars={"pretrained": str(run_dir), "encoder": encoder})
        for key in ("dataset_reader", "validation_dataset_reader"):
            if key in tuned and "lattice_builder" in tuned[key]:
                tuned[key]["lattice_builder"] = lexicon
        senti = tmp_path / "senti.tsv"
        senti.write_text("label\ttext_a\n1\t北京大学很好\n0\t不好\n", encoding="utf-8")
        tuned["train_data_path"] = str(corpus.train if task == "resume_ner" else senti)
        exp = Run(tuned, check_data_paths=False).experiment
        tuned_model = exp.model.construct(vocab=build_vocabulary(
            exp, exp.model_class(), read_all(exp.dataset_reader, exp.train_data_path), []))
        assert tuned_model.encoder.cls_mode == ("prepend" if task == "resume_ner" else "first")
        for prefix, module in (("embedder.", tuned_model.embedder), ("encoder.", tuned_model.encoder)):
            for key, tensor in module.state_dict().items():
                assert torch.equal(tensor, model.state_dict()[prefix + key]), (task, prefix + key)


def test_data_parallel_replicas_take_the_one_process_step(corpus):
    """MSP is a mean over masked tokens and SOP over pairs: with ``loss_terms`` each term is
    weighted by its own share, so 2 replicas' averaged gradients (DDP) equal the one-process
    gradient of the whole batch; weighting the summed loss by instances would not."""
    from multigrain.platform.data_parallel import Replica
    from multigrain.testing import SimulatedReplica

    model, _, instances = model_and_batch(corpus)
    model.train()
    items = instances[:7]
    params = [p for p in model.parameters()]

    def run(chosen):
        model.step.fill_(3)
        return model(**model.tensorize(chosen))

    def grads(loss):
        return [g if g is not None else torch.zeros_like(p)
                for g, p in zip(torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True), params)]

    full = run(items)
    assert set(full["loss_terms"]) == {"msp", "sop"}
    assert torch.allclose(full["loss"], sum(loss for loss, _ in full["loss_terms"].values()))
    pairs = sum("chars_b" in x for x in items)  # SOP is a mean over the pairs: 6 of these 7 (one text is single)
    assert 0 < pairs < len(items)
    assert full["loss_terms"]["sop"][1] == pairs and full["loss_terms"]["msp"][1] == int(full["masked"].sum())
    expected = grads(full["loss"])
    slices = [Replica(r, 2, torch.device("cpu"), wrap=None).part(list(range(len(items)))) for r in range(2)]
    outputs = [run([items[i] for i in idx]) for idx, _ in slices]
    every = [[float(c) for _, c in out["loss_terms"].values()] for out in outputs]
    averaged, by_instances = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    for r, ((_, share), out) in enumerate(zip(slices, outputs)):
        scaled, part = SimulatedReplica(r, every).weighted_loss(share, out)
        averaged = [a + g / 2 for a, g in zip(averaged, grads(scaled))]
        plain = {"loss": out["loss"]}
        by_instances = [a + g / 2 for a, g in
                        zip(by_instances, grads(SimulatedReplica(r, every).weighted_loss(share, plain)[0]))]
    for got, want in zip(averaged, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    assert not all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(by_instances, expected))


def test_predict_and_serve_refuse_a_pretraining_run_before_reading_input(pretrained, tmp_path):
    from multigrain.platform.ray.archives import check_archives

    run_dir, _ = pretrained
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"text": "张三在北京"}\n', encoding="utf-8")
    out = run_cli("predict", run_dir, lines, "--output-file", tmp_path / "out.jsonl")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (f"error: {run_dir}: a pre-training model predicts nothing; "
                                  "fine-tune it (jsonnet_configs/finetune)")
    assert not (tmp_path / "out.jsonl").exists()
    with pytest.raises(ConfigurationError, match="a pre-training model predicts nothing"):
        check_archives([str(run_dir)], predicting=True)  # serve's check, before Ray starts
    assert list(check_archives([str(run_dir)]).values()) == [str(run_dir.resolve())]  # evaluate-all scores it
    with pytest.raises(ValueError, match="predicts nothing"):  # a request that reaches it anyway: a 400
        Run.open(run_dir).load_archive(device="cpu").model.text_to_instance({"text": "张三"})
