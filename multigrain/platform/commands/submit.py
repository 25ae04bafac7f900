"""``multigrain submit``: train a spec as a Ray job on a cluster, once per spec hash."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    from multigrain.platform.commands.common import add_spec_args, non_negative_float, positive_float

    p: argparse.ArgumentParser = subparsers.add_parser(
        "submit", help="train a spec as a Ray job on a cluster (idempotent per spec hash)")
    add_spec_args(p)
    p.add_argument("--address", required=True, help="the head's Jobs API, e.g. http://HEAD:8265")
    p.add_argument("-s", "--serialization-dir", help="run directory on the cluster (default runs/jobs/<spec>-<hash8>)")
    p.add_argument("--tracking-uri", help="MLflow URI the job logs to (a shared server on a real cluster)")
    p.add_argument("--runtime-env", metavar="YAML", help="runtime env file, e.g. ray_cluster/runtime_env.yaml")
    p.add_argument("--working-dir", help="local directory uploaded as the job's working directory")
    p.add_argument("--cwd", help="directory on the cluster the job runs in, e.g. ~/multigrain (the checkout the "
                                 "cluster YAMLs sync, where the specs' relative data paths hold)")
    p.add_argument("--num-cpus", type=positive_float, default=1.0, help="CPUs reserved for the job")
    p.add_argument("--num-gpus", type=non_negative_float,
                   help="GPUs reserved for the job (default 1 if trainer.cuda_device >= 0, else 0)")
    p.add_argument("--retry-failed", action="store_true", help="resubmit when the earlier job FAILED or was STOPPED")
    p.add_argument("--wait", action="store_true", help="wait for the job, print its logs, exit 0 iff it succeeded")
    p.set_defaults(func=cmd_submit)


def cmd_submit(args) -> int:
    import sys
    from pathlib import Path

    from multigrain.platform.commands.common import load_spec_args, spec_stem
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.ray.cluster import load_runtime_env
    from multigrain.platform.ray.jobs import job_details, submit_job, wait_for_job
    from multigrain.platform.specs import spec_hash

    spec = load_spec_args(args)
    validate_spec(spec, args.spec, check_data_paths=False)  # data paths are checked where the job runs
    for key in ("train_data_path", "validation_data_path", "test_data_path"):
        if isinstance(spec.get(key), str) and not Path(spec[key]).exists():
            print(f"note: {key} {spec[key]} is not here; it must exist where the job runs", file=sys.stderr)
    runtime_env = load_runtime_env(args.runtime_env, args.working_dir)
    num_gpus = args.num_gpus
    if num_gpus is None:
        from multigrain.platform.training import trainer_settings

        device = trainer_settings(spec).cuda_device
        num_gpus = 1 if device is not None and device >= 0 else 0
    sid, created, status = submit_job(args.address, spec, spec_stem(args.spec), runtime_env=runtime_env,
                                      run_dir=args.serialization_dir, tracking_uri=args.tracking_uri,
                                      num_cpus=args.num_cpus, num_gpus=num_gpus, retry_failed=args.retry_failed,
                                      cwd=args.cwd, include_packages=tuple(args.include_package))
    digest = spec_hash(spec)
    if created:
        print(f"submitted {sid} (spec hash {digest[:12]})", flush=True)
    else:
        print(f"{sid} was already submitted (spec hash {digest[:12]}), status {status}; not started again",
              flush=True)
    print(f"follow it: multigrain jobs {sid} --logs --address {args.address}", flush=True)
    if args.wait:
        status = wait_for_job(args.address, sid)
        print(job_details(args.address, sid, logs=True)["logs"])
        print(f"{sid}: {status}")
        return 0 if status == "SUCCEEDED" else 1
    return 0
