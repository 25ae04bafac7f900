"""Progress without bars (``CI=true``): a line every interval (30 s, or less by
``MULTIGRAIN_PROGRESS_INTERVAL``) during training batches and during the stages that prepare a
data set (reading, segmentation, lattice building), with the count done of the total, the rate
and the time left; only the innermost running stage speaks; one last line for a stage that spoke."""
import re

import pytest

from multigrain.components.lattice.builder import LatticeBuilder
from multigrain.components.lattice.cache import build_in_chunks, with_lattices
from multigrain.components.lattice.segmenters import SegmenterBuilder, VotingBuilder
from multigrain.components.lattice.types import Lattice
from multigrain.platform import progress
from multigrain.platform.data import Instance
from multigrain.platform.progress import INTERVAL_ENV, Stage, interval
from multigrain.platform.runs import Run
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA


@pytest.fixture
def no_bars(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("MULTIGRAIN_QUIET", raising=False)
    monkeypatch.setattr(progress, "_ACTIVE", [])


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_interval_is_at_most_thirty_seconds(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert interval() == 30.0
    for value, expected in (("0.01", 0.01), ("120", 30.0), ("-1", 0.0), ("soon", 30.0), ("nan", 30.0)):
        monkeypatch.setenv(INTERVAL_ENV, value)
        assert interval() == expected, value
    monkeypatch.setenv(INTERVAL_ENV, "off")
    assert interval() == float("inf")


def test_a_stage_prints_a_line_every_interval_with_count_rate_and_time_left(no_bars, capsys):
    clock = Clock()
    with Stage("segmenting (jieba)", total=40_000, unit="sentences", clock=clock) as stage:
        for _ in range(10):  # 10 chunks of 1,000 sentences, 6 s each: a line at 30 s and at 60 s
            clock.now += 6.0
            stage.update(1_000)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "segmenting (jieba): 5,000/40,000 sentences (12.5%) | 166.7 sentences/s | elapsed 30.0s | remaining ~3m30s",
        "segmenting (jieba): 10,000/40,000 sentences (25.0%) | 166.7 sentences/s | elapsed 1m00s | remaining ~3m00s",
        "segmenting (jieba): 10,000/40,000 sentences (25.0%) | 166.7 sentences/s | elapsed 1m00s | done",
    ]


def test_a_short_stage_is_silent_and_only_the_innermost_stage_speaks(no_bars, capsys):
    clock = Clock()
    with Stage("quick", total=3, clock=clock) as stage:
        clock.now += 29.0
        stage.update(3)
    assert capsys.readouterr().err == ""  # under the interval: nothing, not even a last line
    outer = Stage("reading data.txt", unit="instances", clock=clock)
    with Stage("building lattices (lexicon)", total=10, unit="sentences", clock=clock) as inner:
        clock.now += 31.0
        outer.update(5)  # the inner stage is running: the outer one keeps quiet
        inner.update(10)
    clock.now += 31.0
    outer.update(5)
    outer.close()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["building lattices (lexicon)", "building lattices (lexicon)",
                                                      "reading data.txt", "reading data.txt"]
    assert lines[2] == "reading data.txt: 10 instances | 0.2 instances/s | elapsed 1m02s"  # no total: no time left


class SlowBuilder(LatticeBuilder):
    """A lattice builder that takes its time (a segmenter's pace)."""

    def __init__(self):
        self.calls = 0

    def spec_key(self) -> str:
        return "slow"

    def build_many(self, sentences):
        import time

        self.calls += 1
        time.sleep(0.02)
        return [Lattice.from_words(list(chars)) for chars in sentences]


def test_lattice_building_is_a_named_stage_in_growing_chunks(no_bars, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(INTERVAL_ENV, "0.01")
    builder = SlowBuilder()
    sentences = [list("北京欢迎你")] * 1_792
    assert len(build_in_chunks(builder, sentences)) == 1_792
    assert builder.calls == 3  # chunks of 256, 512 and 1,024: fast calls grow the chunk
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(re.fullmatch(r"building lattices \(SlowBuilder\): [\d,]+/1,792 sentences \([\d.]+%\) \| "
                                      r"[\d.,]+ sentences/s \| elapsed [\d.]+s \| (remaining ~[\d.]+s|done)", line)
                         for line in lines), lines
    assert lines[-1].startswith("building lattices (SlowBuilder): 1,792/1,792 sentences (100.0%)")
    # a data file's lattices (the reader path, with its cache) show the same stage
    instances = [Instance({"chars": list("上海")}) for _ in range(600)]
    (tmp_path / "data.txt").write_text("上海\n", encoding="utf-8")
    built = list(with_lattices(instances, str(tmp_path / "data.txt"), builder, {"chars": "lattice"},
                               cache_dir=str(tmp_path / "cache")))
    assert len(built) == 600 and "building lattices (SlowBuilder): 600/600 sentences" in capsys.readouterr().err
    assert SegmenterBuilder("jieba").stage_name == "segmenting (jieba)"
    assert VotingBuilder(["jieba", "snownlp"]).stage_name == "segmenting (jieba, snownlp) and voting"


def test_lines_during_reading_and_the_first_epoch_under_ci(no_bars, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(INTERVAL_ENV, "0")  # a line at every batch and every instance read
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 12)
    dev = copy_sentences(src, tmp_path / "dev.bmes", 18, start=12)
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, dev, epochs=2, batch_size=4,
                     task="ner")
    Run(spec, tmp_path / "run").train()
    lines = capsys.readouterr().err.splitlines()
    reading = [line for line in lines if line.startswith(f"reading {train}:")]
    assert reading[0].startswith(f"reading {train}: 1 instances | ") and "12 instances" in reading[-1]
    first_epoch = [line for line in lines if line.startswith("epoch 1/2: ")]
    assert re.fullmatch(r"epoch 1/2: 1/3 batches \(33\.3%\) \| [\d.,]+ batches/s \| elapsed [\d.]+s \| "
                        r"remaining ~[\d.]+s \| loss=[\d.]+", first_epoch[0]), first_epoch
    assert first_epoch[-1].startswith("epoch 1/2: 3/3 batches (100.0%)") and first_epoch[-1].endswith("| done")
    # the progress lines come before the epoch's summary line
    summary = next(i for i, line in enumerate(lines) if line.startswith("epoch 1/2 | train loss"))
    assert lines.index(first_epoch[0]) < summary


def test_a_stage_stopped_by_an_error_has_no_last_line(no_bars, monkeypatch, capsys):
    monkeypatch.setenv(INTERVAL_ENV, "0")

    def instances():
        yield 1
        raise ValueError("line 2 is damaged")

    with pytest.raises(ValueError):
        list(progress.progress(instances(), desc="reading data.txt", unit="instances"))
    assert capsys.readouterr().err.splitlines()[-1].startswith("reading data.txt: 1 instances | ")
    assert progress._ACTIVE == []
