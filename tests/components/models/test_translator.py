"""The translator: a tiny model overfits 50 Tatoeba pairs (BLEU >= 90 on them), its run directory
reloads with the same subword model and scores, ``predict`` translates, ``--resume`` reuses the
fitted subword model, BiG reads the lattice, and bad input is one clear error each."""
import json
import shutil

import pytest

from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.runs import Run
from multigrain.testing import ModelTestCase, tiny_spec

#: the tiny translator of these tests: 1 encoder and 1 decoder layer of 32 units
TINY = {"type": "translator", "embedder": {"type": "char_bigram", "char_dim": 32, "bigram_dim": 0, "dropout": 0.0},
        "encoder": {"type": "transformer", "hidden_size": 32, "num_layers": 1, "num_heads": 2, "ffn_dim": 64,
                    "dropout": 0.0, "attention_dropout": 0.0},
        "decoder": {"num_layers": 1, "num_heads": 2, "feedforward_dim": 64, "dropout": 0.0, "label_smoothing": 0.0},
        "target_vocab_size": 300, "beam_size": 2, "max_source_length": 20, "max_length_offset": 5}


def tatoeba_pairs(data_dir, directory, count: int, first_line: int = 2000) -> str:
    """``count`` consecutive pairs of Tatoeba cmn-eng (short sentences) written to a file of the
    same format; returns its path."""
    lines = (data_dir / "tatoeba_cmn_eng" / "cmn.txt").read_text(encoding="utf-8-sig").splitlines()
    path = directory / f"tatoeba{count}.txt"
    path.write_text("\n".join(lines[first_line:first_line + count]) + "\n", encoding="utf-8")
    return str(path)


def spec_for(train: str, epochs: int, model: dict = TINY, reader: dict | None = None, **trainer) -> dict:
    return tiny_spec(dict(model), reader or {"type": "tatoeba_cmn_eng"}, train, train, epochs=epochs, lr=0.01,
                     batch_size=10, task="mt", dataset="tatoeba", validation_metric="+bleu", grad_clipping=1.0,
                     **trainer)


@pytest.fixture(scope="module")
def overfit(tmp_path_factory):
    from tests.conftest import DATA

    directory = tmp_path_factory.mktemp("translator")
    case = ModelTestCase(spec_for(tatoeba_pairs(DATA, directory, 50), epochs=30), directory / "run")
    case.check("bleu", minimum=90.0)
    return case


def test_a_tiny_translator_overfits_fifty_pairs_and_its_archive_translates(overfit):
    validation = overfit.result["validation"]
    assert validation["bleu"] >= 90.0 and validation["chrf"] >= 85.0
    archive = overfit.archive
    assert (overfit.run_dir / "resources" / "target_subwords.json").is_file()
    assert archive.model.subwords.vocab_size <= 300
    instances = archive.read(overfit.spec["train_data_path"])
    predictions = list(archive.predict_batches(instances[:5]))
    assert [set(p) for p in predictions] == [{"source", "translation"}] * 5
    assert [p["source"] for p in predictions] == [x["source"] for x in instances[:5]]
    assert sum(p["translation"] == x["references"][0] for p, x in zip(predictions, instances)) >= 3
    # Tatoeba's references are cased: the cased BLEU ranks, its signature tags the run
    assert archive.model.ranking_metric() == "bleu_cased"
    assert archive.model.tracking_tags()["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|")
    assert overfit.result["tracking_tags"]["sacrebleu_signature.validation"] == \
        overfit.result["tracking_tags"]["sacrebleu_signature"]  # no test split: the validation's


def test_predict_input_translates_and_bad_predict_input_names_its_line(overfit, tmp_path):
    archive = overfit.archive
    first = archive.read(overfit.spec["train_data_path"])[0]
    good = tmp_path / "in.jsonl"
    good.write_text(json.dumps({"text": first["source"]}, ensure_ascii=False) + "\n", encoding="utf-8")
    (prediction,) = archive.predict_batches(archive.read_json_lines(str(good)))
    assert prediction == {"source": first["source"], "translation": prediction["translation"]}
    assert prediction["translation"].strip()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": first["source"]}) + "\n" + json.dumps({"text": "  "}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:2.*non-empty string"):
        archive.read_json_lines(str(bad))
    with pytest.raises(ValueError, match="non-empty"):
        archive.model.text_to_instance({"text": ""})


