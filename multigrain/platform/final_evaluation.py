"""The final evaluation of a finished training (``run_training``): the best weights (``best.pt``)
loaded into the model and scored on the dev set, the test set and the spec's extra test sets.

``evaluate_best`` owns the result entries that evaluation adds to ``metrics.json``: ``validation``
and ``test`` (the metrics), ``leaderboard_metric`` (the ranking metric the test references call
for, e.g. cased BLEU), the model's ``test_report`` and ``test_confusion`` where it has them,
``test_sets`` with their ``test_<name>_<metric>`` scores, the ``tracking_tags`` of each evaluation
(a translator's signature names its references), and ``test_samples`` (a sample of test
predictions shown in the MLflow UI).
"""
from __future__ import annotations

from multigrain.platform import archive as files
from multigrain.platform.artifacts import sample_predictions
from multigrain.platform.evaluation import evaluate
from multigrain.platform.experiment import eval_batches
from multigrain.platform.test_sets import evaluate_test_sets, ranking_metric, run_tags, tracking_tags


def evaluate_best(run, model, vocab, device, validation, test: list, test_sets: dict[str, list]) -> dict:
    """The entries the evaluation of ``run``'s (a ``runs.Run``) ``best.pt`` adds to its result:
    ``model`` on ``device`` with the best weights, on the dev batches ``validation`` (None without
    a dev set), the ``test`` instances and the extra ``test_sets`` (name -> instances)."""
    exp, run_dir = run.experiment, run.run_dir
    model.to(device)
    files.load_weights(model, run_dir / "best.pt", device)
    result: dict = {}
    scoped = {}  # the model's tags after each evaluation (a translator's signature names its references)
    if validation is not None:
        result["validation"] = evaluate(model, validation, device, "dev (best)")
        scoped["validation"] = tracking_tags(model)
    if test:
        result["test"] = evaluate(model, eval_batches(model, test, exp.data_loader), device, "test (best)")
        scoped["test"] = tracking_tags(model)
        result["leaderboard_metric"] = ranking_metric(model)  # e.g. cased BLEU for cased references
    report = getattr(model, "report", None)
    if callable(report) and test:
        result["test_report"] = report()
    confusion = getattr(model, "confusion", None)  # gold x predicted counts (classifiers)
    if callable(confusion) and test:
        result["test_confusion"] = confusion()
    result.update(evaluate_test_sets(exp, model, device, test_sets,
                                     lambda data: eval_batches(model, data, exp.data_loader)))
    tags = run_tags(scoped, result.get("test_sets"), run.identity.get("dataset"))
    if tags:
        result["tracking_tags"] = tags
    if test:  # a sample of test predictions, shown in the MLflow UI
        result["test_samples"] = sample_predictions(files.Archive(
            run_dir, run.spec, model, vocab, exp.test_dataset_reader, device, exp.data_loader), test)
    return result
