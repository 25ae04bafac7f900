"""``multigrain serve``: archives over HTTP with Ray Serve, ``POST /predict/<name>``."""
from __future__ import annotations

import argparse

from multigrain.platform.commands.common import host_address, non_negative_float, positive_float


def port_number(text: str) -> int:
    """A TCP port to listen on: 1-65535 (0 would listen on a port nobody is told)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a TCP port from 1 to 65535") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port}: expected a TCP port from 1 to 65535")
    return port


def at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {minimum}")
        return value

    parse.__name__ = "int"
    return parse


def register(subparsers) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="serve archives over HTTP with Ray Serve: POST /predict/<name>",
        description="Serve archives over HTTP. Without --address, Ray runs in this command and every "
                    "process it starts listens on 127.0.0.1 only; Ctrl-C or SIGTERM stops them all.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--replicas", type=at_least(1), default=1, help="ingress replicas per model (default 1)")
    p.add_argument("--host", default="127.0.0.1", type=host_address,
                   help="address the HTTP proxy listens on (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8000, help="HTTP port, 1-65535 (default 8000)")
    p.add_argument("--num-cpus", type=positive_float, default=1.0, help="CPUs per replica (default 1)")
    p.add_argument("--num-gpus", type=non_negative_float,
                   help="GPUs per replica (default when the cluster has GPUs: 1, or 0.5 with a long-input replica)")
    p.add_argument("--address", help="Ray cluster address (default: Ray in this process)")
    p.add_argument("--ingress", choices=("replica", "proxy"),
                   help="who answers HTTP: 'replica', each ingress replica itself on --host/--port (no proxy, no "
                        "Ray call on a request's way; the default without --address), or 'proxy', Ray Serve's "
                        "HTTP proxy (the default, and the only choice, with --address)")
    limits = p.add_argument_group("request limits (over one: HTTP 413 naming it)")
    limits.add_argument("--max-body-bytes", type=at_least(1), default=1 << 20,
                        help="request body size (default 1048576)")
    limits.add_argument("--max-text-chars", type=at_least(1), default=20_000,
                        help="characters of one text (default 20000)")
    limits.add_argument("--max-instances", type=at_least(1), default=256,
                        help="instances per request (default 256)")
    limits.add_argument("--long-input-chars", type=at_least(0), default=4_000,
                        help="requests with more characters than this in all are predicted by a replica of their "
                             "own, at a lower priority, so that short requests are not held behind them; 0: no "
                             "such replica (default 4000)")
    limits.add_argument("--request-timeout", type=positive_float, default=120.0,
                        help="seconds before a request is answered 408 (default 120)")
    p.set_defaults(func=cmd_serve)


def limits_of(args):
    from multigrain.platform.ray.serve import Limits

    return Limits(max_body_bytes=args.max_body_bytes, max_text_chars=args.max_text_chars,
                  max_instances=args.max_instances, long_input_chars=args.long_input_chars,
                  request_timeout_s=args.request_timeout)


def cmd_serve(args) -> int:
    import signal
    import sys
    import time

    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.interruption import interrupt
    from multigrain.platform.ray.archives import check_archives
    from multigrain.platform.ray.cluster import cluster_resources, connect
    from multigrain.platform.ray.serve import check_fits, check_port_free, replica_resources, start_service

    limits = limits_of(args)
    limits.check()
    named = check_archives(args.run_dirs, predicting=True)
    check_port_free(args.host, args.port)
    local = args.address in (None, "", "local")
    ingress = args.ingress or ("replica" if local else "proxy")
    if ingress == "replica" and not local:
        raise ConfigurationError("--ingress replica needs the Ray of this command (no --address): on a cluster the "
                                 "replicas run on other machines; use --ingress proxy")
    started = connect(args.address, loopback=local)
    # SIGTERM unwinds to the finally (commands.main's handler, which connect keeps), and so does
    # SIGINT, also when started in the background with SIGINT ignored
    signal.signal(signal.SIGINT, interrupt)
    serving = False
    try:
        if local:
            check_fits(len(named), args.replicas, replica_resources(args.num_cpus, args.num_gpus, limits), limits,
                       cluster_resources())
        urls = start_service(named, host=args.host, port=args.port, replicas=args.replicas,
                             num_cpus=args.num_cpus, num_gpus=args.num_gpus, limits=limits, ingress=ingress)
        for name, url in urls.items():
            print(f"{name}: POST {url}", flush=True)
        example = next(iter(urls.values()))
        print(f"e.g. curl -s -X POST {example} -H 'Content-Type: application/json' "
              f"-d '{{\"instances\": [{{\"text\": \"张三是北京大学的教授\"}}]}}'", flush=True)
        lane = (f"; requests over {limits.long_input_chars} characters go to the long-input replica"
                if limits.long_input_chars else "")
        print(f"limits: body {limits.max_body_bytes} bytes, {limits.max_instances} instances, "
              f"{limits.max_text_chars} characters per text{lane}", flush=True)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"warning: listening on {args.host}; the service has no authentication", file=sys.stderr)
        print("serving; Ctrl-C (or SIGTERM) stops", flush=True)
        serving = True
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        if not serving:  # stopped while starting: 'interrupted', exit 130, not 0 as if it had served
            raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the stop short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop(started, local)
    return 0


def stop(started: bool, local: bool) -> None:
    """A local Ray that this command started goes down whole, Serve's actors with it (no
    graceful drain: the command is stopping); on a cluster Serve's applications are removed
    and this driver disconnects."""
    import ray

    if not (started and local):
        from ray import serve

        serve.shutdown()
    if started:
        ray.shutdown()