def test_serve_replicas_translate_and_a_bad_request_is_a_400(overfit, tmp_path):
    """What a Serve replica runs for a request (``platform/ray/serve.py``, without Ray): the
    request's instances batched together, and an instance the model cannot use is a client error."""
    import asyncio

    from multigrain.platform.ray.serve import Batcher, Limits, LoadedArchive, RequestError, parse_instances

    sources = [x["source"] for x in overfit.archive.read(overfit.spec["train_data_path"])[:3]]
    body = json.dumps({"instances": [{"text": text} for text in sources]}, ensure_ascii=False).encode("utf-8")
    instances, _ = parse_instances(body, Limits())
    loaded = LoadedArchive(str(overfit.run_dir))
    answers = asyncio.run(Batcher(loaded, max_examples=8).predict(loaded.examples(instances)))
    requests = tmp_path / "requests.jsonl"  # the same texts through `multigrain predict`'s path
    requests.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in instances), encoding="utf-8")
    expected = list(overfit.archive.predict_batches(overfit.archive.read_json_lines(str(requests))))
    assert [a["source"] for a in answers] == sources
    assert [a["translation"] for a in answers] == [e["translation"] for e in expected]
    with pytest.raises(RequestError) as caught:
        loaded.examples([{"text": sources[0]}, {"text": "   "}])
    assert caught.value.status == 400 and "instances[1]" in str(caught.value)


def test_an_over_long_source_is_an_error_naming_its_line_or_is_cut(overfit, tmp_path):
    archive = overfit.archive
    long_source = "我" * 25  # max_source_length is 20
    path = tmp_path / "long.txt"
    path.write_text("Hi.\t你好。\tx\nMe.\t" + long_source + "\tx\n", encoding="utf-8")
    instances = archive.read(str(path))
    with pytest.raises(DataError, match=r"long\.txt:2: a source of 25 characters, more than max_source_length 20"):
        list(archive.predict_batches(instances))
    archive.model.truncate = True
    try:
        assert archive.model.tensorize(instances)["chars"].shape == (2, 20)
        assert len(list(archive.predict_batches(instances))) == 2
    finally:
        archive.model.truncate = False


