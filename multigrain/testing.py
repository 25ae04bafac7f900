"""What the tests of every model share: one tiny-spec builder, small data sets, and
``ModelTestCase``, which trains a model on ~20 examples and checks that

(a) it fits them (the overfit),
(b) the run directory reloaded with ``Run.open(run_dir).load_archive()`` evaluates exactly as the trained model did,
(c) ``predict`` output, scored by hand, equals the metrics of ``evaluate``.

Plugins can test their own models and encoders with it the same way.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

from multigrain.components.metrics.mrc import exact_match, f1_score
from multigrain.components.tag_schemes import extract_spans
from multigrain.platform.archive import Archive
from multigrain.platform.batching import DataLoaderConfig
from multigrain.platform.data_parallel import Replica
from multigrain.platform.experiment import batches_for
from multigrain.platform.runs import Run
from multigrain.platform.evaluation import evaluate

#: the tiny char_transformer backbone of the sentence-model tests
CHAR_TRANSFORMER = {"type": "char_transformer", "hidden_size": 32, "num_layers": 2, "num_heads": 2,
                    "max_length": 64, "dropout": 0.0, "attention_dropout": 0.0}
#: seg_ids rows [voted, jieba, snownlp]: MWA uses all three, HRMF the voted one
SEGMENTATIONS = {"type": "voting", "segmenters": ["jieba", "snownlp"], "keep_all": True}
#: sentence-model layers on the backbone; those other than "backbone" read SEGMENTATIONS
SENTENCE_LAYERS = {
    "backbone": None,
    "mwa": {"type": "mwa", "num_heads": 2, "dropout": 0.0},
    "hrmf": {"type": "hrmf", "num_heads": 2, "word_dim": 16, "dropout": 0.0},
}


# ------------------------------------------------------------------------------------------ specs
def tiny_spec(model: dict, reader: dict, train: str, validation: Optional[str] = None, test: Optional[str] = None,
              *, epochs: int = 1, lr: float = 0.01, batch_size: int = 4, seed: int = 7, task: str = "test",
              dataset: str = "tiny", **trainer) -> dict:
    """A training spec: ``model`` read by ``reader`` from the data files, trained with Adam;
    ``trainer`` adds trainer keys (``grad_clipping``, ``scheduler``, ``validation_metric``, ...)."""
    spec = {"task": task, "dataset": dataset, "dataset_reader": reader, "train_data_path": str(train)}
    if validation is not None:
        spec["validation_data_path"] = str(validation)
    if test is not None:
        spec["test_data_path"] = str(test)
    spec.update({"data_loader": {"batch_size": batch_size}, "model": model,
                 "trainer": {"num_epochs": epochs, "optimizer": {"type": "adam", "lr": lr}, **trainer},
                 "seed": seed})
    return spec


def use_local_backbone(spec, folder) -> bool:
    """Point every packaged backbone (``model_path: 'package:...'``, the m3e specs) at a tiny local BERT
    in ``folder``, so the spec is built and stepped the same with or without the optional extra.
    Returns whether there was one."""
    found = False
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if str(node.get("model_path", "")).startswith("package:"):
                node["model_path"], found = str(folder), True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def reads_msra_run(stem: str) -> bool:
    """Whether the spec of this file stem starts from an MSRA run's backbone (``--ext-var msra_run``):
    ``ner/resume_*_m3e_msra``, ``*_m3e_msra2`` and ``msra_tagger_m3e_again``."""
    return stem.endswith(("_msra", "_msra2", "_again"))


def model_of_spec(spec: dict, max_instances: int):
    """``(experiment, training instances, vocabulary, model)`` of ``spec``, the model built (seed 0) over
    the vocabulary of its first ``max_instances`` training instances."""
    import warnings

    import torch

    from multigrain.platform.config import build
    from multigrain.platform.experiment import Experiment, build_vocabulary

    exp = build(Experiment, spec)
    exp.dataset_reader.max_instances = max_instances
    train = list(exp.dataset_reader.read(exp.train_data_path))
    vocab = build_vocabulary(exp, exp.model_class(), train, [])
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*tokens found")  # tiny vector files' coverage
        model = exp.model.construct(vocab=vocab)
    return exp, train, vocab, model


def char_bigram_embedder(dim: int = 16, dropout: float = 0.0) -> dict:
    return {"type": "char_bigram", "char_dim": dim, "bigram_dim": dim, "dropout": dropout}


def lattice_embedder(dim: int = 32) -> dict:
    return {"type": "lattice", "output_dim": dim, "char_dim": 16, "bigram_dim": 16, "word_dim": 16, "dropout": 0.0}


def char_tagger(encoder: dict, dim: int = 16, head: str = "crf", dropout: float = 0.0) -> dict:
    """A tagger over character + bigram embeddings."""
    return {"type": "tagger", "embedder": char_bigram_embedder(dim, dropout), "encoder": encoder,
            "head": {"type": head}}


def bilstm_tagger(hidden: int = 16, dim: int = 16, head: str = "crf", dropout: float = 0.0) -> dict:
    """A BiLSTM tagger over character + bigram embeddings."""
    return char_tagger({"type": "bilstm", "hidden_size": hidden}, dim, head, dropout)


def sentence_model(model_type: str, layer: str = "backbone", **options) -> dict:
    """A sentence model (classifier, pair_classifier, span_reader) on the tiny backbone, with
    the ``SENTENCE_LAYERS`` layer; ``options`` are further model keys."""
    model = {"type": model_type, "max_length": 40, "embedder": dict(CHAR_TRANSFORMER), **options}
    if SENTENCE_LAYERS[layer] is not None:
        model["encoder"] = dict(SENTENCE_LAYERS[layer])
    return model


def sentence_reader(reader: dict, layer: str, cache_dir: str) -> dict:
    """``reader`` with the segmentations that ``layer`` reads (none for the backbone)."""
    reader = dict(reader, cache_dir=cache_dir)
    if SENTENCE_LAYERS[layer] is not None:
        reader["lattice_builder"] = SEGMENTATIONS
    return reader


# ------------------------------------------------------------------------------------------- data
def read_sentences(bmes: Path) -> list[str]:
    """The blank-line separated sentences of a character-per-line file, each as its lines."""
    return Path(bmes).read_text(encoding="utf-8").strip("\n").split("\n\n")


def copy_sentences(bmes: Path, dst: Path, stop: int, start: int = 0) -> str:
    """Writes sentences ``start:stop`` of ``bmes`` to ``dst``; returns its path."""
    Path(dst).write_text("\n\n".join(read_sentences(bmes)[start:stop]) + "\n\n", encoding="utf-8")
    return str(dst)


def twenty_tagged_sentences(bmes: Path, max_len: int = 40) -> list[list[list[str]]]:
    """The first 20 sentences of ``bmes`` of at most ``max_len`` characters with an entity, each
    as its ``[character, tag]`` rows."""
    out = []
    for block in read_sentences(bmes):
        rows = [line.split(" ") for line in block.split("\n")]
        if len(rows) <= max_len and any(tag != "O" for _, tag in rows):
            out.append(rows)
        if len(out) == 20:
            break
    return out


class TaggerOverfitData:
    """The twenty sentences written to ``directory`` as ``twenty.bmes``, with a lexicon of their
    entity strings plus every character bigram seen twice (so that words overlap, nest and cross
    entity boundaries), and a lattice cache."""

    def __init__(self, bmes: Path, directory: Path):
        directory = Path(directory)
        self.sentences = twenty_tagged_sentences(bmes)
        self.train = directory / "twenty.bmes"
        self.train.write_text("\n\n".join("\n".join(f"{c} {t}" for c, t in s) for s in self.sentences) + "\n\n",
                              encoding="utf-8")
        self.lexicon = directory / "lexicon.txt"
        self.lexicon.write_text("\n".join(sorted(w for w in self._words() if len(w) >= 2)) + "\n", encoding="utf-8")
        self.cache_dir = directory / "cache"

    def _words(self) -> set[str]:
        words, bigrams = set(), Counter()
        for s in self.sentences:
            chars = [c for c, _ in s]
            bigrams.update(a + b for a, b in zip(chars, chars[1:]))
            start = None
            for i, (_, tag) in enumerate(s):
                if tag[0] in "BS":
                    start = i
                if tag[0] in "ES" and start is not None:
                    words.add("".join(chars[start:i + 1]))
                    start = None
        return words | {b for b, c in bigrams.items() if c >= 2}

    def reader(self, lattice: bool) -> dict:
        """The resume_ner reader, with a lexicon lattice builder when ``lattice``."""
        if not lattice:
            return {"type": "resume_ner"}
        return {"type": "resume_ner", "lattice_builder": {"type": "lexicon", "lexicon_path": str(self.lexicon)},
                "cache_dir": str(self.cache_dir)}

    def spec(self, model: dict, lattice: bool, epochs: int, lr: float = 0.01, batch_size: int = 5) -> dict:
        """``model`` trained on the twenty sentences (validation: the same)."""
        return tiny_spec(model, self.reader(lattice), str(self.train), str(self.train), epochs=epochs, lr=lr,
                         batch_size=batch_size, task="ner", dataset="twenty", grad_clipping=5.0)


# ------------------------------------------------------------------------------ the model test case
Scorer = Callable[[object, list[dict], list], dict]


class ModelTestCase:
    """Trains ``spec`` into ``run_dir`` with ``Run.train`` and checks the model.

    ``spec`` should name ~20 examples as both training and validation data; a ``test_data_path``
    (held-out examples) makes check (c) compare numbers other than 1.0. ``scorer(model,
    predictions, instances) -> metrics`` scores ``predict`` output by hand; by default the one
    of the model's ``task`` in ``PREDICTION_SCORERS``.
    """

    def __init__(self, spec: dict, run_dir: Path, scorer: Optional[Scorer] = None):
        self.spec = spec
        self.run_dir = Path(run_dir)
        self.scorer = scorer
        self.result: Optional[dict] = None
        self.archive = None  # the reloaded run, after check()

    def check(self, metric: str, minimum: float = 1.0) -> dict:
        """(a), (b) and (c) of the module docstring; returns the run summary."""
        self.train()
        self.assert_fits(metric, minimum)
        self.archive = self.load()
        for split, evaluated in self.assert_archive_evaluates_as_trained(self.archive).items():
            self.assert_predictions_score_as_evaluated(self.archive, split, evaluated)
        return self.result

    def train(self) -> dict:
        self.result = Run(self.spec, self.run_dir).train()
        return self.result

    def assert_fits(self, metric: str, minimum: float = 1.0) -> None:
        validation = self.result["validation"]
        assert validation[metric] >= minimum, (f"validation {metric} {validation[metric]} < {minimum}",
                                               validation, self.result["history"][-1])

    def load(self) -> Archive:
        return Run.open(self.run_dir).load_archive()

    def splits(self) -> dict[str, str]:
        """Evaluated split -> its data file."""
        keys = {"validation": "validation_data_path", "test": "test_data_path"}
        return {split: self.spec[key] for split, key in keys.items() if split in self.result}

    def evaluate(self, archive: Archive, path: str) -> dict[str, float]:
        """``evaluate`` of the archive's model on ``path``, batched as the training evaluated."""
        loader = DataLoaderConfig(**self.spec.get("data_loader", {}))
        # evaluation batches are never shuffled, so no seed changes them
        batches = batches_for(archive.model, archive.read(path), loader, 0, False)
        return evaluate(archive.model, batches, archive.device)

    def assert_archive_evaluates_as_trained(self, archive: Archive) -> dict[str, dict[str, float]]:
        """(b): every metric, the loss included, equals the trained model's; returns them per split."""
        out = {}
        for split, path in self.splits().items():
            out[split] = self.evaluate(archive, path)
            assert out[split] == self.result[split], (split, out[split], self.result[split])
        return out

    def assert_predictions_score_as_evaluated(self, archive: Archive, split: str, evaluated: dict[str, float]) -> None:
        """(c): ``predict`` output on the split's file, scored by hand, equals ``evaluated``."""
        instances = archive.read(self.splits()[split])
        predictions = list(archive.predict_batches(instances))
        assert len(predictions) == len(instances)
        scorer = self.scorer or PREDICTION_SCORERS[archive.model.task]
        by_hand = scorer(archive.model, predictions, instances)
        for name, value in by_hand.items():
            assert math.isclose(value, evaluated[name], rel_tol=1e-9, abs_tol=1e-12), \
                (split, name, value, evaluated[name])


