"""The lattice cache: hits, invalidation on data or builder change, corrupt files rebuilt."""
import os
import warnings

import numpy as np
import pytest

from multigrain.components.lattice import cache as cache_module
from multigrain.components.lattice.builder import LatticeBuilder
from multigrain.components.lattice.cache import default_cache_dir, with_lattices
from multigrain.components.lattice.lexicon import LexiconBuilder
from multigrain.components.lattice.types import Lattice
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError


class CountingBuilder(LatticeBuilder):
    """Words: every pair of equal adjacent characters; seg_ids optional; counts its calls."""

    def __init__(self, tag: str = "a", seg: bool = False):
        self.tag, self.seg, self.built = tag, seg, 0

    def spec_key(self):
        return self._spec(tag=self.tag, seg=self.seg)

    def build_many(self, sentences):
        self.built += len(sentences)
        out = []
        for chars in sentences:
            n = len(chars)
            words = [(i, i + 1) for i in range(n - 1) if chars[i] == chars[i + 1]]
            seg = [[i // 2 for i in range(n)], list(range(n))] if self.seg else None
            out.append(Lattice.from_words(chars, words, seg_ids=seg))
        return out


def make_data(tmp_path, lines):
    path = tmp_path / "data.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def read(path):
    with open(path, encoding="utf-8") as f:
        return [
            Instance({"chars": list(line.rstrip("\n")), "other": list(line.rstrip("\n"))[::-1]}, source=(path, i + 1))
            for i, line in enumerate(f)
        ]


def run(path, builder, cache_dir, fields={"chars": "lattice"}):
    return list(with_lattices(read(path), path, builder, fields, str(cache_dir)))


def lattices_of(instances, field="lattice"):
    return [inst[field] for inst in instances]


LINES = ["aabbc", "", "xyyz😀😀", "mmm", "Apple"]


def test_hit_returns_equal_lattices_without_building(tmp_path):
    path = make_data(tmp_path, LINES)
    first = CountingBuilder(seg=True)
    fields = {"chars": "lattice", "other": "other_lattice"}
    built = run(path, first, tmp_path / "c", fields)
    assert first.built == 2 * len(LINES)
    again = CountingBuilder(seg=True)
    cached = run(path, again, tmp_path / "c", fields)
    assert again.built == 0
    for a, b in zip(built, cached):
        for field in ("lattice", "other_lattice"):
            assert a[field] == b[field]
            b[field].validate()
        assert b.source == a.source and b["lattice"].chars == tuple(b["chars"])
    assert cached[0]["lattice"].words() == [(0, 1, "aa"), (2, 3, "bb")]
    assert cached[2]["lattice"].seg_ids.tolist() == [[0, 0, 1, 1, 2, 2], [0, 1, 2, 3, 4, 5]]
    assert [f for f in os.listdir(tmp_path / "c") if f.endswith(".tmp")] == []


def test_data_change_invalidates(tmp_path):
    path = make_data(tmp_path, LINES)
    run(path, CountingBuilder(), tmp_path / "c")
    make_data(tmp_path, LINES + ["qq"])
    b = CountingBuilder()
    out = run(path, b, tmp_path / "c")
    assert b.built == len(LINES) + 1 and out[-1]["lattice"].words() == [(0, 1, "qq")]
    # same instances, but the file's bytes changed (say a comment line the reader skips): rebuilt
    instances = read(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write("# a comment\n")
    b2 = CountingBuilder()
    list(with_lattices(instances, path, b2, {"chars": "lattice"}, str(tmp_path / "c")))
    assert b2.built == len(LINES) + 1
    # a new mtime with the same bytes is still a hit
    os.utime(path, (1, 1))
    b3 = CountingBuilder()
    list(with_lattices(instances, path, b3, {"chars": "lattice"}, str(tmp_path / "c")))
    assert b3.built == 0


def test_builder_or_fields_change_invalidates(tmp_path):
    path = make_data(tmp_path, LINES)
    run(path, CountingBuilder("a"), tmp_path / "c")
    b = CountingBuilder("b")
    run(path, b, tmp_path / "c")
    assert b.built == len(LINES)
    c = CountingBuilder("a")
    run(path, c, tmp_path / "c", {"chars": "lat2"})
    assert c.built == len(LINES)
    d = CountingBuilder("a")
    run(path, d, tmp_path / "c")
    assert d.built == 0
    assert len(os.listdir(tmp_path / "c")) == 3


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong_key", "wrong_count", "bad_spans"])
def test_corrupt_cache_is_rebuilt_with_a_warning(tmp_path, damage):
    path = make_data(tmp_path, LINES)
    good = run(path, CountingBuilder(seg=True), tmp_path / "c")
    (cache_file,) = (tmp_path / "c").iterdir()
    data = cache_file.read_bytes()
    if damage == "truncate":
        cache_file.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        cache_file.write_bytes(b"not a zip file at all")
    else:
        with np.load(cache_file) as z:
            arrays = {k: z[k] for k in z.files}
        if damage == "wrong_key":
            arrays["key"] = np.frombuffer(b"another key", dtype=np.uint8)
        elif damage == "wrong_count":
            arrays["n_chars"] = arrays["n_chars"][:-1]
        else:
            arrays["spans"] = arrays["spans"] + 100
        with open(cache_file, "wb") as f:
            np.savez(f, **arrays)
    b = CountingBuilder(seg=True)
    with pytest.warns(UserWarning, match="rebuilding"):
        out = run(path, b, tmp_path / "c")
    assert b.built == len(LINES)
    assert lattices_of(out) == lattices_of(good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b2 = CountingBuilder(seg=True)
        assert lattices_of(run(path, b2, tmp_path / "c")) == lattices_of(good)
        assert b2.built == 0


def test_lexicon_lattices_round_trip_with_multi_code_point_characters(tmp_path):
    path = make_data(tmp_path, ["南京市长江大桥", "x"])
    lex = tmp_path / "lex.txt"
    lex.write_text("南京\n长江大桥\nApple公司\nle公\n😀😀\n", encoding="utf-8")
    insts = [
        Instance({"chars": list("南京市长江大桥")}),
        Instance({"chars": ["Apple", "公", "司", "😀", "😀", "👨\u200d👩\u200d👧"]}),
    ]
    builder = LexiconBuilder(lexicon_path=str(lex))
    built = [i["lattice"] for i in with_lattices(insts, path, builder, {"chars": "lattice"}, str(tmp_path / "c"))]
    cached = [i["lattice"] for i in with_lattices(insts, path, builder, {"chars": "lattice"}, str(tmp_path / "c"))]
    assert built == cached
    assert cached[1].words() == [(0, 2, "Apple公司"), (3, 4, "😀😀")]
    assert cached[1].chars[-1] == "👨\u200d👩\u200d👧"


def test_missing_field_names_the_instance(tmp_path):
    path = make_data(tmp_path, ["ab"])
    with pytest.raises(DataError, match=r"data.txt:7"):
        list(with_lattices([Instance({"text": "ab"}, source=(path, 7))], path, CountingBuilder(), {"chars": "l"},
                           str(tmp_path / "c")))


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("MULTIGRAIN_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "lattices"
    monkeypatch.delenv("MULTIGRAIN_CACHE")
    assert str(default_cache_dir()).endswith(os.path.join(".cache", "multigrain", "lattices"))
    assert cache_module.CHUNK_SIZE > 0
