"""``multigrain train SPEC --dry-run`` (AllenNLP's ``train --dry-run``): everything a training does
before its run directory's first file (``run_training.prepare``: the data read, the vocabulary and
the model built, every check passed), then a report of what the training would be, and nothing
written: no run directory, no MLflow run. A ``-s`` directory the training would refuse (not empty:
another's files, or a run that only ``--resume`` may continue) is refused the same way, before any
data is read. A model resource fitted to the training data (the translator's subwords) is fitted
into a temporary directory that is removed afterwards."""
from __future__ import annotations

import tempfile
from pathlib import Path

from multigrain.platform import run_marker
from multigrain.platform.devices import describe_device, pick_device
from multigrain.platform.run_training import check_data_parallel, prepare


def dry_run(run) -> dict:
    """What training ``run`` (a ``runs.Run``) would be: examples per split, vocabulary sizes,
    parameters (trainable, and per optimizer group with its learning rate), batches and optimizer
    steps, and the device. Raises the error the training would raise before writing anything."""
    exp = run.experiment
    # the run directory a training would refuse (a folder of other files, a run that needs --resume), before any data
    run_marker.refuse_foreign(run.run_dir)
    run.plan.decide(resume=False)  # without --resume it only checks; it removes nothing
    check_data_parallel(exp.trainer, None, executor=False)  # no replicas are started
    with tempfile.TemporaryDirectory(prefix="multigrain-dry-run-") as scratch:
        ready = prepare(run, resume=False, resource_dir=Path(scratch))
    optimizer = ready.optimizer
    device = pick_device(exp.trainer.cuda_device)
    names = {id(p): name for name, p in ready.model.named_parameters()}
    groups = [{"parameters": sum(p.numel() for p in group["params"]), "tensors": len(group["params"]),
               "lr": group.get("initial_lr", group["lr"]),  # the spec's rate: a schedule scales "lr"
               "first": names.get(id(group["params"][0]), "") if group["params"] else ""}
              for group in optimizer.param_groups]
    per_epoch = ready.train_batches.num_batches(0)
    return {
        "spec_hash": run.spec_hash,
        "run_dir": str(run.run_dir),
        "examples": {"train": len(ready.train), "validation": len(ready.dev), "test": len(ready.test),
                     **{f"test_sets.{name}": len(s) for name, s in ready.test_sets.items()}},
        "vocabulary": {ns: ready.vocab.size(ns) for ns in ready.vocab.namespaces()},
        "model": type(ready.model).__name__,
        "parameters": sum(p.numel() for p in ready.model.parameters()),
        "trainable": sum(p.numel() for p in ready.model.parameters() if p.requires_grad),
        "optimizer": type(optimizer).__name__,
        "parameter_groups": groups,
        "batches_per_epoch": per_epoch,
        "epochs": exp.trainer.num_epochs,
        "optimizer_steps": per_epoch * exp.trainer.num_epochs,
        "workers": exp.trainer.workers,
        "device": describe_device(device),
    }


def report_lines(source: str, report: dict) -> list[str]:
    """The dry run's report as lines for a person."""
    counts = ", ".join(f"{split} {n:,}" for split, n in report["examples"].items())
    vocab = ", ".join(f"{ns} {n:,}" for ns, n in report["vocabulary"].items()) or "none"
    lines = [f"{source}: dry run, spec hash {report['spec_hash']}; nothing was written "
             f"(the training would write {report['run_dir']})",
             f"  examples: {counts}",
             f"  vocabulary: {vocab}",
             f"  model: {report['model']}, {report['parameters']:,} parameters ({report['trainable']:,} trainable)",
             f"  optimizer: {report['optimizer']}, {len(report['parameter_groups'])} parameter group(s)"]
    for i, group in enumerate(report["parameter_groups"]):
        first = f", first {group['first']}" if group["first"] else ""
        lines.append(f"    group {i}: {group['parameters']:,} parameters in {group['tensors']} tensors, "
                     f"lr {group['lr']:g}{first}")
    workers = (f" on {report['workers']} workers (not started: their device is not checked)"
               if report["workers"] > 1 else f", on {report['device']}")
    lines.append(f"  training: {report['batches_per_epoch']:,} batches an epoch x {report['epochs']} epochs = "
                 f"{report['optimizer_steps']:,} optimizer steps{workers}")
    return lines