def _prf(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def score_entities(model, predictions: list[dict], instances: list) -> dict[str, float]:
    """Micro P/R/F1 of the predicted ``entities`` against the spans of the gold tags."""
    correct = predicted = gold = 0
    for prediction, instance in zip(predictions, instances):
        found = {(e["label"], e["start"], e["end"] - 1) for e in prediction["entities"]}  # end exclusive
        true = set(extract_spans(instance["tags"], model.scheme))
        correct, predicted, gold = correct + len(found & true), predicted + len(found), gold + len(true)
    return _prf(correct, predicted, gold)


def score_labels(model, predictions: list[dict], instances: list) -> dict[str, float]:
    """Accuracy and macro F1 (over the labels predicted or gold) of the predicted ``label``s."""
    pairs = [(p["label"], x["label"]) for p, x in zip(predictions, instances)]
    labels = {label for pair in pairs for label in pair}
    f1s = [_prf(sum(p == g == label for p, g in pairs), sum(p == label for p, _ in pairs),
                sum(g == label for _, g in pairs))["f1"] for label in labels]
    return {"accuracy": sum(p == g for p, g in pairs) / len(pairs), "macro_f1": sum(f1s) / len(f1s)}


def score_answers(model, predictions: list[dict], instances: list) -> dict[str, float]:
    """Mean EM and F1 (the CMRC 2018 script's) of the predicted ``answer``s, over the questions
    with references."""
    scored = []
    for prediction, instance in zip(predictions, instances):
        references = instance.get("answer_texts")
        if references is None:
            references = [a["text"] for a in instance.get("answers") or []]
        if references:
            scored.append((prediction["answer"], references))
    return {"em": sum(exact_match(p, refs) for p, refs in scored) / len(scored),
            "f1": sum(f1_score(p, refs) for p, refs in scored) / len(scored)}


def score_translations(model, predictions: list[dict], instances: list) -> dict[str, float]:
    """Corpus BLEU (case-insensitive and cased) and chrF of the predicted ``translation``s against
    every reference, by sacrebleu called directly."""
    import sacrebleu

    hypotheses = [p["translation"] for p in predictions]
    width = max(len(x["references"]) for x in instances)
    streams = [[x["references"][j] if j < len(x["references"]) else None for x in instances] for j in range(width)]
    tokenize = model.metric.tokenize
    return {"bleu": sacrebleu.corpus_bleu(hypotheses, streams, lowercase=True, tokenize=tokenize).score,
            "bleu_cased": sacrebleu.corpus_bleu(hypotheses, streams, tokenize=tokenize).score,
            "chrf": sacrebleu.corpus_chrf(hypotheses, streams).score}


#: model task -> how its ``predict`` output is scored by hand
PREDICTION_SCORERS: dict[str, Scorer] = {"ner": score_entities, "cls": score_labels, "pair": score_labels,
                                         "mrc": score_answers, "mt": score_translations}


class SimulatedReplica(Replica):
    """Replica ``rank`` of ``len(every)`` on the CPU, without ``torch.distributed``: its all-reduce
    sums, element-wise, what every replica holds (``every[r]``: replica r's values), for tests of
    data-parallel loss weighting."""

    def __init__(self, rank: int, every: list[list[float]]):
        import torch

        super().__init__(rank, len(every), torch.device("cpu"), wrap=None)
        self.every = every

    def sum(self, values: list[float]) -> list[float]:
        return [float(sum(v[i] for v in self.every)) for i in range(len(values))]
