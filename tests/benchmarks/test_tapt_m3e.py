"""benchmarks/tapt_m3e.py: sentences packed whole into rows, every character once and in order; BERT's
masking never touches [CLS], [SEP] or padding, and replaces 80 / 10 / 10 of the chosen positions; the
adapted encoder it saves loads as an ``hf_transformer`` backbone; a text file that does not read is one
error naming it (and its line), exit code 2, nothing written; ``--head-epochs`` move the new head alone; an
interrupted run resumes to the same weights; a checkpoint of other settings, or one that cannot be read, is
named and not resumed."""
import argparse
import json
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import tapt_m3e  # noqa: E402

CLS, SEP = 101, 102


def test_rows_hold_whole_sentences_in_order_and_cut_only_the_over_long_one():
    sentences = [[1] * 5, [2] * 3, [3] * 20, [4] * 4]
    rows = tapt_m3e.pack(sentences, 12, CLS, SEP)
    assert all(len(r) <= 12 and r[0] == CLS and r[-1] == SEP for r in rows)
    flat = [i for r in rows for i in r if i not in (CLS, SEP)]
    assert flat == [i for s in sentences for i in s]
    assert rows[0] == [CLS] + [1] * 5 + [SEP] + [2] * 3 + [SEP]  # two sentences share a row
    assert [CLS] + [3] * 10 + [SEP] in rows  # 20 characters: two pieces of block - 2


def test_masking_spares_special_positions_and_replaces_as_bert_does():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(200, 1000, (64, 128), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:8, 100:] = True  # padding
    inputs, labels = tapt_m3e.mask_batch(ids, special, 103, 1000, 0.15, g)
    chosen = labels != -100
    assert not chosen[special].any()
    assert (labels[chosen] == ids[chosen]).all() and (inputs[~chosen] == ids[~chosen]).all()
    share = chosen.sum() / (~special).sum()
    assert abs(share - 0.15) < 0.01
    masked = (inputs[chosen] == 103).float().mean()
    kept = (inputs[chosen] == ids[chosen]).float().mean()
    assert abs(masked - 0.8) < 0.03 and abs(kept - 0.1) < 0.03


def tiny_text(tmp_path):
    from tests.conftest import tiny_bert

    text = "我在北京大学读书今年二十岁他住在上海市浦东新区喜欢看书和跑步"
    source = tiny_bert(tmp_path / "tiny", text)
    data = tmp_path / "train.char.bmes"
    data.write_text("".join(f"{c} O\n" + ("\n" if i % 7 == 6 else "") for i, c in enumerate(text)), encoding="utf-8")
    return source, data


