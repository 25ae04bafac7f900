"""The pretrained backbone of a fine-tuned run, saved as a model directory that a spec reads again:
intermediate-task training (Phang et al. 2018, "Sentence Encoders on STILTs"; Pruksachatkun et al. 2020)
fine-tunes the backbone on a larger labelled task first and then on the target task. A probe toward
issue 41's Resume PLTE[m3e] >= 95.4: m3e-small fine-tuned on MSRA NER (the ``msra_*_m3e`` runs) has
learnt entity boundaries on 46,000 news sentences before it meets Resume's 3,821.

RUN_DIR is a finished or stopped run of an ``hf_transformer`` spec (the embedder itself, or the
``backbone`` of ``backbone_lattice``): its ``config.json`` names the source model (``model_path``),
its ``best.pt`` (or ``--weights last.pt``) holds the fine-tuned weights. The backbone's weights
(``embedder.model.*`` or ``embedder.backbone.model.*``) are loaded into the source model, every one
of them and nothing else, and saved with the source's tokenizer files to ``--out``, which a spec
then reads with ``-o model.embedder.backbone.model_path=OUT`` (PLTE[m3e], Lattice LSTM[m3e]) or
``-o model.embedder.model_path=OUT`` (the m3e-Tagger, BiG[m3e]); a spec can also read the run itself
(``hf_transformer``'s ``archive_path``). The task's own layers (head, lattice encoder) are not kept.
A run directory that is not one (no ``config.json``, no weights, no ``hf_transformer``
embedder, weights of another shape) is one error naming the file, exit code 2, and nothing is written
(the model is written to ``OUT.tmp`` and renamed). ``--out`` replaces only an earlier export (a folder
with its ``export.json``): a folder of other files, the run itself, a folder holding it or the working
directory is refused before anything is read::

    python benchmarks/export_backbone.py runs/msra_tagger_m3e-cpu-e1-7b20d959 --out runs/m3e_msra_tagger
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from multigrain.platform.errors import ConfigurationError, MultigrainError  # noqa: E402
from multigrain.platform.jsonio import read_object  # noqa: E402
from multigrain.platform.paths import output_folder_problem  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def source_model_path(config: dict, path: Path) -> str:
    """The ``model_path`` of the run's ``hf_transformer`` embedder (itself or its ``backbone``)."""
    embedder = (config.get("model") or {}).get("embedder") or {}
    for candidate, where in ((embedder, "model.embedder"), (embedder.get("backbone") or {}, "model.embedder.backbone")):
        if isinstance(candidate, dict) and candidate.get("type") == "hf_transformer":
            model_path = candidate.get("model_path")
            if not isinstance(model_path, str):
                raise ConfigurationError(f"{path}: {where}.model_path is not a string")
            return model_path
    raise ConfigurationError(f"{path}: the run has no hf_transformer embedder (model.embedder or "
                             "model.embedder.backbone)")


def export(run_dir: Path, out: Path, weights_name: str) -> dict:
    from multigrain.components.embedders.hf_transformer import load_pretrained, resolve_model_path
    from multigrain.components.embedders.run_backbone import load_backbone

    if problem := output_folder_problem(out, ("export.json",), reads=(run_dir,)):  # before anything is read
        raise ConfigurationError(f"--out {problem}")
    work = out.resolve().with_name(out.resolve().name + ".tmp")  # OUT.tmp: replaced only if an export left it
    if problem := output_folder_problem(work, ("config.json", "export.json"), reads=(run_dir,)):
        raise ConfigurationError(f"--out {problem}")
    config_file = run_dir / "config.json"
    if not config_file.is_file():
        raise ConfigurationError(f"{config_file}: no such file (not a run directory)")
    config = read_object(config_file, "not a run's config")
    model_path = source_model_path(config, config_file)
    source = resolve_model_path(model_path)
    model = load_pretrained(source)
    tensors = load_backbone(model, str(run_dir / weights_name), where="")
    shutil.rmtree(work, ignore_errors=True)
    model.save_pretrained(work)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, work / name)
    spec_hash = (run_dir / "spec_hash").read_text(encoding="utf-8").strip() if (run_dir / "spec_hash").is_file() else None
    record = {"source": model_path, "run": str(run_dir), "spec_hash": spec_hash, "weights": weights_name,
              "tensors": tensors}
    (work / "export.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--weights", default="best.pt", choices=("best.pt", "last.pt"))
    args = p.parse_args(argv)
    try:
        record = export(args.run_dir, args.out, args.weights)
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {record['tensors']} tensors of {record['run']} ({record['weights']}) over {record['source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
