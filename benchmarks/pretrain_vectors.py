"""Character, bigram and word vectors for the NER specs, trained here with skip-gram and negative
sampling (word2vec's SGNS) on the *training* text of the shared datasets: no pretrained vectors
(the papers' Giga-word ones) are reachable offline.

    python benchmarks/pretrain_vectors.py [--out runs/vectors] [--dim 50] [--epochs 3] [--window 5]
        [--negatives 5] [--min-count 3] [--threads N] [--max-sentences N] [--namespaces chars ...]

Writes ``<out>/chars.vec``, ``bigrams.vec`` and ``words.vec`` (those ``--namespaces`` names; word2vec text format: a
``count dim`` header, then ``token v1 ... vd``) and ``<out>/vectors.json`` (corpus, vocabulary
sizes, settings, seconds). The ``*_vec`` NER specs read them from ``runs/vectors`` (relative to
the repository root, the suites' ``vectors`` ext-var): run this script once before
``multigrain suite jsonnet_configs/suites/{ner,sentence}.jsonnet`` (their ``*_vec`` runs read them).

Corpus (training splits only, so no NER dev/test text is seen): MSRA, Resume and Weibo NER train,
ChnSentiCorp train, CMRC 2018 train (contexts, once each, and questions), THUCNews titles (the
training part of dev.txt); BQ's 100k short banking questions are left out to keep the run short. Tokens are the readers' characters
(Latin and digit runs stay whole, as the models see them), forward bigrams as the models build
them (``multigrain.components.text.bigrams_of``) and jieba's search-mode words
(dictionary only, no HMM: the words a lexicon lattice can contain).

SGNS as in word2vec: frequent tokens subsampled (t = 1e-4), a dynamic window (offset o kept with
probability (window - o + 1) / window), negatives from the unigram distribution to the power
0.75, SGD with word2vec's gradients and linearly decaying rate (0.025), applied to shuffled
(centre, context) pairs in batches of 4,096 (summed, as asynchronous word2vec threads would).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"

#: (reader name, reader arguments, file under DATA, instance fields holding character lists)
CORPORA = [
    ("msra_ner", {}, "msra_ner/train1.txt", ["chars"]),
    ("resume_ner", {}, "resume_ner/train.char.bmes", ["chars"]),
    ("weibo_ner", {}, "weibo_ner/weiboNER_2nd_conll.train", ["chars"]),
    ("chnsenticorp", {}, "chnsenticorp/train.tsv", ["chars"]),
    ("cmrc2018", {}, "cmrc2018/cmrc2018_train.json", ["context_chars", "question_chars"]),
    ("thucnews_titles", {"split": "train"}, "thucnews_titles/dev.txt", ["chars"]),
]


def read_corpus(max_sentences: int | None) -> tuple[list[list[str]], dict[str, int]]:
    """Character lists of every training text (a CMRC context once however many questions it has)."""
    import warnings

    from multigrain.platform.kinds import Reader

    sentences, sizes, seen_contexts = [], {}, set()
    for name, kwargs, rel, fields in CORPORA:
        before = len(sentences)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the readers' tag-scheme warnings are not ours here
            for inst in Reader.by_name(name)(**kwargs).read(str(DATA / rel)):
                for field in fields:
                    chars = inst[field]
                    if field == "context_chars":
                        key = "".join(chars)
                        if key in seen_contexts:
                            continue
                        seen_contexts.add(key)
                    if chars:
                        sentences.append(list(chars))
                if max_sentences and len(sentences) - before >= max_sentences:
                    break
        sizes[name] = len(sentences) - before
    return sentences, sizes


NAMESPACES = ("chars", "bigrams", "words")


def tokenizations(sentences: list[list[str]], namespaces=NAMESPACES) -> dict[str, list[list[str]]]:
    """The token streams of each requested namespace (jieba runs only when words are asked for)."""
    streams = {}
    if "chars" in namespaces:
        streams["chars"] = sentences
    if "bigrams" in namespaces:
        from multigrain.components.text import bigrams_of

        streams["bigrams"] = [bigrams_of(chars) for chars in sentences]
    if "words" in namespaces:
        import jieba

        jieba.setLogLevel(60)
        streams["words"] = [[w for w in jieba.cut_for_search("".join(chars), HMM=False) if w.strip()]
                            for chars in sentences]
    return streams


def train_sgns(sentences: list[list[str]], dim: int, window: int, negatives: int, epochs: int, min_count: int,
               seed: int, batch_size: int = 4096, lr: float = 0.025, sample: float = 1e-4, label: str = ""):
    """Skip-gram with negative sampling: ``(tokens, input vectors [V, dim])``."""
    import numpy as np
    import torch
    from torch import nn

    from multigrain.platform.progress import progress

    counts = Counter(t for s in sentences for t in s)
    vocab = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
    index = {t: i for i, t in enumerate(vocab)}
    ids, sent = [], []
    for k, s in enumerate(sentences):
        row = [index[t] for t in s if t in index]
        ids.extend(row)
        sent.extend([k] * len(row))
    ids, sent = np.asarray(ids, dtype=np.int64), np.asarray(sent, dtype=np.int64)
    freq = np.asarray([counts[t] for t in vocab], dtype=np.float64)
    ratio = sample * freq.sum() / freq
    keep_prob = np.minimum(1.0, np.sqrt(ratio) + ratio)  # word2vec's subsampling
    noise = freq ** 0.75 / (freq ** 0.75).sum()

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    V = len(vocab)
    inp = (torch.rand(V, dim) - 0.5) / dim  # word2vec's initialisation
    out = torch.zeros(V, dim)
    # negatives: a table of token ids in proportion to count^0.75, indexed at random
    table = torch.from_numpy(np.repeat(np.arange(V), np.maximum(1, np.round(noise * 10_000_000)).astype(np.int64)))
    total_steps = 1  # known once the first epoch has its pairs
    step = 0
    for epoch in range(epochs):
        kept = rng.random(len(ids)) < keep_prob[ids]
        s_ids, s_sent = ids[kept], sent[kept]
        centres, contexts = [], []
        for o in range(1, window + 1):
            same = s_sent[:-o] == s_sent[o:]
            take = same & (rng.random(len(same)) < (window - o + 1) / window)
            a, b = s_ids[:-o][take], s_ids[o:][take]
            centres += [a, b]
            contexts += [b, a]
        centres, contexts = np.concatenate(centres), np.concatenate(contexts)
        order = rng.permutation(len(centres))
        centres, contexts = torch.from_numpy(centres[order]), torch.from_numpy(contexts[order])
        if epoch == 0:
            total_steps = epochs * math.ceil(len(centres) / batch_size)
        total, steps = 0.0, 0
        bar = progress(range(0, len(centres), batch_size), desc=f"{label} epoch {epoch + 1}/{epochs}")
        for lo in bar:
            # plain SGD on the SGNS objective, updates summed over the batch (word2vec's
            # gradients, applied at once), learning rate decayed linearly as in word2vec
            rate = lr * max(1e-4, 1.0 - step / total_steps)
            c, x = centres[lo:lo + batch_size], contexts[lo:lo + batch_size]
            neg = table[torch.randint(len(table), (len(c), negatives))]  # [b, k]
            u, v, n = inp[c], out[x], out[neg]  # [b, d], [b, d], [b, k, d]
            pos = (u * v).sum(-1)  # [b]
            negs = torch.bmm(n, u.unsqueeze(-1)).squeeze(-1)  # [b, k]
            g_pos = torch.sigmoid(pos) - 1.0  # d(-log sigmoid(pos)) / d pos
            g_neg = torch.sigmoid(negs)  # d(-log sigmoid(-negs)) / d negs
            grad_u = g_pos.unsqueeze(-1) * v + torch.bmm(g_neg.unsqueeze(1), n).squeeze(1)
            out.index_add_(0, x, g_pos.unsqueeze(-1) * u, alpha=-rate)
            out.index_add_(0, neg.flatten(), (g_neg.unsqueeze(-1) * u.unsqueeze(1)).flatten(0, 1), alpha=-rate)
            inp.index_add_(0, c, grad_u, alpha=-rate)
            loss = -(nn.functional.logsigmoid(pos) + nn.functional.logsigmoid(-negs).sum(-1)).mean()
            total, steps, step = total + loss.item(), steps + 1, step + 1
        print(f"{label}: epoch {epoch + 1}, {len(centres):,} pairs, mean loss {total / max(steps, 1):.4f}",
              flush=True)
    return vocab, inp


def write_vec(path: Path, tokens: list[str], vectors) -> None:
    tmp = path.with_suffix(".vec.tmp")
    kept = [(t, row) for t, row in zip(tokens, vectors.tolist()) if not any(c.isspace() for c in t)]  # the text
    with open(tmp, "w", encoding="utf-8") as f:  # format cannot hold them; the header counts what is written
        f.write(f"{len(kept)} {vectors.shape[1]}\n")
        for token, row in kept:
            f.write(token + " " + " ".join(f"{v:.5f}" for v in row) + "\n")
    tmp.replace(path)  # nothing half-written under the final name


def nearest(tokens: list[str], vectors, queries: list[str], k: int = 5) -> dict[str, list[str]]:
    import torch

    index = {t: i for i, t in enumerate(tokens)}
    unit = torch.nn.functional.normalize(vectors, dim=1)
    out = {}
    for q in queries:
        if q in index:
            sims = unit @ unit[index[q]]
            out[q] = [tokens[i] for i in sims.topk(k + 1).indices.tolist() if i != index[q]][:k]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/vectors")
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--negatives", type=int, default=5)
    parser.add_argument("--min-count", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-sentences", type=int, default=None, help="per corpus (smoke tests)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--namespaces", nargs="+", choices=NAMESPACES, default=list(NAMESPACES),
                        help="which tables to train (default all three)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    sentences, sizes = read_corpus(args.max_sentences)
    streams = tokenizations(sentences, args.namespaces)
    report = {"corpus_texts": sizes, "characters": sum(len(s) for s in sentences),
              "settings": {k: getattr(args, k)
                           for k in ("dim", "epochs", "window", "negatives", "min_count", "seed", "namespaces")},
              "namespaces": {}}
    print(f"{len(sentences):,} texts, {report['characters']:,} characters ({time.time() - started:.0f} s)", flush=True)
    for namespace, stream in streams.items():
        t0 = time.time()
        tokens, vectors = train_sgns(stream, args.dim, args.window, args.negatives, args.epochs, args.min_count,
                                     args.seed, label=namespace)
        write_vec(out / f"{namespace}.vec", tokens, vectors)
        probe = {"chars": ["京", "男", "硕"], "bigrams": ["北京", "学历", "教授"],
                 "words": ["北京", "董事长", "大学", "经理"]}[namespace]
        report["namespaces"][namespace] = {"tokens": len(tokens), "seconds": round(time.time() - t0, 1),
                                           "nearest": nearest(tokens, vectors, probe)}
        print(namespace, json.dumps(report["namespaces"][namespace], ensure_ascii=False), flush=True)
    report["seconds"] = round(time.time() - started, 1)
    (out / "vectors.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