def test_a_run_without_its_subword_model_is_refused(overfit, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(overfit.run_dir, copy)
    (copy / "resources" / "target_subwords.json").unlink()
    with pytest.raises(ConfigurationError, match=r"no resources/target_subwords\.json"):
        Run.open(copy).load_archive()


def test_resume_reuses_the_fitted_subword_model(data_dir, tmp_path):
    train = tatoeba_pairs(data_dir, tmp_path, 10)
    run = Run(spec_for(train, epochs=2), tmp_path / "run")
    run.train(stop_after_epoch=1)
    subwords = tmp_path / "run" / "resources" / "target_subwords.json"
    fitted = subwords.read_bytes()
    subwords.write_bytes(fitted.replace(b'"<unk>"', b'"<unk>" '))  # a marker: a refit would drop it
    result = Run(spec_for(train, epochs=2), tmp_path / "run").train(resume=True)
    assert result["finished"] and len(result["history"]) == 2
    assert subwords.read_bytes() != fitted and json.loads(subwords.read_bytes()) == json.loads(fitted)


def test_big_reads_the_lattice_of_the_source(data_dir, tmp_path):
    train = tatoeba_pairs(data_dir, tmp_path, 10)
    lexicon = tmp_path / "lexicon.txt"
    lexicon.write_text("汤姆\n觉得\n跟着\n", encoding="utf-8")
    reader = {"type": "tatoeba_cmn_eng", "lattice_builder": {"type": "lexicon", "lexicon_path": str(lexicon)},
              "cache_dir": str(tmp_path / "cache")}
    model = dict(TINY, encoder={"type": "big", "hidden_size": 32, "num_layers": 1, "num_heads": 2, "ffn_dim": 64,
                                "dropout": 0.0, "attention_dropout": 0.0})
    run = Run(spec_for(train, epochs=1, model=model, reader=reader), tmp_path / "run")
    result = run.train()
    assert result["finished"] and 0.0 <= result["validation"]["bleu"] <= 100.0
    archive = run.load_archive()
    instances = archive.read(train)
    assert all(x["lattice"] is not None for x in instances)
    assert archive.model.tensorize(instances)["lattice"].mask.shape[1] > max(len(x["chars"]) for x in instances)


def test_instance_lengths_are_the_padded_widths_of_a_pair_alone(overfit, tmp_path):
    """The per-field lengths a token budget counts: the widths ``tensorize`` gives one pair (its
    characters, cut to max_source_length under truncate; BOS + subwords, subwords + EOS)."""
    model = overfit.archive.model
    instances = overfit.archive.read(overfit.spec["train_data_path"])[:8]
    for x in instances:
        batch = model.tensorize([x])
        assert model.instance_lengths(x) == (batch["chars"].shape[1], batch["target_input"].shape[1])
        assert batch["target_output"].shape[1] == batch["target_input"].shape[1]
    assert model.instance_lengths(model.text_to_instance({"text": "你好。"})) == (3, 0)
    model.truncate = True
    try:
        long = model.text_to_instance({"text": "我" * 25, "references": ["I."]})
        assert model.instance_lengths(long)[0] == 20 == model.tensorize([long])["chars"].shape[1]
    finally:
        model.truncate = False


def test_max_tokens_batches_of_a_translator_count_source_and_target_with_padding(overfit):
    """``data_loader.max_tokens`` on a translator: every training batch of n pairs pads to at most
    the budget on both sides together (n * (longest source + longest target)), and one epoch holds
    every pair exactly once."""
    from multigrain.platform.batching import DataLoaderConfig
    from multigrain.platform.experiment import batches_for

    model = overfit.archive.model
    instances = overfit.archive.read(overfit.spec["train_data_path"])
    batches = batches_for(model, instances, DataLoaderConfig(batch_size=50, max_tokens=120), seed=3, train=True)
    seen = []
    for indices in batches.batches(0):
        batch = model.tensorize([instances[i] for i in indices])
        seen += list(indices)
        assert len(indices) * (batch["chars"].shape[1] + batch["target_input"].shape[1]) <= 120
    assert sorted(seen) == list(range(len(instances)))
    assert batches.num_batches(0) > len(instances) // 50  # the budget, not batch_size, cut them


def padded(rows: list[list[int]], value: int):
    import torch

    width = max([1] + [len(r) for r in rows])
    return torch.tensor([list(r) + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def defined_batch(model, instances) -> dict:
    """What ``tensorize`` gives, by its definition: each row's ids looked up and padded one at a time."""
    s = model.subwords
    n = [min(len(x["chars"]), model.max_source_length) for x in instances]
    chars = [model.vocab.indices("chars", list(x["chars"][:k])) for x, k in zip(instances, n)]
    pieces = [s.tokenizer.encode(x["references"][0], add_special_tokens=False).ids for x in instances]
    target_output = padded([p + [s.eos] for p in pieces], s.pad)
    return {"chars": padded(chars, 0), "mask": padded([[1] * len(c) for c in chars], 0).bool(),
            "truncated": padded([[k < len(x["chars"])] for x, k in zip(instances, n)], 0).squeeze(1).bool(),
            "target_input": padded([[s.bos] + p for p in pieces], s.pad), "target_output": target_output,
            "target_positions": (target_output != s.pad).flatten().nonzero().squeeze(1)}


def test_tensorize_is_its_definition_with_each_pairs_ids_derived_once_per_model(overfit):
    """The pair's ids are kept with the example after its first batch (``Instance.memo``): later
    batches, a batch in another order and a cut source give the defined tensors; another model
    (or any other owner's value) never reads them."""
    import torch

    archive = overfit.archive
    model = archive.model
    instances = archive.read(overfit.spec["train_data_path"])[:12]
    long = model.text_to_instance({"text": "我们" * 15, "references": ["We are."]})
    for batch in (instances[:7], instances[:7], instances[3:12][::-1]):
        got = model.tensorize(batch)
        assert set(got) == {"chars", "mask", "truncated", "target_input", "target_output", "target_positions",
                            "references"}
        for key, value in defined_batch(model, batch).items():
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
    assert all(x.memo(model._memo_owner) is not None for x in instances)
    other = Run.open(overfit.run_dir).load_archive().model  # the same vocabulary: its own ids all the same
    assert other._memo_owner is not model._memo_owner
    assert all(x.memo(other._memo_owner) is None for x in instances)
    assert torch.equal(other.tensorize(instances)["chars"], defined_batch(model, instances)["chars"])
    from array import array

    instances[0].remember(object(), array("i", [7] * 40))  # another owner's value: recomputed
    assert torch.equal(model.tensorize(instances)["target_output"], defined_batch(model, instances)["target_output"])
    model.truncate = True
    try:
        batch = [long, instances[1]]
        for _ in range(2):
            got = model.tensorize(batch)
            for key, value in defined_batch(model, batch).items():
                assert torch.equal(got[key], value), key
            assert got["truncated"].tolist() == [True, False] and got["chars"].shape == (2, 20)
    finally:
        model.truncate = False
    with pytest.raises(DataError, match="a source of 30 characters, more than max_source_length 20"):
        model.tensorize([long])  # kept ids never hide the error once truncate is off
    plain = model.text_to_instance({"text": "你好。"})  # no reference: source side only
    assert set(model.tensorize([plain])) == {"chars", "mask", "truncated"}
    fresh = archive.read(overfit.spec["train_data_path"])[20:26]  # a token budget's lengths derive the ids first
    assert [model.instance_lengths(x) for x in fresh] == [(n, len(p) + 1) for n, p in zip(
        defined_batch(model, fresh)["mask"].sum(1).tolist(), (model.subwords.encode([x["references"][0]])[0]
                                                              for x in fresh))]
    assert all(x.memo(model._memo_owner) is not None for x in fresh)
    for key, value in defined_batch(model, fresh).items():
        assert torch.equal(model.tensorize(fresh)[key], value), key
