"""Classifier and pair classifier (backbone, +MWA, +HRMF): packing, the model test case (20
examples through ``Run.train``), labels outside the label set, over-long inputs."""
import numpy as np
import pytest
import torch

from multigrain.components.lattice.types import Lattice
from multigrain.components.models.classifier import Classifier
from multigrain.components.models.packing import CLS, SEP, Part, fit_lengths, pack
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.runs import Run
from multigrain.platform.vocab import Vocabulary
from multigrain.testing import ModelTestCase, sentence_model, sentence_reader, tiny_spec
from tests.conftest import DATA, ROOT

#: the training of every sentence-model test
TRAINING = {"epochs": 30, "lr": 1e-3, "batch_size": 5, "seed": 3, "validation_metric": "+accuracy"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("lattice-cache"))


@pytest.fixture(scope="module")
def senti_files(tmp_path_factory):
    """(20 training examples, 20 held-out ones) of ChnSentiCorp."""
    lines = (DATA / "chnsenticorp" / "train.tsv").read_text(encoding="utf-8").splitlines()
    directory = tmp_path_factory.mktemp("senti")
    (directory / "twenty.tsv").write_text("\n".join(lines[:21]) + "\n", encoding="utf-8")
    (directory / "held_out.tsv").write_text("\n".join(lines[:1] + lines[21:41]) + "\n", encoding="utf-8")
    return str(directory / "twenty.tsv"), str(directory / "held_out.tsv")


@pytest.fixture(scope="module")
def senti_file(senti_files):
    return senti_files[0]


@pytest.fixture(scope="module")
def bq_files(tmp_path_factory):
    """(20 training pairs, 10 + 10 of each label; 20 held-out pairs) of BQ."""
    lines = (DATA / "bq_corpus" / "train.txt").read_text(encoding="utf-8").splitlines()[:400]
    picked = [x for x in lines if x.endswith("_!_1")][:10] + [x for x in lines if x.endswith("_!_0")][:10]
    held_out = [x for x in lines if x not in picked][:20]
    directory = tmp_path_factory.mktemp("bq")
    (directory / "twenty.txt").write_text("\n".join(picked) + "\n", encoding="utf-8")
    (directory / "held_out.txt").write_text("\n".join(held_out) + "\n", encoding="utf-8")
    return str(directory / "twenty.txt"), str(directory / "held_out.txt")


# ------------------------------------------------------------------------------------- packing
def test_pack_shifts_words_and_segmentations():
    a = Lattice.from_words("北京大学", [(0, 1), (2, 3)], seg_ids=np.array([[0, 0, 1, 1], [0, 0, 0, 0]]))
    b = Lattice.from_words("很好", [(0, 1)], seg_ids=np.array([[0, 0], [0, 1]]))
    packed = pack([CLS, Part(a.chars, a, 1, 4), SEP, Part(b.chars, b), SEP])  # a cut to 京大学
    assert packed.tokens == [CLS, "京", "大", "学", SEP, "很", "好", SEP]
    assert packed.segments == [0, 0, 0, 0, 0, 1, 1, 1]
    assert packed.special == [True, False, False, False, True, False, False, True]
    lat = packed.lattice
    lat.validate()
    assert lat.words() == [(2, 3, "大学"), (5, 6, "很好")]  # 北京 lost its first character: dropped
    assert lat.seg_ids.tolist() == [[0, 1, 2, 2, 3, 4, 4, 5], [0, 1, 1, 1, 2, 3, 4, 5]]
    plain = pack([CLS, Part(list("问题"), None), SEP, Part(b.chars, b), SEP], second_segment_after=1)
    assert plain.lattice.seg_ids.tolist() == [[0, 1, 2, 3, 4, 4, 5], [0, 1, 2, 3, 4, 5, 6]]
    assert pack([CLS, Part(list("问题"), None), SEP]).lattice is None


