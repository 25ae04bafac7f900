"""Property-based: whatever bytes a data file holds (random, a valid file cut anywhere, the right
text in the wrong encoding), every reader raises only our errors (DataError, ConfigurationError),
never another exception. ``MULTIGRAIN_HYPOTHESIS_EXAMPLES`` sets the examples per property."""
import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multigrain.components.readers.classification import ChnSentiCorpReader, ThucNewsTitlesReader
from multigrain.components.readers.mrc import Cmrc2018Reader, DrcdReader
from multigrain.components.readers.ner import MsraNerReader, ResumeNerReader, WeiboNerReader
from multigrain.components.readers.nist import NistReader
from multigrain.components.readers.pair import BqCorpusReader
from multigrain.components.readers.raw_text import RawTextReader
from multigrain.components.readers.translation import TatoebaReader, WmtNewstestReader
from multigrain.platform.errors import MultigrainError

EXAMPLES = int(os.environ.get("MULTIGRAIN_HYPOTHESIS_EXAMPLES", "25"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

MRC = ('{"data": [{"paragraphs": [{"id": "p", "context": "北京是中国的首都。", "qas": [{"id": "q1", '
       '"question": "首都是哪里？", "answers": [{"text": "北京", "answer_start": 0}]}]}]}]}')
#: (reader, file name, a small valid file)
READERS = [
    (ResumeNerReader, "a.bmes", "中 B-LOC\n国 E-LOC\n很 O\n\n好 O\n"),
    (WeiboNerReader, "a.conll", "中0\tB-GPE.NAM\n国1\tI-GPE.NAM\n\n好0\tO\n"),
    (MsraNerReader, "a.txt", "中国/ns 很/o 好/o \n我们/o \n"),
    (ChnSentiCorpReader, "a.tsv", "label\ttext_a\n1\t很好\n0\t不好\n"),
    (ThucNewsTitlesReader, "a.txt", "新闻标题一\t0\n新闻标题二\t1\n"),
    (BqCorpusReader, "a.txt", "你好_!_您好_!_1\n再见_!_拜拜_!_0\n"),
    (TatoebaReader, "a.txt", "Hi.\t嗨。\tCC\nRun.\t跑。\tCC\n"),
    (WmtNewstestReader, "a.csv", "0,1\n你好,Hello\n\"再见,\",\"Bye\"\n"),
    (RawTextReader, "a.txt", "一句话\n两句话\n"),
    (Cmrc2018Reader, "a.json", MRC),
    (DrcdReader, "a.json", MRC),
    (NistReader, "a.src.sgm", '<srcset setid="s" srclang="zh">\n<doc docid="d">\n<seg id=1>你好</seg>\n</doc>\n</srcset>\n'),
]
IDS = [r[0].__name__ for r in READERS]


def make(cls):
    return cls(references=[]) if cls is NistReader else cls()


def read_bytes(cls, name, content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(content)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                list(make(cls).read(str(path)))
        except MultigrainError:
            pass


@pytest.mark.parametrize("cls, name, valid", READERS, ids=IDS)
def test_the_valid_samples_read(cls, name, valid, tmp_path):
    path = tmp_path / name
    path.write_text(valid, encoding="utf-8")
    assert list(make(cls).read(str(path)))


@pytest.mark.parametrize("cls, name, valid", READERS, ids=IDS)
@PROPERTY
@given(content=st.binary(max_size=200))
def test_random_bytes(cls, name, valid, content):
    read_bytes(cls, name, content)


@pytest.mark.parametrize("cls, name, valid", READERS, ids=IDS)
@PROPERTY
@given(cut=st.integers(min_value=0, max_value=400), junk=st.binary(max_size=8))
def test_a_valid_file_cut_anywhere(cls, name, valid, cut, junk):
    raw = valid.encode("utf-8")
    read_bytes(cls, name, raw[:cut % (len(raw) + 1)] + junk)


@pytest.mark.parametrize("cls, name, valid", READERS, ids=IDS)
@PROPERTY
@given(encoding=st.sampled_from(["utf-16", "utf-32", "gbk", "big5", "latin-1", "cp1252"]))
def test_wrong_encodings(cls, name, valid, encoding):
    read_bytes(cls, name, valid.encode(encoding, errors="replace"))
