"""benchmarks/weights_pack.py: two pre-training runs packed as a device machine returns them (bf16,
parts of at most N bytes, at most M files) and unpacked on the CPU: every tensor equal to the
original within bf16's rounding (relative 2**-8), shapes and fp32 dtype back, text files equal,
each part within the size limit and loadable with weights_only=True; too many parts, a missing
part and a missing piece are errors naming them."""
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import weights_pack  # noqa: E402


def fake_run(directory, seed: int, words: int):
    """A run directory as a pre-training leaves it: best.pt (a state dict), config.json, vocabulary/."""
    g = torch.Generator().manual_seed(seed)
    state = {"embedder.words.weight": torch.randn(words, 128, generator=g),
             "embedder.chars.weight": torch.randn(500, 128, generator=g),
             "encoder.layers.0.linear.weight": torch.randn(256, 256, generator=g) * 1e-3,
             "encoder.layers.0.linear.bias": torch.randn(256, generator=g) * 50,
             "encoder.theta": torch.tensor(0.25),
             "head.steps": torch.tensor([3, 4], dtype=torch.long)}
    directory.mkdir()
    torch.save(state, directory / "best.pt")
    (directory / "config.json").write_text('{"model": {"type": "pretrainer"}}', encoding="utf-8")
    (directory / "spec_hash").write_text("abc\n", encoding="utf-8")
    (directory / "vocabulary").mkdir()
    (directory / "vocabulary" / "vocabulary.json").write_text('{"words": ["北京", "大学"]}', encoding="utf-8")
    return state


def test_round_trip_in_bf16_within_the_file_limits(tmp_path):
    a = fake_run(tmp_path / "a", 1, words=6000)  # 3 MB in bf16: cut into pieces of a 1 MiB part
    b = fake_run(tmp_path / "b", 2, words=100)
    limit = 1 << 20
    files = weights_pack.pack({"lattice_bert": tmp_path / "a", "char_bert": tmp_path / "b"}, tmp_path / "out",
                              max_bytes=limit, max_files=8)
    assert 3 <= len(files) <= 8
    assert [f.name for f in files] == [f"lb_weights-{i:02d}-of-{len(files):02d}.pt" for i in range(len(files))]
    counts = {}
    for f in files:
        assert f.stat().st_size <= limit
        part = torch.load(f, weights_only=True)
        assert all(t.dtype in (torch.bfloat16, torch.long) for _, _, _, t in part["pieces"])
        counts.update({key: count for key, _, count, _ in part["pieces"]})
    assert counts["lattice_bert/embedder.words.weight"] == 2 and counts["char_bert/embedder.words.weight"] == 1
    runs = weights_pack.unpack(tmp_path / "out", tmp_path / "back")
    assert set(runs) == {"lattice_bert", "char_bert"}
    for name, original in (("lattice_bert", a), ("char_bert", b)):
        back = torch.load(runs[name] / "best.pt", weights_only=True)
        assert list(back) == list(original)
        for key, tensor in original.items():
            got = back[key]
            assert got.dtype == tensor.dtype and got.shape == tensor.shape, key
            if tensor.is_floating_point():
                assert torch.allclose(got, tensor, rtol=2**-8, atol=0), key
                assert not torch.equal(got, tensor) or tensor.dim() == 0, key  # it did go through bf16
            else:
                assert torch.equal(got, tensor), key
        assert (runs[name] / "vocabulary" / "vocabulary.json").read_text(encoding="utf-8") == '{"words": ["北京", "大学"]}'
        assert (runs[name] / "spec_hash").read_text(encoding="utf-8") == "abc\n"
    assert weights_pack.run_files(runs["char_bert"]) == weights_pack.run_files(tmp_path / "b")


def test_a_pretrained_component_loads_the_unpacked_run(tmp_path):
    """What the fine-tuning specs do with ``pretrained: RUN``: ``load_pretrained`` copies the
    ``encoder.`` tensors of RUN/best.pt into the component."""
    from multigrain.components.pretrained import load_pretrained

    state = fake_run(tmp_path / "a", 3, words=10)
    weights_pack.pack({"m": tmp_path / "a"}, tmp_path / "out")
    run = weights_pack.unpack(tmp_path / "out", tmp_path / "back")["m"]
    module = torch.nn.Module()
    module.layers = torch.nn.ModuleList([torch.nn.Module()])
    module.layers[0].linear = torch.nn.Linear(256, 256)
    module.theta = torch.nn.Parameter(torch.tensor(0.0))
    load_pretrained(module, str(run), "encoder.")
    assert torch.allclose(module.layers[0].linear.weight, state["encoder.layers.0.linear.weight"], rtol=2**-8, atol=0)
    assert module.theta.item() == 0.25


def test_limits_and_damage_are_errors(tmp_path):
    fake_run(tmp_path / "a", 1, words=6000)
    with pytest.raises(weights_pack.PackError, match=r"need \d+ files of at most 1048576 bytes, over the limit of 2"):
        weights_pack.pack({"m": tmp_path / "a"}, tmp_path / "none", max_bytes=1 << 20, max_files=2)
    assert not (tmp_path / "none").exists()  # nothing written
    files = weights_pack.pack({"m": tmp_path / "a"}, tmp_path / "out", max_bytes=1 << 20)
    files[1].unlink()
    with pytest.raises(weights_pack.PackError, match=rf"part\(s\) \[1\] of {len(files)} missing"):
        weights_pack.unpack(tmp_path / "out", tmp_path / "back")
    part = torch.load(files[0], weights_only=True)  # a part whose pieces were cut short
    part["pieces"] = part["pieces"][1:]
    part["parts"] = 1
    (tmp_path / "one").mkdir()
    torch.save(part, tmp_path / "one" / "lb_weights-00-of-01.pt")
    with pytest.raises(weights_pack.PackError, match=r"m/\S+ has \d+ of its \d+ pieces"):
        weights_pack.unpack(tmp_path / "one", tmp_path / "back")
    with pytest.raises(weights_pack.PackError, match="no lb_weights-NN-of-NN.pt files"):
        weights_pack.unpack(tmp_path / "back", tmp_path / "back2")