def test_truncation_is_cut_at_the_end_or_an_error():
    assert fit_lengths([30], 8) == [8]
    assert fit_lengths([3, 30], 10) == [3, 7]
    assert fit_lengths([30, 2], 10) == [8, 2]
    assert fit_lengths([9, 8], 9) == [5, 4]
    chars = ["@@PAD@@", "@@UNK@@", CLS, SEP] + list("一二三四五六七八九十")
    vocab = Vocabulary({"chars": chars, "labels": ["0", "1"]})
    from multigrain.components.encoders.char_transformer import CharTransformer

    def embedder():
        return CharTransformer(vocab, hidden_size=16, num_layers=1, num_heads=2, max_length=32)

    model = Classifier(vocab, embedder(), max_length=6)
    text = list("一二三四五六七八九十")
    batch = model.tensorize([Instance({"chars": text, "label": "1"}, source=("long.tsv", 7))])
    assert batch["chars"].tolist() == [vocab.indices("chars", [CLS, "一", "二", "三", "四", SEP])]
    strict = Classifier(vocab, embedder(), max_length=6, truncate=False)
    with pytest.raises(DataError, match=r"long\.tsv:7: 12 positions .* more than max_length 6"):
        strict.tensorize([Instance({"chars": text, "label": "1"}, source=("long.tsv", 7))])


def test_bigrams_follow_each_text_and_skip_special_tokens():
    from multigrain.components.embedders.char_bigram import CharBigramEmbedder
    from multigrain.components.models.pair_classifier import PairClassifier

    a, b = list("很好吃的"), list("不好")
    counters = {}
    PairClassifier.count_vocab_items(Instance({"chars_a": a, "chars_b": b, "label": "1"}), counters)
    expected_types = {"很好", "好吃", "吃的", "的</s>", "不好", "好</s>"}
    assert set(counters["bigrams"]) == expected_types
    vocab = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", CLS, SEP] + sorted(set(a + b)), "labels": ["0", "1"],
                        "bigrams": ["@@PAD@@", "@@UNK@@"] + sorted(expected_types - {"好</s>"})})
    embedder = CharBigramEmbedder(vocab, char_dim=4, bigram_dim=3, dropout=0.0)
    # a cut to 3 characters: its last kept bigram still pairs with the next character of the text
    model = PairClassifier(vocab, embedder, max_length=8)
    batch = model.tensorize([Instance({"chars_a": a, "chars_b": b, "label": "1"})])
    brute = [None] + [a[i] + (a[i + 1] if i + 1 < len(a) else "</s>") for i in range(3)] + [None] \
        + [b[i] + (b[i + 1] if i + 1 < len(b) else "</s>") for i in range(2)] + [None]
    assert brute == [None, "很好", "好吃", "吃的", None, "不好", "好</s>", None]
    assert batch["bigrams"].tolist() == [[0 if g is None else vocab.index("bigrams", g) for g in brute]]
    assert batch["bigrams"][0, 6].item() == 1  # a bigram outside the vocabulary is OOV, not padding
    assert model(**batch)["loss"].isfinite()
    plain = PairClassifier(vocab, CharBigramEmbedder(vocab, char_dim=4, bigram_dim=0), max_length=8)
    assert "bigrams" not in plain.tensorize([Instance({"chars_a": a, "chars_b": b, "label": "1"})])


# ------------------------------------------------------------------------------------- model test case
@pytest.mark.parametrize("layer", ["backbone", "mwa", "hrmf"])
def test_classifier_model_test_case(tmp_path, senti_files, cache_dir, layer):
    train, held_out = senti_files
    spec = tiny_spec(sentence_model("classifier", layer), sentence_reader({"type": "chnsenticorp"}, layer, cache_dir),
                     train, train, held_out if layer == "backbone" else None, **TRAINING)
    result = ModelTestCase(spec, tmp_path / "run").check("accuracy")
    assert result["validation"]["macro_f1"] == 1.0


@pytest.mark.parametrize("bigram_dim", [0, 16])
def test_big_classifier_model_test_case(tmp_path, senti_file, cache_dir, bigram_dim):
    """The chnsenticorp_big spec's shape: lexicon lattice, char(+bigram) embeddings, BiG, mean pooling."""
    model = sentence_model("classifier", head={"type": "classifier", "pooling": "mean"})
    model["embedder"] = {"type": "char_bigram", "char_dim": 32, "bigram_dim": bigram_dim, "dropout": 0.0}
    model["encoder"] = {"type": "big", "hidden_size": 32, "num_layers": 1, "num_heads": 4, "dropout": 0.0,
                        "attention_dropout": 0.0}
    reader = {"type": "chnsenticorp", "lattice_builder": {"type": "lexicon"}, "cache_dir": cache_dir}
    ModelTestCase(tiny_spec(model, reader, senti_file, senti_file, **TRAINING), tmp_path / "run").check("accuracy")


