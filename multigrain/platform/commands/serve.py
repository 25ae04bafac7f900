"""``multigrain serve``: archives over HTTP with Ray Serve, ``POST /predict/<name>``."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    from multigrain.platform.commands.interrupt import with_sigterm

    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="serve archives over HTTP with Ray Serve: POST /predict/<name>")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--replicas", type=int, default=1, help="replicas per model (default 1)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per replica")
    p.add_argument("--num-gpus", type=float, help="GPUs per replica (default 1 when the cluster has GPUs)")
    p.add_argument("--address", help="Ray cluster address (default: Ray in this process)")
    p.set_defaults(func=with_sigterm(cmd_serve))


def cmd_serve(args) -> int:
    import signal
    import sys
    import time

    import ray
    from ray import serve

    from multigrain.platform.commands.interrupt import interrupt
    from multigrain.platform.ray.archives import check_archives
    from multigrain.platform.ray.cluster import connect
    from multigrain.platform.ray.serve import check_port_free, start_service

    named = check_archives(args.run_dirs)
    check_port_free(args.host, args.port)
    started = connect(args.address)
    try:
        urls = start_service(named, host=args.host, port=args.port, replicas=args.replicas,
                             num_cpus=args.num_cpus, num_gpus=args.num_gpus)
        for name, url in urls.items():
            print(f"{name}: POST {url}", flush=True)
        example = next(iter(urls.values()))
        print(f"e.g. curl -s -X POST {example} -H 'Content-Type: application/json' "
              f"-d '{{\"instances\": [{{\"text\": \"张三是北京大学的教授\"}}]}}'", flush=True)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"warning: listening on {args.host}; the service has no authentication", file=sys.stderr)
        print("serving; Ctrl-C (or SIGTERM) stops", flush=True)
        signal.signal(signal.SIGINT, interrupt)  # also when started in the background with SIGINT ignored
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        try:
            serve.shutdown()
        finally:
            if started:
                ray.shutdown()
    return 0
