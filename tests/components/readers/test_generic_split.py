"""The hash-bucket ``split`` option every reader has (``readers/base.py``), checked against a
direct computation of ``zlib.crc32(key) % 1000``; and ``squad``, the generic SQuAD reader."""
from __future__ import annotations

import json
import zlib

import pytest

from multigrain.components.readers.base import FileReader
from multigrain.components.readers.classification import ThucNewsTitlesReader
from multigrain.components.readers.generic_spans import JsonlSpansReader
from multigrain.components.readers.generic_tables import TableReader
from multigrain.components.readers.mrc import SquadFormatReader
from multigrain.components.readers.translation import TatoebaReader
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.hints import constructor_parameters
from multigrain.platform.kinds import Reader
from multigrain.platform.registry import load_builtin

TEXTS = [f"第{i}句话说了{i * 7 % 13}件事" for i in range(120)]


def oracle_split(key: str, dev: float, test: float) -> str:
    bucket = zlib.crc32(key.encode("utf-8")) % 1000
    return "test" if bucket < test * 1000 else "dev" if bucket < (test + dev) * 1000 else "train"


def texts_of(reader, path, field="chars"):
    return ["".join(x[field]) for x in reader.read(path)]


def test_every_registered_reader_has_the_split_option():
    load_builtin()
    readers = {name: entry.cls for name, entry in Reader.registry().items()}
    assert {"jsonl_spans", "conll", "table", "squad", "resume_ner", "bq_corpus", "cmrc2018"} <= set(readers)
    for name, cls in readers.items():
        params, _, _ = constructor_parameters(cls)
        if name == "text_corpus":  # a corpus of several files: its own train/dev hash split (no test part)
            assert {"split", "dev_fraction"} <= set(params), name
            continue
        assert issubclass(cls, FileReader) and {"split", "dev_fraction", "test_fraction"} <= set(params), name


@pytest.mark.parametrize("dev, test", [(0.1, 0.0), (0.2, 0.3), (0.45, 0.35)])
def test_a_three_way_split_is_the_hash_bucket_partition(tmp_path, dev, test):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": t, "spans": []}, ensure_ascii=False) + "\n" for t in TEXTS),
                    encoding="utf-8")
    got = {split: texts_of(JsonlSpansReader(split=split, dev_fraction=dev, test_fraction=test), str(path))
           for split in ("train", "dev", "test") if split != "test" or test > 0}
    expected = {split: [t for t in TEXTS if oracle_split(t, dev, test) == split] for split in got}
    assert got == expected
    assert sum(map(len, got.values())) == len(TEXTS) and all(got.values())
    assert texts_of(JsonlSpansReader(), str(path)) == TEXTS  # split: all


def test_pairs_split_by_both_texts(tmp_path):
    rows = [(a, b) for a, b in zip(TEXTS, reversed(TEXTS))]
    path = tmp_path / "p.tsv"
    path.write_text("a\tb\tlabel\n" + "".join(f"{a}\t{b}\t1\n" for a, b in rows), encoding="utf-8")
    reader = TableReader(text_columns=["a", "b"], split="dev", dev_fraction=0.3)
    got = [(x["text_a"], x["text_b"]) for x in reader.read(str(path))]
    assert got == [(a, b) for a, b in rows if oracle_split(f"{a}\t{b}", 0.3, 0.0) == "dev"] and got


def test_the_readers_that_had_a_split_keep_their_buckets(tmp_path):
    path = tmp_path / "titles.txt"
    path.write_text("".join(f"{t}\t{i % 3}\n" for i, t in enumerate(TEXTS)), encoding="utf-8")
    dev = [x["text"] for x in ThucNewsTitlesReader(split="dev").read(str(path))]
    assert dev == [t for t in TEXTS if zlib.crc32(t.encode()) % 1000 < 100]  # dev_fraction 0.1 as before
    tatoeba = tmp_path / "cmn.txt"
    tatoeba.write_text("".join(f"s{i}\t{t}\tCC\n" for i, t in enumerate(TEXTS)), encoding="utf-8")
    for split in ("train", "dev", "test"):  # defaults 0.05 / 0.05 keyed by "english\tchinese", as before
        got = [x["source"] for x in TatoebaReader(split=split).read(str(tatoeba))]
        assert got == [t for i, t in enumerate(TEXTS) if oracle_split(f"s{i}\t{t}", 0.05, 0.05) == split]


@pytest.mark.parametrize("options", [
    {"split": "validation"},
    {"split": "test"},  # test_fraction defaults to 0: nothing would be kept
    {"split": "dev", "dev_fraction": 0.0},
    {"dev_fraction": 0.7, "test_fraction": 0.4},
    {"dev_fraction": -0.1},
])
def test_bad_split_options(options):
    with pytest.raises(ConfigurationError):
        JsonlSpansReader(**options)


def squad_file(tmp_path) -> str:
    paragraphs = [{"context": f"{t}。答案是{i}号。", "qas": [
        {"id": f"q{i}a", "question": "答案是几号？", "answers": [{"text": f"{i}号", "answer_start": len(t) + 4}]},
        {"id": f"q{i}b", "question": "说了什么？", "answers": []}]} for i, t in enumerate(TEXTS[:40])]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": "v1", "data": [{"title": "t", "paragraphs": paragraphs}]},
                               ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def test_squad_reads_any_squad_file_and_splits_by_paragraph(tmp_path):
    path = squad_file(tmp_path)
    every = list(SquadFormatReader().read(path))
    assert len(every) == 80 and every[0]["answers"] == [{"text": "0号", "answer_start": len(TEXTS[0]) + 4}]
    assert every[1]["answers"] == [] and every[1]["answer_texts"] == []
    dev = list(SquadFormatReader(split="dev", dev_fraction=0.4).read(path))
    contexts = {x["context"] for x in dev}
    assert contexts == {x["context"] for x in every if oracle_split(x["context"], 0.4, 0.0) == "dev"}
    assert len(dev) == 2 * len(contexts) > 0  # both questions of a paragraph in the same split
    assert Reader.by_name("squad") is SquadFormatReader
