"""Span reader (backbone, +MWA, +HRMF, BiG): windows and answer mapping, the model test case (20
CMRC 2018 questions through ``Run.train``), and bad MRC input."""
import json

import pytest

from multigrain.components.encoders.char_transformer import CharTransformer
from multigrain.components.models.span_reader import SpanReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.vocab import Vocabulary
from multigrain.testing import ModelTestCase, sentence_model, sentence_reader, tiny_spec
from tests.conftest import DATA

#: the training of every span-reader test
TRAINING = {"epochs": 25, "lr": 3e-3, "batch_size": 4, "seed": 3, "validation_metric": "+f1"}
SPAN_READER = {"max_length": 64, "max_query_length": 16, "doc_stride": 24,
               "head": {"type": "span", "dropout": 0.0, "max_answer_length": 30}}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("lattice-cache"))


def write_questions(trial: dict, path, skip: int = 0) -> str:
    """20 trial questions after the first ``skip`` usable ones (answers <= 24 characters), each
    context cut to 40 characters either side of its answer: about 90 characters, 3 windows of
    the models below."""
    articles, seen = [], 0
    for article in trial["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answer = qa["answers"][0]
                text, at, context = answer["text"], answer["answer_start"], paragraph["context"]
                if len(articles) == 20 or not qa["question"].strip() or len(text) > 24 \
                        or context[at:at + len(text)] != text:
                    continue
                seen += 1
                if seen <= skip:
                    continue
                lo, hi = max(0, at - 40), at + len(text) + 40
                articles.append({"paragraphs": [{"id": paragraph["id"], "context": context[lo:hi], "qas": [
                    {"id": qa["id"], "question": qa["question"],
                     "answers": [{"text": text, "answer_start": at - lo}]}]}]})
    path.write_text(json.dumps({"version": "v1.0", "data": articles}, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def question_files(tmp_path_factory):
    """(20 training questions, the next 20 held out)."""
    trial = json.loads((DATA / "cmrc2018" / "cmrc2018_trial.json").read_text(encoding="utf-8"))
    directory = tmp_path_factory.mktemp("mrc")
    return write_questions(trial, directory / "twenty.json"), write_questions(trial, directory / "held_out.json", 20)


def small_reader(**options):
    vocab = Vocabulary({"chars": ["@@PAD@@", "@@UNK@@", "[CLS]", "[SEP]"]})
    embedder = CharTransformer(vocab, hidden_size=16, num_layers=1, num_heads=2, max_length=64)
    return SpanReader(vocab, embedder, **options)


def test_windows_cover_the_context_and_map_answers_back():
    model = small_reader(max_length=16, max_query_length=4, doc_stride=3)
    context = "今年是2018年，iPhone新品在北京发布了两款"
    answer = "iPhone新品"
    x = Instance({"id": "q1", "question": "什么发布了？", "context": context,
                  "question_chars": split_chars("什么发布了？"), "context_chars": split_chars(context),
                  "answers": [{"text": answer, "answer_start": context.index(answer)}]})
    tokens = x["context_chars"]  # "iPhone" and "2018" are single tokens
    assert len(tokens) == 17 and tokens[6] == "iPhone"
    assert model.windows(len(tokens), 4) == [(0, 9), (3, 9), (6, 9), (9, 8)]
    batch = model.tensorize([x])
    assert tuple(batch["chars"].shape) == (4, 16)
    # question cut to 4 tokens; windows start at position 4 + 2 = 6
    assert batch["segments"][0].tolist() == [0] * 6 + [1] * 10
    assert batch["context_mask"][0].tolist() == [False] * 6 + [True] * 9 + [False]
    # the answer is tokens 6..8 (iPhone 新 品): inside the first three windows, not the last
    assert batch["start_positions"].tolist() == [6 + 6, 6 - 3 + 6, 6 - 6 + 6, 0]
    assert batch["end_positions"].tolist() == [8 + 6, 8 - 3 + 6, 8 - 6 + 6, 0]
    # decoding the gold positions of either window returns the answer text and offset
    import torch

    starts, ends = batch["start_positions"], batch["end_positions"]
    scores = torch.tensor([float("-inf"), 1.0, 2.0, float("-inf")])
    decoded = model.decode({"span_starts": starts, "span_ends": ends, "span_scores": scores,
                            "metadata": batch["metadata"]})
    assert decoded == [{"answer": answer, "answer_start": context.index(answer), "score": 2.0}]


@pytest.mark.parametrize("layer", ["backbone", "mwa", "hrmf"])
def test_span_reader_model_test_case(tmp_path, question_files, cache_dir, layer):
    train, held_out = question_files
    model = sentence_model("span_reader", layer, **SPAN_READER)
    if layer == "mwa":
        model["encoder"]["add_input"] = True
    spec = tiny_spec(model, sentence_reader({"type": "cmrc2018"}, layer, cache_dir), train, train,
                     held_out if layer == "backbone" else None, **TRAINING)
    case = ModelTestCase(spec, tmp_path / "run")
    result = case.check("em")
    assert result["validation"]["f1"] == 1.0
    instances = case.archive.read(train)
    for inst, pred in zip(instances, case.archive.predict_batches(instances)):
        assert pred["id"] == inst["id"] and pred["answer"] == inst["answers"][0]["text"]
        assert inst["context"][pred["answer_start"]:].startswith(pred["answer"])


# ------------------------------------------------------------------------------------- bad input
def mrc_file(tmp_path, question, answer_start):
    data = {"version": "v1.0", "data": [{"paragraphs": [{"id": "p", "context": "北京是中国的首都。", "qas": [
        {"id": "q1", "question": "中国的首都是哪里？", "answers": [{"text": "北京", "answer_start": 0}]},
        {"id": "q2", "question": question, "answers": [{"text": "首都", "answer_start": answer_start}]}]}]}]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def test_answer_offset_not_matching_its_text_is_an_error(tmp_path):
    from multigrain.components.readers.mrc import Cmrc2018Reader

    path = mrc_file(tmp_path, "什么？", answer_start=3)  # 首都 is at 6
    with pytest.raises(DataError, match=r"bad\.json:\d+: question q2: answer '首都' at answer_start=3"):
        list(Cmrc2018Reader(on_bad_answer="error").read(path))
    # an instance that reaches the model unchecked is caught there, naming its source
    context = "北京是中国的首都。"
    x = Instance({"id": "q2", "question": "什么？", "context": context, "question_chars": list("什么？"),
                  "context_chars": list(context), "answers": [{"text": "首都", "answer_start": 3}]},
                 source=("made.json", 12))
    with pytest.raises(DataError, match=r"made\.json:12: question q2: answer '首都' at answer_start=3 does not"):
        small_reader(max_length=32, max_query_length=8).tensorize([x])


def test_empty_question_is_an_error(tmp_path):
    from multigrain.components.readers.mrc import Cmrc2018Reader
    from multigrain.platform.archive import read_json_lines

    path = mrc_file(tmp_path, "  ", answer_start=6)
    with pytest.raises(DataError, match=r"bad\.json:\d+: empty question \(id q2\)"):
        list(Cmrc2018Reader().read(path))
    lines = tmp_path / "predict.jsonl"
    lines.write_text('{"question": "首都？", "context": "北京是首都"}\n{"question": "", "context": "北京"}\n',
                     encoding="utf-8")
    with pytest.raises(DataError, match=r"predict\.jsonl:2: .*non-empty \"question\""):
        read_json_lines(str(lines), small_reader(max_length=32, max_query_length=8))


def test_over_long_question_is_cut_or_an_error():
    x = Instance({"question_chars": list("一二三四五六七八九十"), "context_chars": list("北京是首都"),
                  "context": "北京是首都", "answers": []}, source=("long.json", 3))
    batch = small_reader(max_length=16, max_query_length=4).tensorize([x])
    assert batch["chars"].shape == (1, 4 + 5 + 3)
    with pytest.raises(DataError, match=r"long\.json:3: question of 10 tokens, more than max_query_length 4"):
        small_reader(max_length=16, max_query_length=4, truncate=False).tensorize([x])


def test_big_span_reader_model_test_case(tmp_path, question_files, cache_dir):
    """The cmrc2018_big spec's shape: lexicon lattice on the context, character embeddings, BiG, span head."""
    model = dict(sentence_model("span_reader", **SPAN_READER),
                 embedder={"type": "char_bigram", "char_dim": 32, "bigram_dim": 0, "dropout": 0.0},
                 encoder={"type": "big", "hidden_size": 32, "num_layers": 2, "num_heads": 4, "dropout": 0.0,
                          "attention_dropout": 0.0})
    reader = {"type": "cmrc2018", "lattice_builder": {"type": "lexicon"}, "cache_dir": cache_dir}
    train = question_files[0]
    result = ModelTestCase(tiny_spec(model, reader, train, train, **TRAINING), tmp_path / "run").check("em")
    assert result["validation"]["f1"] == 1.0
