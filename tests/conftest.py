import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
os.environ.setdefault("MULTIGRAIN_QUIET", "1")


@pytest.fixture
def data_dir() -> Path:
    if not DATA.exists():
        pytest.fail(f"shared data not found at {DATA}")
    return DATA


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in a temporary working directory (MLflow DB, runs/) with the repo's specs reachable."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


def run_cli(*args, cwd=None, env=None, timeout=600):
    """The CLI in a subprocess, as the console script runs it (``-P``: the working directory is not
    put on ``sys.path``)."""
    import subprocess

    full_env = dict(os.environ)
    full_env.pop("MLFLOW_TRACKING_URI", None)  # mlflow.set_tracking_uri in an earlier test exports it
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-P", "-m", "multigrain.platform.cli", *map(str, args)], cwd=cwd or ROOT,
                          capture_output=True, text=True, env=full_env, timeout=timeout)


def proc_stat(pid) -> list[str]:
    """The fields of /proc/PID/stat after "PID (comm)": state, ppid, pgrp, session, ...; [] for a
    process that is gone (Linux)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def alive(pids) -> set[int]:
    """Those of ``pids`` that run (a zombie that nobody reaped does not)."""
    return {pid for pid in pids if (fields := proc_stat(pid)) and fields[0] != "Z"}


def children_of(pid: int) -> set[int]:
    """The processes whose parent is ``pid``, zombies too."""
    return {int(e.name) for e in Path("/proc").glob("[0-9]*") if (f := proc_stat(e.name)) and f[1] == str(pid)}


def in_session(sid: int) -> set[int]:
    """The live processes of session ``sid``."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if os.getsid(int(entry.name)) == sid:
                found.add(int(entry.name))
        except OSError:
            pass
    return alive(found)


def write_spec(directory: Path, spec: dict) -> str:
    import json

    path = directory / "tiny.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def mlflow_runs(uri: str) -> list:
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    ids = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return list(client.search_runs(ids, max_results=1000)) if ids else []


def resume_tagger_spec(directory: Path) -> dict:
    """A 1-epoch BiLSTM-CRF spec whose data files (the first 16 dev sentences of Resume NER:
    12 train, 4 dev = test) are written to ``directory``."""
    from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec

    src = DATA / "resume_ner" / "dev.char.bmes"
    directory.mkdir(parents=True, exist_ok=True)
    train = copy_sentences(src, directory / "train.bmes", 12)
    dev = copy_sentences(src, directory / "dev.bmes", 16, start=12)
    return tiny_spec(bilstm_tagger(hidden=8, dim=8, dropout=0.5), {"type": "resume_ner"}, train, dev, dev, task="ner")


def trained_tagger(folder: Path) -> dict:
    """A 1-epoch BiLSTM-CRF run of built-in components only (``resume_tagger_spec``) in
    ``folder``/run, with a one-line ``predict`` input: its run, folder, spec, test data and input."""
    import json

    from multigrain.platform.runs import Run

    spec = resume_tagger_spec(folder / "data")
    Run(spec, folder / "run").train()
    (folder / "input.jsonl").write_text(json.dumps({"text": "我在北京工作"}) + "\n", encoding="utf-8")
    return {"folder": folder, "run": folder / "run", "spec": spec, "data": spec["test_data_path"],
            "input": folder / "input.jsonl"}


@pytest.fixture
def tagger_overfit_data(tmp_path):
    """Twenty Resume training sentences and their lexicon, written to tmp_path."""
    from multigrain.testing import TaggerOverfitData

    return TaggerOverfitData(DATA / "resume_ner" / "train.char.bmes", tmp_path)


@pytest.fixture
def single_thread():
    """One intra-op thread: on a small shared machine two threads of tiny ops mostly wait on
    each other (the overfitting runs are ~10x faster under load)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_lattice_batch(seed: int, lengths=(9, 5, 1, 7), max_word: int = 4, words_per_char: float = 0.8,
                         chars_only_row: bool = True):
    """A LatticeBatch of random word spans (2..max_word characters); row 2 without words."""
    import random

    from multigrain.components.lattice.types import Lattice, LatticeBatch

    rng = random.Random(seed)
    lattices = []
    for r, n in enumerate(lengths):
        words = set()
        if not (chars_only_row and r == 2):
            for _ in range(int(words_per_char * n) + 1):
                s = rng.randrange(n)
                e = min(n - 1, s + rng.randint(1, max_word - 1))
                if e > s:
                    words.add((s, e))
        lattices.append(Lattice.from_words([chr(0x4E00 + rng.randrange(50)) for _ in range(n)], sorted(words)))
    return LatticeBatch.collate(lattices, lambda text, is_char: 2 + sum(map(ord, text)) % 7)


def lattice_rows(batch) -> list:
    """Per row of a LatticeBatch: (n, [(start, end, position)] of the words)."""
    rows = []
    for b in range(batch.mask.shape[0]):
        n = int(batch.n_chars[b])
        words = [(int(batch.starts[b, t]), int(batch.ends[b, t]), t)
                 for t in range(batch.mask.shape[1]) if batch.mask[b, t] and not batch.is_char[b, t]]
        rows.append((n, words))
    return rows


def train_runs(folder, uri, variants, epochs=2):
    """Train one tiny Resume NER run per ``(spec name, seed, lr)`` into the store at ``uri``
    (experiment ``ner/resume``); returns their results."""
    import json

    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger
    from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec

    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", folder / "train.bmes", 16)
    results = []
    for name, seed, lr in variants:
        spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, epochs=epochs, lr=lr, seed=seed,
                         task="ner", dataset="resume", grad_clipping=5.0)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(spec))
        results.append(Run(spec, folder / f"run-{name}-{seed}-{lr}", str(path)).train(logger=RunLogger(uri)))
    return results


def tiny_bert(folder: Path, characters, hidden: int = 32, positions: int = 64) -> str:
    """A randomly initialised 2-layer BERT (seed 0) with a ``vocab.txt`` of the special tokens and
    ``characters``, saved to ``folder``: a local ``hf_transformer`` backbone for tests (CI has no
    pretrained one). Returns the folder's path."""
    import torch
    from transformers import BertConfig, BertModel

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(characters))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokens), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=2 * hidden, max_position_embeddings=positions, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, type_vocab_size=2)).save_pretrained(folder)
    return str(folder)

