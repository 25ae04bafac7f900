"""Hostile input files and output paths (the issue "Hostile input, round two"): each case is one
``error: FILE:LINE: ...`` (exit 2, no traceback), nothing half-written, and no line of a file the
user did not mean to show echoed. Property tests (``MULTIGRAIN_HYPOTHESIS_EXAMPLES`` examples
each): nesting around the depth limit, lone surrogates, invalid UTF-8 on random lines: each input
reads correctly or is a MultigrainError naming the right file and line, never another exception."""
import errno
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multigrain.components.readers.generic_spans import JsonlSpansReader
from multigrain.components.readers.generic_tables import TableReader
from multigrain.components.readers.mrc import SquadFormatReader
from multigrain.components.readers.ner import MsraNerReader, ResumeNerReader
from multigrain.components.readers.raw_text import RawTextReader
from multigrain.platform.commands import main
from multigrain.platform.commands.common import AtomicOutput
from multigrain.platform.data import json_lines, read_lines
from multigrain.platform.errors import ConfigurationError, DataError, MultigrainError
from multigrain.platform.jsonio import MAX_DEPTH
from multigrain.platform.runs import Run
from multigrain.platform.vocab import Vocabulary
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA, ROOT, run_cli

EXAMPLES = int(os.environ.get("MULTIGRAIN_HYPOTHESIS_EXAMPLES", "25"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SECRET = "root:SECRET-TOKEN-123:0:0"
DEEP = "[" * 100_000
SPANS = '{"text": "张三在北京", "spans": [{"start": 0, "end": 2, "label": "PER"}]}'


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run trained once (1 epoch, 12 Resume sentences) for the predict/evaluate cases."""
    tmp = tmp_path_factory.mktemp("hostile")
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp / "train.bmes", 12)
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, train, task="ner")
    Run(spec, tmp / "run").train()
    return tmp / "run"


def cli(capsys, *args) -> tuple[int, str]:
    """``multigrain ARGS`` in this process: (exit status, stderr)."""
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def refused(code: int, err: str, *phrases: str) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err, err
    for phrase in phrases:
        assert phrase in err, err


def write(path: Path, content) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def error_of(reader, path) -> DataError:
    with pytest.raises(DataError) as e:
        list(reader.read(str(path)))
    return e.value


def only(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------- 1. deeply nested JSON
def test_deep_json_in_predict_input_is_one_error(run_dir, tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", '{"text": "张三"}\n' + DEEP + "\n")
    code, err = cli(capsys, "predict", run_dir, src, "--output-file", tmp_path / "out.jsonl")
    refused(code, err, f"{src}:2: nested deeper than {MAX_DEPTH} levels")
    assert only(tmp_path) == ["in.jsonl"]


def test_deep_json_in_the_readers_names_the_line(tmp_path):
    spans = write(tmp_path / "a.jsonl", SPANS + "\n\n" + '{"text": "x", "spans": ' + DEEP + "}\n")
    error = error_of(JsonlSpansReader(), spans)
    assert (error.line, error.detail) == (3, f"nested deeper than {MAX_DEPTH} levels")
    table = write(tmp_path / "t.jsonl", '{"text": "好", "label": "1"}\n' + DEEP + "\n")
    assert error_of(TableReader(format="jsonl", text_columns=["text"]), table).line == 2
    document = json.dumps(squad("谁在北京？"), ensure_ascii=False, indent=1).replace('"answer_start": 0',
                                                                                      '"answer_start": ' + DEEP)
    error = error_of(SquadFormatReader(), write(tmp_path / "s.json", document))
    assert error.line == document[:document.index('"answer_start"')].count("\n") + 1 == 14
    assert "nested deeper" in error.detail


def squad(question: str) -> dict:
    return {"data": [{"paragraphs": [{"context": "张三在北京。", "qas": [
        {"id": "q1", "question": question, "answers": [{"text": "张三", "answer_start": 0}]}]}]}]}


@PROPERTY
@given(depth=st.integers(MAX_DEPTH - 5, MAX_DEPTH + 5), objects=st.booleans(), line=st.integers(1, 4))
def test_nesting_around_the_limit(depth, objects, line):
    value = "0"
    for _ in range(depth - 1):  # the record itself is the first level
        value = '{"a": ' + value + "}" if objects else "[" + value + "]"
    lines = [SPANS] * 4
    lines[line - 1] = '{"text": "张三", "spans": [], "x": ' + value + "}"
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "a.jsonl", "\n".join(lines) + "\n")
        if depth <= MAX_DEPTH:
            assert len(list(JsonlSpansReader().read(str(path)))) == 4
        else:
            error = error_of(JsonlSpansReader(), path)
            assert (error.path, error.line) == (str(path), line) and "nested deeper" in str(error)


# ---------------------------------------------------------------------------- 2. lone surrogates
def test_a_lone_surrogate_in_predict_input(run_dir, tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", '{"text": "张三"}\n{"text": "\\ud800abc"}\n')
    code, err = cli(capsys, "predict", run_dir, src, "--output-file", tmp_path / "out.jsonl")
    refused(code, err, f"{src}:2: a lone surrogate")
    assert only(tmp_path) == ["in.jsonl"]
    # as bytes (an encoded surrogate, which UTF-8 forbids): not valid UTF-8, at its line and column
    write(src, b'{"text": "\xe5\xbc\xa0"}\n{"text": "ab\xed\xa0\x80"}\n')
    refused(*cli(capsys, "predict", run_dir, src), f"{src}:2: not valid UTF-8 (byte b'\\xed' at column 13)")


def test_a_lone_surrogate_in_a_training_file_leaves_no_vocabulary(tmp_path):
    train = write(tmp_path / "train.jsonl", SPANS + "\n" + '{"text": "李\\udc00四", "spans": []}\n')
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "jsonl_spans"}, train, task="ner")
    write(tmp_path / "spec.json", json.dumps(spec))
    out = run_cli("train", "spec.json", "-s", "run", "--no-tracking", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"{train}:2: a lone surrogate" in out.stderr
    assert not list(tmp_path.rglob("vocabulary.json*")) and not list(tmp_path.rglob("*.tmp"))
    bmes = write(tmp_path / "t.bmes", "张 O\n\n".encode() + b"\xed\xb0\x80 O\n")  # the same, as bytes
    error = error_of(ResumeNerReader(), bmes)
    assert error.line == 3 and "not valid UTF-8 (byte b'\\xed' at column 1)" in str(error)


def test_vocabulary_save_is_all_or_nothing(tmp_path, monkeypatch):
    Vocabulary({"chars": ["a", "b"]}).save(tmp_path)
    before = (tmp_path / "vocabulary.json").read_bytes()
    with pytest.raises(ConfigurationError, match=r"namespace 'chars', token 1, holds a lone surrogate U\+D800"):
        Vocabulary({"chars": ["a", "b\ud800"]}).save(tmp_path)
    assert only(tmp_path) == ["vocabulary.json"] and (tmp_path / "vocabulary.json").read_bytes() == before

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        Vocabulary({"chars": ["c"]}).save(tmp_path)
    assert only(tmp_path) == ["vocabulary.json"] and (tmp_path / "vocabulary.json").read_bytes() == before
    with pytest.raises(OSError):
        Vocabulary({"chars": ["c"]}).save(tmp_path / "new")
    assert only(tmp_path / "new") == []


SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)


@PROPERTY
@given(texts=st.lists(st.text(min_size=1, max_size=8).filter(str.strip), min_size=1, max_size=4),
       injected=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 8), SURROGATES), max_size=3))
def test_lone_surrogates_anywhere(texts, injected):
    texts = list(texts)
    for i, at, char in injected:
        if i < len(texts):
            texts[i] = texts[i][:at] + char + texts[i][at:]
    lines = [json.dumps({"text": t, "spans": []}) for t in texts]  # \\udXXX escapes (a pair is one character)
    bad = [n for n, line in enumerate(lines, 1) if re.search("[\ud800-\udfff]", json.loads(line)["text"])]
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "a.jsonl", "\n".join(lines) + "\n")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                read = list(JsonlSpansReader().read(str(path)))
        except MultigrainError as e:
            assert bad and (e.path, e.line) == (str(path), bad[0]) and "lone surrogate" in str(e), str(e)
        else:
            assert not bad and [''.join(x["chars"]) for x in read] == [json.loads(x)["text"] for x in lines]


# ------------------------------------------------------------- 3. empty input, BOM, invalid UTF-8
@pytest.mark.parametrize("content", ["", "\n\n  \n", "\ufeff"])
def test_predict_of_no_instances_is_an_error(run_dir, tmp_path, capsys, content):
    src = write(tmp_path / "in.jsonl", content)
    refused(*cli(capsys, "predict", run_dir, src, "--output-file", tmp_path / "out.jsonl"),
            f"{src}: no instances in the file")
    assert only(tmp_path) == ["in.jsonl"]


def test_predict_reads_a_byte_order_mark_like_the_readers(run_dir, tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", '\ufeff{"text": "张三在北京"}\r\n{"text": "李四"}\r\n')
    assert main(["predict", str(run_dir), str(src)]) == 0
    assert [json.loads(x)["text"] for x in capsys.readouterr().out.splitlines()] == ["张三在北京", "李四"]


def test_invalid_utf8_in_predict_input_names_line_and_column(run_dir, tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", '{"text": "张三"}\n\n{"text": "北京'.encode() + b"\xff" + b'"}\n')
    refused(*cli(capsys, "predict", run_dir, src), f"{src}:3: not valid UTF-8 (byte b'\\xff' at column 13)")


LINE_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=10)
BAD_BYTES = st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe5\xbc", b"\x80", b"\xf8\x88\x80\x80\x80"])


@PROPERTY
@given(lines=st.lists(LINE_TEXT.filter(lambda t: t.strip() and "\r" not in t and "\x85" not in t), min_size=1,
                      max_size=6),
       bad=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10), BAD_BYTES), max_size=2),
       crlf=st.booleans())
def test_invalid_utf8_on_random_lines(lines, bad, crlf):
    raw = [line.encode("utf-8") for line in lines]
    for i, at, junk in bad:
        if i < len(raw):
            cut = len(lines[i][:at].encode("utf-8"))
            raw[i] = raw[i][:cut] + junk + raw[i][cut:]
    first_bad = next((n for n, r in enumerate(raw, 1) if not _decodes(r)), None)
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "a.txt", (b"\r\n" if crlf else b"\n").join(raw) + b"\n")
        try:
            read = [x["text"] for x in RawTextReader().read(str(path))]
        except MultigrainError as e:
            assert first_bad is not None and (e.path, e.line) == (str(path), first_bad), str(e)
            assert "not valid UTF-8" in str(e)
            column = int(re.search(r"at column (\d+)", str(e)).group(1))
            assert raw[first_bad - 1][:_bad_offset(raw[first_bad - 1])].decode("utf-8") == \
                lines[first_bad - 1][:column - 1]
        else:
            assert first_bad is None and read == lines


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _bad_offset(raw: bytes) -> int:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return len(raw)


def test_line_numbers_count_lone_carriage_returns_like_text_mode(tmp_path):
    path = write(tmp_path / "a.txt", b"one\rtwo\r\nthree\n\xef\xbb\xbf\rfour\xff\n")
    with pytest.raises(DataError) as e:
        list(read_lines(str(path)))
    assert e.value.line == 5 and "at column 5" in str(e.value)
    write(path, b"\xef\xbb\xbfone\rtwo\r\nthree\n")
    assert list(read_lines(str(path))) == [(1, "one"), (2, "two"), (3, "three")]
    assert list(json_lines(str(write(tmp_path / "b.jsonl", b'\xef\xbb\xbf{"a": 1}\n')))) == [(1, {"a": 1})]


# ------------------------------------------------------------------------------ 4. MSRA chunks
@pytest.mark.parametrize("line, found", [
    ("我/o 北京//ns 好/o", "found '北京//ns' (a chunk with 2 '/')"),
    ("我/o /ns", "found '/ns' (a chunk with nothing before its '/')"),
    ("我/o 北京", "found '北京' (a chunk with no '/')"),
    ("北京//ns", "found a chunk with 2 '/' (the whole line)"),
    ("我/o " + "长" * 50 + "/o/o", "found '" + "长" * 30 + "...' (a chunk with 2 '/')"),
])
def test_msra_refuses_malformed_chunks(tmp_path, line, found):
    path = write(tmp_path / "m.txt", "中国/ns 很/o 好/o \n" + line + "\n")
    error = error_of(MsraNerReader(), path)
    assert (error.path, error.line) == (str(path), 2) and found in error.detail, error.detail
    assert "长" * 31 not in str(error)


# ---------------------------------------------------------------- 5. no line of the file echoed
@pytest.fixture
def passwd(tmp_path) -> Path:
    lines = [SECRET, *Path("/etc/passwd").read_text(errors="replace").splitlines()[1:4]] \
        if Path("/etc/passwd").is_file() else [SECRET, "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin"]
    return write(tmp_path / "passwd", "\n".join(lines) + "\n")


def test_a_foreign_training_file_is_not_echoed(passwd, tmp_path):
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, passwd, task="ner")
    write(tmp_path / "spec.json", json.dumps(spec))
    out = run_cli("train", "spec.json", "-s", "run", "--no-tracking", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"{passwd}:1: expected 2 columns" in out.stderr and "SECRET" not in out.stderr + out.stdout


#: options of the readers that need some; every other registered reader is made with none
READER_OPTIONS = {"table": [{"text_columns": ["text"]}, {"text_columns": ["text"], "format": "csv"},
                            {"text_columns": ["text"], "format": "jsonl"},
                            {"text_columns": [0], "label_column": 1, "header": False, "delimiter": ":"}],
                  "nist": [{"references": []}]}


def test_no_reader_echoes_a_line(passwd):
    import importlib
    import pkgutil

    import multigrain.components.readers as readers
    from multigrain.platform.kinds import Reader

    for module in pkgutil.iter_modules(readers.__path__):
        importlib.import_module(f"{readers.__name__}.{module.name}")
    tried = 0
    for name in Reader.names():
        for options in READER_OPTIONS.get(name, [{}]):
            try:
                reader = Reader.by_name(name)(**options)
            except (TypeError, ConfigurationError):  # needs options this test does not know
                continue
            tried += 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    list(reader.read(str(passwd)))
            except MultigrainError as e:
                assert "SECRET" not in str(e), (name, options, str(e))
    assert tried >= 18


def test_predict_of_a_foreign_file_is_not_echoed(run_dir, passwd, tmp_path, capsys):
    as_jsonl = write(tmp_path / "passwd.jsonl", passwd.read_text(encoding="utf-8"))
    for args in [(as_jsonl,), (passwd, "--use-dataset-reader")]:
        code, err = cli(capsys, "predict", run_dir, *args)
        refused(code, err, f"{args[0]}:1: ")
        assert "SECRET" not in err


# ------------------------------------------------------------------------------- 6. output paths
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_an_output_path_that_cannot_be_a_file_is_refused_before_any_work(run_dir, tmp_path, capsys, command):
    data = run_dir.parent / "train.bmes"
    if command == "predict":
        data = write(tmp_path / "in.jsonl", '{"text": "张三"}\n')
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "keep.txt").write_text("x")
    missing_run = tmp_path / "no-such-run"  # not even opened: the output path is checked first
    refused(*cli(capsys, command, missing_run, data, "--output-file", folder), f"--output-file {folder}: is a folder")
    refused(*cli(capsys, command, missing_run, data, "--output-file", tmp_path / "nope" / "x.json"),
            f"--output-file {tmp_path / 'nope' / 'x.json'}: no such folder {tmp_path / 'nope'}")
    refused(*cli(capsys, command, missing_run, data, "--output-file", folder / "keep.txt" / "x"), "is not a folder")
    assert only(folder) == ["keep.txt"] and "out.tmp" not in only(tmp_path)
    assert main([command, str(run_dir), str(data), "--output-file", str(folder / "o.json")]) == 0
    capsys.readouterr()
    assert only(folder) == ["keep.txt", "o.json"] and (folder / "o.json").stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_an_output_path_that_would_replace_what_the_command_reads_is_refused(run_dir, tmp_path, capsys):
    """``--output-file`` naming the input, the data file (through a link too) or what the platform
    keeps in the run directory would overwrite it with predictions or metrics; the user's own files
    in the run directory stay theirs to write."""
    data = tmp_path / "train.bmes"
    data.write_bytes((run_dir.parent / "train.bmes").read_bytes())
    (tmp_path / "link.bmes").symlink_to(data)
    lines = write(tmp_path / "in.jsonl", '{"text": "张三"}\n')
    kept = {p: p.read_bytes() for p in (data, lines, run_dir / "metrics.json", run_dir / "best.pt")}
    for command, source, output, phrase in (
            ("predict", lines, lines, "is the input file"),
            ("evaluate", data, tmp_path / "link.bmes", "is the data file"),
            ("evaluate", data, run_dir / "metrics.json", f"is the run {run_dir}'s metrics.json"),
            ("predict", lines, run_dir / "best.pt", f"is the run {run_dir}'s best.pt"),
            ("predict", lines, run_dir / "vocabulary" / "new.txt", f"is inside the run {run_dir}'s vocabulary")):
        refused(*cli(capsys, command, run_dir, source, "--output-file", output),
                f"--output-file {output}: {phrase}; writing the output there could damage it (give another file name)")
    assert {p: p.read_bytes() for p in kept} == kept and not (run_dir / "vocabulary" / "new.txt").exists()
    for _ in range(2):  # a file of the user's own beside the run's: written, and written again
        assert main(["predict", str(run_dir), str(lines), "--output-file", str(run_dir / "predictions.jsonl")]) == 0
    (run_dir / "predictions.jsonl").unlink()
    capsys.readouterr()


def test_an_export_or_plot_over_the_tracking_store_is_refused(tmp_path, capsys):
    store = tmp_path / "m.db"
    board = write(tmp_path / "board.json", json.dumps({"format": "multigrain-leaderboard", "version": 1, "runs": []}))
    assert main(["leaderboard", "--import", str(board), "--tracking-uri", f"sqlite:///{store}"]) == 0
    capsys.readouterr()
    before = store.read_bytes()
    for args, option in ((["leaderboard", "--all", "--export", store], "--export"),
                         (["compare", "abcdef", "--plot", store], "--plot"),
                         (["leaderboard", "--all", "--import", board, "--export", board], "--export")):
        code, err = cli(capsys, *args, "--tracking-uri", f"sqlite:///{store}")
        what = "the file --import reads" if board in args[-2:] else "the tracking store"
        refused(code, err, f"{option} {args[-1]}: is {what}; writing the output there could damage it")
    assert store.read_bytes() == before and board.read_text(encoding="utf-8").startswith('{"format"')
    refused(*cli(capsys, "leaderboard", "--import", board, "--export", tmp_path / "e.json", "--tracking-uri",
                 f"sqlite:///{store}"), "--export: give a TASK or --all too (what to export)")  # not ignored


def test_compare_refuses_a_plot_path_that_cannot_be_a_file(tmp_path, capsys):
    refused(*cli(capsys, "compare", "a", "b", "--plot", tmp_path, "--tracking-uri", f"sqlite:///{tmp_path}/no.db"),
            f"--plot {tmp_path}: is a folder")
    assert only(tmp_path) == []  # not even the store was opened


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_full_disk_leaves_no_output_file(run_dir, tmp_path, capsys, monkeypatch):
    src = write(tmp_path / "in.jsonl", '{"text": "张三"}\n' * 3)
    opened = AtomicOutput._open

    class Full:
        def __init__(self, fd):
            self.file, self.lines = opened(fd), 0

        def write(self, text):
            self.lines += 1
            if self.lines > 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.file.write(text)

        def close(self):
            self.file.close()

    monkeypatch.setattr(AtomicOutput, "_open", staticmethod(Full))
    out = tmp_path / "out.jsonl"
    refused(*cli(capsys, "predict", run_dir, src, "--output-file", out),
            f"{out}: cannot write (No space left on device); nothing was written")
    assert only(tmp_path) == ["in.jsonl"]
    write(out, "old\n")  # an older file stays as it was
    refused(*cli(capsys, "predict", run_dir, src, "--output-file", out), "No space left on device")
    assert only(tmp_path) == ["in.jsonl", "out.jsonl"] and out.read_text() == "old\n"


def test_atomic_output_when_the_path_changes_meanwhile(tmp_path):
    path = tmp_path / "o.txt"
    output = AtomicOutput(path)
    path.mkdir()  # a folder appears after the check
    with pytest.raises(ConfigurationError, match="is a folder"):
        with output:
            pass
    path.rmdir()
    with pytest.raises(MultigrainError, match="cannot write"):
        with AtomicOutput(path) as out:
            out.write("x\n")
            path.mkdir()  # ... or while it is written: os.replace fails, the temporary file goes
    assert only(tmp_path) == ["o.txt"] and path.is_dir()
    with AtomicOutput(os.devnull) as out:  # no regular file: written straight to, never replaced
        out.write("x\n")
    assert Path(os.devnull).is_char_device()


def test_stdout_on_a_full_device_or_a_closed_pipe(run_dir, tmp_path):
    src = write(tmp_path / "in.jsonl", '{"text": "张三在北京大学读书"}\n' * 3)
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [sys.executable, "-P", "-m", "multigrain.platform.cli", "predict", str(run_dir), str(src)]
    with open("/dev/full", "w") as full:
        out = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=600)
    assert out.returncode == 2, out.stderr
    one_error(out.stderr, "error: cannot write the output: No space left on device")
    # a reader that has gone (| head): one error line, no "Exception ignored ... BrokenPipeError"
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=600) == 2, err
    one_error(err, "error: cannot write the output: Broken pipe")


def test_an_io_error_is_not_called_a_write_error(capsys):
    import errno

    from multigrain.platform.commands.common import report_write_error

    assert report_write_error(OSError(errno.EIO, "Input/output error"))  # reading a failing disk raises it too
    assert capsys.readouterr().err == "error: input/output error while reading or writing: Input/output error\n"
    assert report_write_error(OSError(errno.ENOSPC, "No space left on device", "out.json"))
    assert capsys.readouterr().err == "error: cannot write the output out.json: No space left on device\n"
    assert not report_write_error(OSError(errno.EACCES, "Permission denied"))


def test_an_error_cut_short_by_a_closed_stderr_pipe_still_exits_2(tmp_path):
    spec = {("key%d" % i) * 20: i for i in range(3000)}  # 3,000 unknown keys: an error of over 1 MB
    path = write(tmp_path / "bad.json", json.dumps({"task": "ner", **spec}))
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    read_end, write_end = os.pipe()
    process = subprocess.Popen([sys.executable, "-P", "-m", "multigrain.platform.cli", "validate", str(path)],
                               stdout=subprocess.DEVNULL, stderr=write_end, cwd=ROOT, env=env)
    os.close(write_end)
    assert os.read(read_end, 7) == b"error: "  # ``2>&1 | head -c 7``: the reader goes after 7 bytes
    os.close(read_end)
    assert process.wait(timeout=600) == 2


def one_error(stderr: str, error: str) -> None:
    """``error`` is the last line of ``stderr`` and its only error (whether the count line came
    before it depends on when the buffered stdout was written)."""
    assert stderr.strip().splitlines()[-1] == error and stderr.count("error") == 1, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