def run_tapt(*args, timeout=300):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tapt_m3e.py"), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_the_adapted_encoder_loads_as_a_backbone(tmp_path):
    from multigrain.components.embedders.hf_transformer import HfTransformer

    source, data = tiny_text(tmp_path)
    out = tmp_path / "adapted"
    done = run_tapt("--model", source, "--text", str(data), "--out", str(out), "--epochs", "2", "--batch-size", "2",
                    "--block", "16")
    assert done.returncode == 0, done.stderr[-2000:]
    history = json.loads((out / "tapt.json").read_text(encoding="utf-8"))["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    backbone = HfTransformer(str(out), special_tokens=True)
    before = HfTransformer(source, special_tokens=True)
    moved = [not torch.equal(a, b) for (_, a), (_, b) in zip(backbone.model.named_parameters(),
                                                             before.model.named_parameters())]
    assert any(moved)  # the encoder was trained, not copied
    # saved whole: the source's pooler, so loading it initialises nothing at random
    assert torch.equal(backbone.model.pooler.dense.weight, before.model.pooler.dense.weight)
    ids = torch.tensor([backbone.index(list("我在北京"))])
    assert backbone(chars=ids, mask=torch.ones_like(ids, dtype=torch.bool)).shape == (1, 4, 32)


def test_a_missing_or_malformed_text_file_is_one_error_naming_it_and_nothing_is_written(tmp_path):
    from tests.conftest import tiny_bert

    source = tiny_bert(tmp_path / "tiny", "我在北京")
    out = tmp_path / "adapted"
    missing = tmp_path / "absent.bmes"
    done = run_tapt("--model", source, "--text", str(missing), "--out", str(out))
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == f"error: {missing}: no such file"
    bad = tmp_path / "bad.bmes"
    bad.write_text("我 O\n在 O extra\n", encoding="utf-8")
    done = run_tapt("--model", source, "--text", str(bad), "--out", str(out))
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {bad}:2: expected 2 columns") and "Traceback" not in done.stderr
    assert not out.exists() and not (tmp_path / "adapted.tmp").exists()


def tapt_args(source, data, out, **changes):
    settings = dict(text=[str(data)], reader="resume_ner", model=source, out=str(out), epochs=2, head_epochs=0,
                    head_lr=1e-3, lr=1e-4, batch_size=2, block=16, mask_rate=0.15, seed=13, threads=1,
                    max_sentences=None)
    settings.update(changes)
    return argparse.Namespace(**settings)


def encoder_state(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def interrupt_after(monkeypatch, epochs: int, args):
    """Run ``adapt(args)`` and stop it (as Ctrl-C would) when epoch ``epochs + 1`` starts."""
    real, calls = tapt_m3e.run_epoch, []

    def stopping(*a, **k):
        calls.append(1)
        if len(calls) > epochs:
            raise KeyboardInterrupt
        return real(*a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(tapt_m3e, "run_epoch", stopping)
        try:
            tapt_m3e.adapt(args)
        except KeyboardInterrupt:
            pass
    assert len(calls) == epochs + 1


def test_head_epochs_train_the_new_head_alone_then_the_whole_model(tmp_path, monkeypatch):
    source, data = tiny_text(tmp_path)
    seen = []
    real = tapt_m3e.run_epoch

    def spy(model, *a, frozen_encoder, **k):
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        totals = real(model, *a, frozen_encoder=frozen_encoder, **k)
        moved = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
        seen.append((frozen_encoder, moved))
        return totals

    monkeypatch.setattr(tapt_m3e, "run_epoch", spy)
    tapt_m3e.adapt(tapt_args(source, data, tmp_path / "adapted", epochs=1, head_epochs=2))
    assert [frozen for frozen, _ in seen] == [True, True, False]
    for frozen, moved in seen[:2]:
        # the tied decoder is listed once, as bert.embeddings.word_embeddings.weight: it stayed too
        assert moved and all(n.startswith("cls.") for n in moved)
    assert any(n.startswith("bert.encoder.") for n in seen[2][1])
    history = json.loads((tmp_path / "adapted" / "tapt.json").read_text(encoding="utf-8"))["history"]
    assert [h["phase"] for h in history] == ["head", "head", "all"]


def test_an_interrupted_run_resumes_from_its_last_epoch_to_the_same_weights(tmp_path, monkeypatch, capsys):
    source, data = tiny_text(tmp_path)
    whole = tmp_path / "whole"
    tapt_m3e.adapt(tapt_args(source, data, whole, epochs=2, head_epochs=1))
    resumed = tmp_path / "resumed"
    interrupt_after(monkeypatch, 2, tapt_args(source, data, resumed, epochs=2, head_epochs=1))
    assert not resumed.exists() and (tmp_path / "resumed.tmp" / "checkpoint.pt").is_file()
    tapt_m3e.adapt(tapt_args(source, data, resumed, epochs=2, head_epochs=1))
    assert "resumed from" in capsys.readouterr().out
    assert not (tmp_path / "resumed.tmp").exists() and not (resumed / "checkpoint.pt").exists()
    a, b = encoder_state(whole), encoder_state(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    history = json.loads((resumed / "tapt.json").read_text(encoding="utf-8"))["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]


def test_a_checkpoint_of_other_settings_is_named_and_not_resumed(tmp_path, monkeypatch, capsys):
    source, data = tiny_text(tmp_path)
    out = tmp_path / "adapted"
    interrupt_after(monkeypatch, 1, tapt_args(source, data, out, epochs=2))
    capsys.readouterr()
    tapt_m3e.adapt(tapt_args(source, data, out, epochs=2, lr=2e-4))
    printed = capsys.readouterr().out
    assert "was written with other settings (lr): starting over" in printed and "resumed from" not in printed
    history = json.loads((out / "tapt.json").read_text(encoding="utf-8"))["history"]
    assert [h["epoch"] for h in history] == [1, 2]


@pytest.mark.parametrize("content", [b"not a torch file", None], ids=["garbage", "foreign"])
def test_an_unreadable_checkpoint_is_named_and_the_run_starts_over(tmp_path, capsys, content):
    source, data = tiny_text(tmp_path)
    out = tmp_path / "adapted"
    checkpoint = out.with_name("adapted.tmp") / "checkpoint.pt"
    checkpoint.parent.mkdir(parents=True)
    if content is None:
        torch.save({"model": {}}, checkpoint)  # a readable file, but no checkpoint of this script
    else:
        checkpoint.write_bytes(content)
    tapt_m3e.adapt(tapt_args(source, data, out, epochs=1))
    printed = capsys.readouterr().out
    assert f"{checkpoint} cannot be read (" in printed and "starting over" in printed
    history = json.loads((out / "tapt.json").read_text(encoding="utf-8"))["history"]
    assert [h["epoch"] for h in history] == [1]


def test_out_replaces_only_an_earlier_adaptation_never_a_folder_of_other_files(tmp_path):
    source, data = tiny_text(tmp_path)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "other.tmp").mkdir()
    (tmp_path / "other.tmp" / "notes.txt").write_text("mine", encoding="utf-8")
    for out, folder, marker in ((taken, taken, "tapt.json"), (tmp_path / "other", tmp_path / "other.tmp",
                                                              "checkpoint.pt or tapt.json")):
        done = run_tapt("--model", source, "--text", str(data), "--out", str(out), "--epochs", "1")
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
            f"error: --out {folder}: there already, and not an earlier output of this command (it holds no "
            f"{marker}); give a new folder, or remove it yourself"), done.stderr[-2000:]
        assert (folder / "notes.txt").read_text(encoding="utf-8") == "mine"
    done = run_tapt("--model", source, "--text", str(data), "--out", source, "--epochs", "1")
    assert done.returncode == 2 and "which the command reads" in done.stderr

