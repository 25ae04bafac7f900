"""What every generic reader shares with the built-in ones: a bad UTF-8 byte, a NUL character or
an over-long line names its line; an empty file or a missing one is an error."""
from __future__ import annotations

import pytest

from multigrain.components.readers.files import MAX_LINE_CHARS
from multigrain.components.readers.generic_columns import ConllReader
from multigrain.components.readers.generic_spans import JsonlSpansReader
from multigrain.components.readers.generic_tables import TableReader
from multigrain.components.readers.mrc import SquadFormatReader
from multigrain.platform.errors import DataError

# (name, reader, file name, a file whose 4th line holds {bad})
READERS = [
    ("jsonl_spans", lambda: JsonlSpansReader(), "a.jsonl",
     '{"text": "一", "spans": []}\n{"text": "二", "spans": []}\n\n{"text": "{bad}", "spans": []}\n'),
    ("conll", lambda: ConllReader(), "a.conll", "一\tO\n二\tO\n\n{bad}\tO\n"),
    ("table_tsv", lambda: TableReader(text_columns=["text"]), "a.tsv", "text\tlabel\n一\t1\n\n{bad}\t0\n"),
    ("table_csv", lambda: TableReader(text_columns=["text"], format="csv"), "a.csv", "text,label\n一,1\n\n{bad},0\n"),
    ("table_jsonl", lambda: TableReader(text_columns=["t"], format="jsonl"), "a.jsonl",
     '{"t": "一", "label": "1"}\n{"t": "二", "label": "1"}\n\n{"t": "{bad}", "label": "0"}\n'),
    ("squad", lambda: SquadFormatReader(), "a.json", '{"data": [\n{"paragraphs": []},\n\n"{bad}"]}'),
]
IDS = [r[0] for r in READERS]


def error(reader, path) -> DataError:
    with pytest.raises(DataError) as caught:
        list(reader.read(str(path)))
    return caught.value


@pytest.mark.parametrize("name, make, file_name, template", READERS, ids=IDS)
def test_bad_utf8_and_nul_name_their_line(tmp_path, name, make, file_name, template):
    good, bad = template.split("{bad}")
    path = tmp_path / file_name
    path.write_bytes(good.encode() + b"\xff\xfe" + bad.encode())
    e = error(make(), path)
    assert e.line == 4 and "not valid UTF-8" in str(e)
    path.write_text(template.replace("{bad}", "\0"), encoding="utf-8")
    e = error(make(), path)
    assert e.line == 4 and "a NUL character" in str(e)


@pytest.mark.parametrize("name, make, file_name, template", READERS[:-1], ids=IDS[:-1])
def test_an_over_long_line_names_its_line(tmp_path, name, make, file_name, template):
    path = tmp_path / file_name
    path.write_text(template.replace("{bad}", "长" * (MAX_LINE_CHARS + 1)), encoding="utf-8")
    e = error(make(), path)
    assert e.line == 4, str(e)
    assert ("field larger than field limit" if name == "table_csv" else "the longest a reader accepts") in str(e)


@pytest.mark.parametrize("name, make, file_name, template", READERS, ids=IDS)
def test_empty_and_missing_files(tmp_path, name, make, file_name, template):
    path = tmp_path / file_name
    path.write_bytes(b"")
    assert "empty file" in str(error(make(), path))
    assert "no such file" in str(error(make(), tmp_path / "missing" / file_name))
