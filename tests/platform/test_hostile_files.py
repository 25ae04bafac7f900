"""Hostile input, round five: files that never end, block, or inflate.

A data file of one 1.5 GB line took 3 GB and 20 s before its line-length error (Ctrl-C waited for
the read); a word list that was a FIFO or /dev/zero hung ``train`` silently, a folder was a
traceback, and ``validate`` called both valid; a 1.5 GB file of NULs was read whole as a word list
and accepted as a ``.vec`` file; a 7.7 MB ``best.pt`` with one deflated 3 GB member was inflated
(3.1 GB) before torch refused it; a 12 MB component name and an 11 MB key were echoed whole into
the error line; a data path that was a FIFO said "no such file".
"""
import json
import os
import re
import time
import zipfile

import pytest
import torch

from multigrain.components.lattice.lexicon import LexiconBuilder, read_word_list
from multigrain.platform.data import MAX_LINE_CHARS, read_lines
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Reader
from multigrain.platform.vec import vec_rows
from multigrain.platform.weights import load_weights, torch_file
from tests.conftest import resume_tagger_spec, run_cli


def sparse(path, size: int):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_a_line_without_end_is_refused_after_its_limit_not_at_its_end(tmp_path):
    one_line = tmp_path / "one_line.txt"
    with open(one_line, "wb") as f:
        f.write(b"first\r\nsecond\n")
        f.write(b"x" * (5 * MAX_LINE_CHARS))  # 5 MB here; 1.5 GB read the same way, bounded the same
    with pytest.raises(DataError, match=rf"one_line.txt:3: a line of more than {MAX_LINE_CHARS:,} characters"):
        list(read_lines(str(one_line)))
    nuls = sparse(tmp_path / "nuls.txt", 64 << 20)
    started = time.monotonic()
    with pytest.raises(DataError, match=r"nuls.txt:1: a NUL character"):
        list(read_lines(str(nuls)))
    assert time.monotonic() - started < 5  # 4 MB read of 64, not all of them


def test_lines_ended_by_lone_carriage_returns_are_lines(tmp_path):
    path = tmp_path / "old_mac.txt"
    path.write_bytes(b"ab\r" * 1_500_000 + b"end")  # 4.5 MB without a line feed
    lines = list(read_lines(str(path)))
    assert len(lines) == 1_500_001 and lines[0] == (1, "ab") and lines[-1] == (1_500_001, "end")


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_data_path_that_is_no_file_says_what_it_is(tmp_path, kind):
    path = tmp_path / "train.bmes"
    {"fifo": lambda: os.mkfifo(path), "folder": path.mkdir, "device": lambda: path.symlink_to("/dev/zero")}[kind]()
    said = {"fifo": "a FIFO (named pipe)", "folder": "a directory", "device": "a character device"}[kind]
    with pytest.raises(DataError, match=re.escape(f"train.bmes: not a data file ({said})") + "$"):
        list(Reader.by_name("resume_ner")().read(str(path)))


@pytest.mark.parametrize("kind", ["fifo", "folder", "missing"])
def test_a_word_list_that_is_no_file_is_refused_by_validate_and_train(tmp_path, kind):
    path = tmp_path / "words.txt"
    {"fifo": lambda: os.mkfifo(path), "folder": path.mkdir, "missing": lambda: None}[kind]()
    said = {"fifo": "not a word list file (a folder or a device)", "folder": "not a word list file (a folder or "
            "a device)", "missing": "no such word list file"}[kind]
    with pytest.raises(ConfigurationError, match="^" + re.escape(f"lexicon: {path}: {said}") + "$"):
        LexiconBuilder(lexicon_path=str(path))
    spec = resume_tagger_spec(tmp_path / "data")
    spec["dataset_reader"]["lattice_builder"] = {"type": "lexicon", "lexicon_path": str(path)}
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    out = run_cli("validate", tmp_path / "spec.json", cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and "dataset_reader.lattice_builder.lexicon_path: " in out.stderr, out.stderr
    out = run_cli("train", tmp_path / "spec.json", "-s", tmp_path / "run", "--no-tracking", cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "lexicon_path" in out.stderr, out.stderr
    assert not (tmp_path / "run").exists()


def test_a_word_list_or_vector_file_of_nuls_is_refused_at_its_first_line(tmp_path):
    nuls = str(sparse(tmp_path / "nuls.vec", 64 << 20))
    with pytest.raises(DataError, match=r"nuls.vec:1: a NUL character"):
        read_word_list(nuls)
    with pytest.raises(DataError, match=r"nuls.vec:1: a NUL character"):
        list(vec_rows(nuls))
    good = tmp_path / "good.vec"
    good.write_text("2 3\n中 1 2 3\r\n国 4 5 6 \n", encoding="utf-8")
    assert list(vec_rows(good)) == [(2, ["中", "1", "2", "3"]), (3, ["国", "4", "5", "6"])]
    assert read_word_list(str(good)) == (["中", "国"], [1, 4])


def zip_bomb(path, member_size: int):
    """A torch zip file whose one tensor is ``member_size`` deflated zeros."""
    torch.save({"w": torch.zeros(4)}, path)
    with zipfile.ZipFile(path) as source:
        members = [(info.filename, source.read(info.filename)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w") as bomb:
        for name, data in members:
            if name.endswith("/data/0"):
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                with bomb.open(info, "w", force_zip64=True) as out:
                    for _ in range(member_size >> 20):
                        out.write(bytes(1 << 20))
            else:
                bomb.writestr(name, data)


def test_a_checkpoint_with_a_compressed_member_is_refused_before_inflating_it(tmp_path):
    bomb = tmp_path / "best.pt"
    zip_bomb(bomb, 256 << 20)
    assert bomb.stat().st_size < 2 << 20
    started = time.monotonic()
    for check in (load_weights, torch_file):
        with pytest.raises(ConfigurationError, match=r"best.pt: not a multigrain checkpoint \(its member "
                                                     r"'.*/data/0' is compressed, 268,435,456 bytes in [0-9,]+; "
                                                     r"torch.save stores tensors uncompressed\)"):
            check(bomb)
    assert time.monotonic() - started < 5


def test_a_huge_name_or_key_is_cut_in_the_error(tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    spec["model"]["encoder"]["type"] = "bilstm" * 200_000
    spec["model"]["k" * 1_000_000] = 1
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    out = run_cli("validate", tmp_path / "spec.json", cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and len(out.stderr) < 5000, len(out.stderr)
    assert "model.encoder.type: unknown encoder type 'bilstmbilstm" in out.stderr
    assert "model.kkkk" in out.stderr and "...(1,000,000 chars): unknown key" in out.stderr