@pytest.mark.parametrize("layer", ["backbone", "mwa", "hrmf"])
def test_pair_classifier_model_test_case(tmp_path, bq_files, cache_dir, layer):
    train, held_out = bq_files
    spec = tiny_spec(sentence_model("pair_classifier", layer), sentence_reader({"type": "bq_corpus"}, layer, cache_dir),
                     train, train, held_out if layer == "backbone" else None, **TRAINING)
    ModelTestCase(spec, tmp_path / "run").check("accuracy")


def test_classifier_on_a_local_hf_transformer(tmp_path, senti_file):
    from tests.conftest import tiny_bert

    chars = {c for line in open(senti_file, encoding="utf-8") for c in line.strip()}
    model_dir = tiny_bert(tmp_path / "bert", chars)
    model = dict(sentence_model("classifier"), embedder={"type": "hf_transformer", "model_path": str(model_dir)})
    spec = tiny_spec(model, {"type": "chnsenticorp", "cache_dir": str(tmp_path / "c")}, senti_file, senti_file,
                     **TRAINING)
    ModelTestCase(spec, tmp_path / "run").check("accuracy")


# ------------------------------------------------------------------------------------- bad labels
def test_label_outside_the_label_set_names_file_and_line(tmp_path, senti_file):
    from multigrain.platform.experiment import batches_for
    from multigrain.platform.batching import DataLoaderConfig
    from multigrain.platform.evaluation import evaluate

    reader = {"type": "chnsenticorp", "cache_dir": str(tmp_path / "c")}
    spec = tiny_spec(sentence_model("classifier"), reader, senti_file, senti_file, **dict(TRAINING, epochs=1))
    Run(spec, tmp_path / "run").train()
    bad = tmp_path / "eval.tsv"
    bad.write_text("label\ttext_a\n1\t很好\n2\t一般般\n", encoding="utf-8")
    archive = Run.open(tmp_path / "run").load_archive()
    batches = batches_for(archive.model, archive.read(str(bad)), DataLoaderConfig(batch_size=4), 0, False)
    with pytest.raises(DataError, match=r"eval\.tsv:3: label '2' is not in the label set \(0, 1\)"):
        evaluate(archive.model, batches, archive.device)

    # a label set fixed in the spec catches it during training's own evaluation too
    fixed = tiny_spec(sentence_model("classifier", labels=["0", "1"]), reader, senti_file, str(bad),
                      **dict(TRAINING, epochs=1))
    with pytest.raises(DataError, match=r"eval\.tsv:3: label '2'"):
        Run(fixed, tmp_path / "fixed").train()


# ------------------------------------------------------------------------------------- specs
SPECS = sorted((ROOT / "jsonnet_configs").glob("*/*.jsonnet"))


@pytest.mark.parametrize("path", [p for p in SPECS if p.parent.name in ("cls", "pair", "mrc")], ids=lambda p: p.stem)
def test_sentence_specs_validate(path, monkeypatch, tmp_path):
    from multigrain.platform.specs import load_spec
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.kinds import Encoder
    from multigrain.platform.registry import load_all

    monkeypatch.chdir(ROOT)  # the specs name ../shared/data relative to the repository root
    for name in ("chars.vec", "m3e_chars.vec"):  # a new spec's vector files must exist
        (tmp_path / name).touch()
    spec = load_spec(path, ext_vars={"vectors": str(tmp_path)} if path.stem.endswith("_vec") else None)
    load_all()
    assert "big" in Encoder.registry()
    validate_spec(spec, str(path))
    if path.stem.endswith("_vec"):
        table = str(tmp_path / ("m3e_chars.vec" if path.stem.endswith("_m3e_vec") else "chars.vec"))
        assert spec["model"]["embedder"]["char_pretrained_file"] == table
        assert spec["model"]["embedder"]["char_dim"] == (512 if "m3e" in table else 50)
        assert spec["vocabulary"]["pretrained_files"] == {"chars": table}
    assert (spec["task"], spec["dataset"]) in {("cls", "chnsenticorp"), ("pair", "bq"), ("cls", "thucnews"),
                                               ("mrc", "cmrc2018")}
