"""Training throughput: tokens per second of our ``Trainer`` against (a) a bare PyTorch loop and
(b) a ``transformers`` Marian model of the same size (issue 40's must-show).

Models, each built from its shipped spec (``MODELS``): the translator at sizes ``small`` and
``base`` (char ``transformer`` encoder + ``nmt_decoder``), PLTE on Resume NER, and Lattice-BERT
tiny (MSP + SOP pre-training). Data: the first ``--instances`` examples of the spec's training
file; the vocabulary, subword model and lattices are built from them as a run builds them.

The three systems train on the same batches (the spec's length buckets of ``--batch-size``
examples, or its own batch size; the same index lists for everyone), from the same initial
weights, for ``--warmup`` unmeasured steps and then ``--steps`` measured ones:

- ours: ``Trainer._train_epoch`` as ``multigrain train`` runs it (batches tensorized on the
  prefetching thread, copied to the device, the spec's optimizer, scheduler, clipping, moving
  average and mixed precision, the loss summed on the device and read once at the end);
- (a) bare: the same model, optimizer, scheduler and clipping, the batches tensorized and on the
  device before the clock starts, ``forward; zero_grad; backward; clip; step; scheduler.step``
  and nothing else (no logging, no checks);
- (b) Marian (translator only): ``MarianMTModel`` of the translator's size (d_model, encoder and
  decoder layers, heads, FFN, dropout (on the residuals, the attention weights and the FFN's
  hidden layer, as ours), source vocabulary = our character table, decoder vocabulary
  = our subword table, unshared embeddings), forward with ``labels`` (its cross-entropy),
  backward, clipping at the spec's value, and fused ``torch.optim.AdamW`` (as the spec's Adam is
  fused) at the spec's rate, on the same pairs: source ids, attention mask, ``decoder_input_ids``
  = our BOS + pieces, ``labels`` = our pieces + EOS (padding -100).

Tokens: real (unpadded) tokens of the measured batches: source + target for the translator
(characters + subword pieces), the examples' ``instance_length`` otherwise. Each system runs
``--rounds`` times in turn (ours, bare, Marian, ours, ...), its steps timed together (with a
device synchronisation before reading the clock on CUDA). The JSON
records the device, torch version, threads and the load average before and after.

Two measures, both per system over its ``--rounds``: tokens per wall-clock second of its fastest
round (the round least disturbed by other processes), and tokens per CPU second of the process
(median round; every thread counted, the trainer's prefetching thread included). On a shared,
loaded machine wall-clock rounds of the same system vary by 2x; CPU seconds measure the work
done and barely move, but give no credit for overlap (the prefetching thread's work is counted
even where it ran on an idle core). The ratios are given for both.

    python benchmarks/train_throughput.py [--device cpu|cuda] [--steps 10] [--models small,base,plte,lbert]
        [--batch-size 16] [--compile] [--diagnose] [--profile] [--pack-targets] [--out FILE.json]

``--pack-targets`` gives the translators' decoder ``pack_targets: true`` (its layers compute the
non-padding target positions alone and its tied table's gradient is made once; ours and bare alike,
Marian as it is).

``--diagnose`` adds two more: ``ours_prebuilt``, our trainer fed batches whose tensors were built
before the clock started (what the trainer costs beside building them: the copy to the device, the
loss sum, the loop), and ``ours_inline``, the batches built on the training thread (``prefetch`` 0:
what the prefetching thread hides). ``-o KEY=VALUE`` changes every model's spec as ``multigrain train
-o`` does: a much smaller model on the CPU (``-o model.encoder.hidden_size=32 ...``) is bound by
the host's per-operation cost, as the translators' steps on a GPU are. ``--profile``: what the
training thread does per step in ours and bare (``throughput_profile``).

``--compile`` adds ``ours_compiled``: our ``Trainer`` with ``trainer.compile: true``
(the training forward through ``torch.compile``, dynamic shapes), timed after the same warm-up
batches, which pay for the compilation; where ``torch.compile`` cannot run (``compiling.refusal``:
no Triton for the GPU, no C++ compiler) it is skipped, its reason in the JSON's ``compile_refused``.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

os.environ.setdefault("MULTIGRAIN_QUIET", "1")  # progress lines (every 30 s) rather than bars in the log
import torch  # noqa: E402

import throughput_profile  # noqa: E402
from multigrain.platform import run_marker  # noqa: E402
from multigrain.platform.batching import BatchIterator  # noqa: E402
from multigrain.platform.compiling import refusal  # noqa: E402
from multigrain.platform.devices import move_to  # noqa: E402
from multigrain.platform.experiment import build_vocabulary, read_all  # noqa: E402
from multigrain.platform.precision import Precision  # noqa: E402
from multigrain.platform.runs import Run  # noqa: E402
from multigrain.platform.specs import load_spec  # noqa: E402
from multigrain.platform.training import Trainer, seed_everything  # noqa: E402
from multigrain.platform.weights import write_atomically  # noqa: E402

MODELS = {
    "small": "jsonnet_configs/mt/tvsub_transformer_small.jsonnet",
    "base": "jsonnet_configs/mt/tvsub_transformer.jsonnet",
    "plte": "jsonnet_configs/ner/resume_plte.jsonnet",
    "lbert": "jsonnet_configs/pretrain/lattice_bert_tiny.jsonnet",
}


class FixedBatches(BatchIterator):
    """A ``BatchIterator`` whose every epoch is the index lists ``plan`` (the systems' shared batches)."""

    plan: list[list[int]] = []

    def batches(self, epoch: int) -> list[list[int]]:
        return self.plan


class Clock:
    """Wall-clock and process CPU seconds (every thread's, the prefetching one's too) since it was made."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def batch_tokens(model, instances: list, batch: dict) -> int:
    if "target_output" in batch:  # a translator: source characters + target pieces (EOS included)
        return int(batch["mask"].sum()) + int((batch["target_output"] != model.subwords.pad).sum())
    return sum(sum(n) if isinstance(n, tuple) else n for n in map(model.instance_length, instances))


class Setup:
    """One model of a spec, its data, the shared batches and the initial weights."""

    def __init__(self, name: str, args, work: Path):
        self.name = name
        spec = load_spec(ROOT / MODELS[name], args.override)
        spec["dataset_reader"] = {**spec["dataset_reader"], "max_instances": args.instances}
        for key in ("validation_data_path", "test_data_path", "test_sets"):
            spec.pop(key, None)
        spec["evaluate_on_test"] = False
        if args.batch_size:
            spec["data_loader"] = {k: v for k, v in spec["data_loader"].items() if k != "max_tokens"}
            spec["data_loader"]["batch_size"] = args.batch_size
        if args.pack_targets and "decoder" in spec["model"]:
            spec["model"]["decoder"] = {**spec["model"]["decoder"], "pack_targets": True}
        trainer = spec["trainer"]
        trainer.pop("cuda_device", None)
        if args.device == "cpu":
            trainer.pop("mixed_precision", None)
        self.spec = spec
        exp = Run(spec, work / name, check_data_paths=True).experiment
        self.exp = exp
        seed_everything(exp.seed)
        self.instances = read_all(exp.dataset_reader, exp.train_data_path)
        vocab = build_vocabulary(exp, exp.model_class(), self.instances, [])
        run_dir = work / name
        self.model = exp.model.construct(vocab=vocab, offered={"resources": run_marker.fresh_resources(run_dir,
                                                                                                       self.instances)})
        self.initial = copy.deepcopy(self.model.state_dict())
        self.run_dir = run_dir
        cfg = exp.data_loader
        order = BatchIterator(self.instances, self.model.tensorize, self.model.instance_length, cfg.batch_size,
                              True, exp.seed, cfg.bucket_noise, cfg.max_tokens).batches(0)
        need = args.warmup + args.steps
        if len(order) < need:
            raise SystemExit(f"{name}: {len(order)} batches from {len(self.instances)} examples, {need} needed; "
                             f"raise --instances")
        self.warmup, self.measured = order[:args.warmup], order[args.warmup:need]
        self.tokens = 0
        for idx in self.measured:  # the first batches of an example also derive what it keeps (Instance.memo)
            chunk = [self.instances[i] for i in idx]
            self.tokens += batch_tokens(self.model, chunk, self.model.tensorize(chunk))
        clock = Clock()
        for idx in self.measured:
            self.model.tensorize([self.instances[i] for i in idx])
        self.tensorize_cpu = clock.read()[1]  # what ours does more than bare at every later epoch
        self.device = torch.device(args.device)

    def fresh(self):
        """The model at its initial weights, on the device (ours and bare train it in turn: after
        either, ``model`` holds the weights it reached)."""
        self.model.load_state_dict(self.initial)
        return self.model.to(self.device)

    # the three systems: each returns the seconds of the measured steps ------------------------
    def ours(self, compile: bool = False, prefetch: int = 2, prebuilt: bool = False,
             around=contextlib.nullcontext) -> tuple[float, float]:
        """Our trainer; ``prefetch`` 0: the batches built on the training thread; ``prebuilt``: each
        batch's tensors built before the clock starts (on the host), so that the step does
        everything but building them (the trainer's diagnosis, ``--diagnose``); ``around``: a
        context around the measured steps (``--profile``'s recorder)."""
        self.fresh()
        self.exp.trainer.compile = compile
        tensorize = self.model.tensorize
        if prebuilt:
            built = {tuple(map(id, chunk)): tensorize(chunk) for chunk in
                     ([self.instances[i] for i in idx] for idx in self.warmup + self.measured)}
            tensorize = lambda chunk: built[tuple(map(id, chunk))]  # noqa: E731
        data = FixedBatches(self.instances, tensorize, self.model.instance_length, 1, False)
        data.plan = self.warmup  # the schedule's steps per epoch, as bare's
        trainer = Trainer(self.exp.trainer, self.model, data, None, self.run_dir, prefetch=prefetch)
        seed_everything(self.exp.seed)  # the same dropout masks as bare's
        trainer._train_epoch(0)
        data.plan = self.measured
        sync(self.device)
        with around():
            clock = Clock()
            trainer._train_epoch(1)  # reads the loss sum at its end: the device has finished
            return clock.read()

    def bare(self, around=contextlib.nullcontext) -> tuple[float, float]:
        model = self.fresh()
        cfg = self.exp.trainer
        params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        optimizer = cfg.optimizer.construct(model_parameters=params)
        per_epoch = len(self.warmup)  # as the Trainer sees it
        scheduler = (cfg.scheduler.construct(optimizer=optimizer, num_training_steps=per_epoch * cfg.num_epochs,
                                             offered={"steps_per_epoch": per_epoch}) if cfg.scheduler else None)
        precision = Precision(cfg.mixed_precision, self.device)
        model.train()
        seed_everything(self.exp.seed)

        def run(plan, around=contextlib.nullcontext):
            batches = [move_to(self.model.tensorize([self.instances[i] for i in idx]), self.device) for idx in plan]
            sync(self.device)
            with around():
                clock = Clock()
                for batch in batches:
                    with precision.autocast():
                        loss = model(**batch)["loss"]
                    optimizer.zero_grad(set_to_none=True)
                    precision.backward(loss)
                    if cfg.grad_clipping:
                        precision.unscale(optimizer)
                        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clipping)
                    precision.step(optimizer)
                    if scheduler:
                        scheduler.step()
                sync(self.device)
                return clock.read()

        run(self.warmup)
        return run(self.measured, around)

    def marian(self) -> tuple[float, float]:
        from transformers import MarianConfig, MarianMTModel

        spec_model = self.spec["model"]
        enc, dec = spec_model["encoder"], spec_model["decoder"]
        s = self.model.subwords
        config = MarianConfig(vocab_size=self.model.vocab.size("chars"), decoder_vocab_size=s.vocab_size,
                              share_encoder_decoder_embeddings=False, d_model=enc["hidden_size"],
                              encoder_layers=enc["num_layers"], decoder_layers=dec["num_layers"],
                              encoder_attention_heads=enc["num_heads"], decoder_attention_heads=dec["num_heads"],
                              encoder_ffn_dim=enc["ffn_dim"], decoder_ffn_dim=dec["feedforward_dim"],
                              activation_function="relu", dropout=dec["dropout"],
                              attention_dropout=enc["attention_dropout"], activation_dropout=dec["dropout"],
                              max_position_embeddings=1024, pad_token_id=s.pad, eos_token_id=s.eos,
                              decoder_start_token_id=s.bos, bos_token_id=s.bos, forced_eos_token_id=None,
                              scale_embedding=True)
        seed_everything(self.exp.seed)
        model = MarianMTModel(config).to(self.device).train()
        cfg = self.exp.trainer
        opt = self.spec["trainer"]["optimizer"]
        optimizer = torch.optim.AdamW(model.parameters(), lr=opt.get("lr", 1e-3), betas=tuple(opt.get("betas", (0.9, 0.999))),
                                      fused=True)

        def inputs(idx):
            batch = self.model.tensorize([self.instances[i] for i in idx])
            labels = batch["target_output"].masked_fill(batch["target_output"] == s.pad, -100)
            return move_to({"input_ids": batch["chars"], "attention_mask": batch["mask"].long(),
                            "decoder_input_ids": batch["target_input"], "labels": labels}, self.device)

        def run(plan):
            batches = [inputs(idx) for idx in plan]
            sync(self.device)
            clock = Clock()
            for batch in batches:
                loss = model(**batch).loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clipping:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clipping)
                optimizer.step()
            sync(self.device)
            return clock.read()

        run(self.warmup)
        return run(self.measured)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU {line.split(':', 1)[1].strip()}"
    except OSError:
        pass
    return f"CPU {platform.processor() or platform.machine()}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10, help="measured steps per system and round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default="small,base,plte,lbert")
    p.add_argument("--instances", type=int, default=1500, help="training examples read from each spec's data")
    p.add_argument("--batch-size", type=int, default=None, help="examples per batch (default: the spec's)")
    p.add_argument("--compile", action="store_true", help="also time our Trainer with trainer.compile: true")
    p.add_argument("--pack-targets", action="store_true",
                   help="the translators' decoder with pack_targets: true (ours and bare; Marian as it is)")
    p.add_argument("--diagnose", action="store_true",
                   help="also time ours with each batch built beforehand (ours_prebuilt) and on the training thread "
                        "(ours_inline)")
    p.add_argument("--profile", action="store_true",
                   help="also profile one more run of ours and of bare (throughput_profile.py): the row's 'profile'")
    p.add_argument("-o", "--override", action="append", default=[],
                   help="KEY=VALUE applied to every model's spec, as multigrain train -o (e.g. a smaller size)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "train_throughput.json"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    compile_refused = refusal(torch.device(args.device)) if args.compile else None
    if compile_refused:  # the other systems are still measured
        print(f"--compile skipped: {compile_refused}", flush=True)
    load_before = os.getloadavg()
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="train-throughput-") as work:
        for name in args.models.split(","):
            setup = Setup(name, args, Path(work))
            systems = {"ours": setup.ours, "bare": setup.bare}
            if args.compile and not compile_refused:
                systems["ours_compiled"] = lambda: setup.ours(compile=True)
            if args.diagnose:
                systems["ours_prebuilt"] = lambda: setup.ours(prebuilt=True)
                systems["ours_inline"] = lambda: setup.ours(prefetch=0)
            if "target_output" in setup.model.tensorize([setup.instances[0]]):
                systems["marian"] = setup.marian
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in systems}
            for _ in range(args.rounds):
                for key, fn in systems.items():
                    times[key].append(fn())
            wall = {k: setup.tokens / min(w for w, _ in v) for k, v in times.items()}
            cpu = {k: setup.tokens / statistics.median(c for _, c in v) for k, v in times.items()}
            row = {"model": name, "spec": MODELS[name], "examples": len(setup.instances),
                   "batch_size": setup.exp.data_loader.batch_size, "steps": args.steps, "tokens": setup.tokens,
                   "wall_seconds": {k: [round(w, 3) for w, _ in v] for k, v in times.items()},
                   "cpu_seconds": {k: [round(c, 3) for _, c in v] for k, v in times.items()},
                   "tokens_per_second_wall": {k: round(v, 1) for k, v in wall.items()},
                   "tokens_per_cpu_second": {k: round(v, 1) for k, v in cpu.items()},
                   "ours_over_bare_wall": round(wall["ours"] / wall["bare"], 3),
                   "ours_over_bare_cpu": round(cpu["ours"] / cpu["bare"], 3),
                   "tensorize_cpu_seconds": round(setup.tensorize_cpu, 3),
                   # the CPU-time ratio if ours did exactly bare's work plus building the batches
                   "bare_plus_tensorize_cpu_ratio": round(statistics.median(c for _, c in times["bare"]) / (
                       statistics.median(c for _, c in times["bare"]) + setup.tensorize_cpu), 3)}
            if "ours_compiled" in wall:
                row["compiled_over_ours_wall"] = round(wall["ours_compiled"] / wall["ours"], 3)
                row["compiled_over_bare_wall"] = round(wall["ours_compiled"] / wall["bare"], 3)
                if "marian" in wall:
                    row["compiled_over_marian_wall"] = round(wall["ours_compiled"] / wall["marian"], 3)
                row["compiled_over_ours_cpu"] = round(cpu["ours_compiled"] / cpu["ours"], 3)
            for key in ("ours_prebuilt", "ours_inline"):
                if key in wall:
                    row[f"{key}_over_bare_wall"] = round(wall[key] / wall["bare"], 3)
                    row[f"{key}_over_bare_cpu"] = round(cpu[key] / cpu["bare"], 3)
            if args.profile:
                row["profile"] = throughput_profile.profile(setup, args.steps)
            if "marian" in wall:
                row["ours_over_marian_wall"] = round(wall["ours"] / wall["marian"], 3)
                row["ours_over_marian_cpu"] = round(cpu["ours"] / cpu["marian"], 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_result(args, rows, load_before, started, compile_refused)  # each model's row kept as it lands


def write_result(args, rows: list[dict], load_before, started: float, compile_refused) -> None:
    """The results JSON with the models measured so far, written whole (a temporary file renamed)."""
    device = torch.device(args.device)
    result = {"device": describe(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
              "cpu_count": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()],
              "seconds": round(time.time() - started, 1), "rounds": args.rounds, "warmup": args.warmup,
              "pack_targets": args.pack_targets, "overrides": args.override, "compile_refused": compile_refused,
              "targets": {"ours_over_bare": 0.95 if device.type == "cpu" else 0.90, "ours_over_marian": 1.2},
              "models": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = (json.dumps(result, indent=2) + "\n").encode("utf-8")
    write_atomically(out, lambda f: f.write(text))
    print(f"wrote {out} ({len(rows)} of {len(args.models.split(','))} models)", flush=True)


if __name__ == "__main__":
    main()
