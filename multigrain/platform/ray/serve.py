"""Serving archives over HTTP with Ray Serve: one application per archive at
``/predict/<name>``, its replicas holding the model in memory.

Every request is bounded before a model sees it (``Limits``, ``serve_batching``, which also
batches the requests that arrive together): the body's size (413), the number
of instances (413), each text's length (413, naming the limit and its option), and its shape
(400: every client error is a 4xx with one clear message, never a 500).

Long inputs do not hold short ones up. A request whose texts add up to more than
``long_input_chars`` characters goes from the ingress replica to a replica of its own
(``long_inputs``): one request at a time, texts one by one (memory bounded by the longest allowed
text), at a lower CPU priority (``nice``), with a short queue (full: 429 with Retry-After). Short
requests are answered by the ingress replicas meanwhile.

Who answers HTTP (``--ingress``): on the local Ray of ``multigrain serve`` the ingress replicas
themselves (``serve_front``: uvicorn in each replica on ``--host``/``--port``, shared with
``SO_REUSEPORT``; Serve runs no proxy), which cut the server's CPU per short request from ~10 ms to
~2 ms on ``benchmarks/serve_load.py``; with ``--address`` (a cluster, replicas on other machines)
Serve's HTTP proxy, which calls the replica (``__call__``).

Faults: the Serve controller health-checks replicas and replaces one that dies, reloading its
archive (Serve forbids ``max_restarts`` on replicas).
"""
from __future__ import annotations

import os
import socket
from dataclasses import asdict
from typing import Any, Optional, Sequence

from multigrain.platform.errors import ConfigurationError, MultigrainError
from multigrain.platform.ray.cluster import gpus_per_actor
from multigrain.platform.ray.serve_batching import (  # noqa: F401  (the request path; imported from here too)
    RETRY_AFTER_S, TEXT_KEYS, Batcher, Limits, RequestError, batch_examples, json_type, parse_instances, read_body,
    text_length)


def loopback_replica_server() -> None:
    """Ray Serve 2.60 binds each replica's inter-deployment gRPC server to ``[::]:0``, every
    interface, whatever the node address (``ray/serve/_private/replica.py``, ``_on_initialized``,
    which runs after the replica's constructor, which calls this). In a Ray whose node address is
    the loopback one (``multigrain serve`` without ``--address``) bind it there; else nothing."""
    import ray
    from ray.serve._private import replica

    node = ray.util.get_node_ip_address()
    original = getattr(replica, "add_port_to_grpc_server", None)
    if node not in ("127.0.0.1", "::1") or original is None or getattr(original, "loopback", False):
        return

    def add_port(server, address: str):
        if address in ("[::]:0", "0.0.0.0:0"):
            address = "[::1]:0" if node == "::1" else f"{node}:0"
        return original(server, address)

    add_port.loopback = True
    replica.add_port_to_grpc_server = add_port


class LoadedArchive:
    """One archive's model in a replica: examples from request instances (400 when the model
    cannot make one). It imports the user's plugins (``plugins.travelling``) before the run."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None, included: Sequence = ()):
        from multigrain.platform.plugins import include_travelled
        from multigrain.platform.runs import Run

        include_travelled(included)
        self.archive = Run.open(run_dir).load_archive()
        self.batch_size = batch_size  # None: the spec's data_loader.eval_batch_size

    def examples(self, instances: list[dict]) -> list:
        """As ``predict`` makes them from JSON lines: the model's examples, annotated by the
        reader (lattices)."""
        built = []
        for n, data in enumerate(instances):
            try:
                built.append(self.archive.model.text_to_instance(data))
            except (KeyError, ValueError, TypeError, AttributeError, IndexError, MultigrainError) as e:
                raise RequestError(400, f"instances[{n}]: cannot make an example: {e}") from None
        try:
            return self.archive.reader.annotate(built)
        except (ValueError, MultigrainError) as e:
            raise RequestError(400, f"cannot annotate the instances: {e}") from None

    def predict_one_by_one(self, instances: list[dict]) -> list:
        """Texts one at a time: memory for the longest text, not for a batch of them."""
        return [p for x in self.examples(instances) for p in self.archive.predict_batches([x], 1)]


def log_truncated(predictions: list) -> Optional[str]:
    """One log line (warning, on the replica's log) for a request some of whose inputs the model
    cut: their predictions say ``"truncated": true``. Returns the line (None when none was cut)."""
    import logging

    cut = [i for i, p in enumerate(predictions) if isinstance(p, dict) and p.get("truncated") is True]
    if not cut:
        return None
    line = (f"multigrain serve: {len(cut)} of {len(predictions)} inputs of a request were cut to the model's "
            f"maximum length (instances {', '.join(map(str, cut[:10]))}{', ...' if len(cut) > 10 else ''})")
    logging.getLogger("ray.serve").warning(line)
    return line


def _error(status: int, message: str, headers: Optional[dict] = None):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


class ArchivePredictor:
    """The ingress replica of one archive: ``POST {"instances": [{"text": ...}]}`` ->
    ``{"predictions": [...]}``, the same JSON as ``archive.predict_batches``. Short requests are
    predicted here; long ones (``Limits.long_input_chars``) go to ``long_inputs``.

    With ``front`` (``{"name", "host", "port", "names"}``: a local Ray, ``serve_front``) the replica
    answers HTTP itself on ``host:port`` and Serve runs no proxy; else Serve's proxy calls it."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None, limits: Optional[dict] = None,
                 long_inputs: Any = None, included: Sequence = (), max_batch: int = 64,
                 front: Optional[dict] = None):
        loopback_replica_server()
        self.loaded = LoadedArchive(run_dir, batch_size, included)
        self.batcher = Batcher(self.loaded, max_batch)  # texts per forward pass
        self.limits = Limits(**(limits or {}))
        self.long_inputs = long_inputs  # a DeploymentHandle of LongInputPredictor, or None
        self.front = None
        if front is not None:
            from multigrain.platform.ray.serve_front import Front, FrontApp

            handles: dict = {}

            def other(name: str):
                if name not in front["names"]:
                    return None
                if name not in handles:
                    from ray import serve

                    handles[name] = serve.get_deployment_handle("predictor", app_name=name)
                return handles[name]

            self.front = Front(FrontApp(front["name"], self.answer, self.limits, other), front["host"], front["port"])

    async def __call__(self, request):
        """Through Serve's proxy (``multigrain serve --address``)."""
        from starlette.responses import JSONResponse

        if request.method != "POST":
            return _error(405, 'POST a JSON body {"instances": [{"text": "..."}]}', {"Allow": "POST"})
        try:
            body = await read_body(request, self.limits.max_body_bytes)
        except RequestError as e:
            return _error(e.status, str(e))
        status, payload, headers = await self.answer(body)
        return JSONResponse(payload, status_code=status, headers=headers)

    async def answer(self, body: bytes) -> tuple[int, dict, Optional[dict]]:
        """One request's body -> (HTTP status, JSON payload, extra headers); client errors 4xx."""
        try:
            instances, total = parse_instances(body, self.limits)
            if self.long_inputs is not None and total > self.limits.long_input_chars:
                predictions = await self._long(instances)
            else:
                predictions = await self.batcher.predict(self.loaded.examples(instances))
        except (RequestError, MultigrainError) as e:
            status = getattr(e, "status", 400)
            return status, {"error": str(e)}, {"Retry-After": str(RETRY_AFTER_S)} if status == 429 else None
        log_truncated(predictions)
        return 200, {"predictions": predictions}, None

    def check_health(self) -> None:
        if self.front is not None:
            self.front.check()

    def __del__(self):
        if getattr(self, "front", None) is not None:
            self.front.stop()

    async def _long(self, instances: list[dict]) -> list:
        from ray.serve.exceptions import BackPressureError

        try:
            outcome = await self.long_inputs.predict.remote(instances)
        except BackPressureError:
            raise RequestError(429, f"busy with other long inputs (over {self.limits.long_input_chars} characters "
                                    f"per request); retry later, or send shorter requests") from None
        if isinstance(outcome, dict) and "error" in outcome:
            raise RequestError(outcome["status"], outcome["error"])
        return outcome


def lower_priority(niceness: int) -> list[int]:
    """Every thread of this process at ``niceness`` (at least), and so the threads they start.
    On Linux a nice value belongs to a thread: ``os.nice`` in the constructor, which Serve runs
    in a thread of its own, left the threads that predict (Serve's executor) at the replica's
    priority. Returns the threads changed (none where that is not permitted)."""
    changed = []
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # not Linux: the process's own value
        threads = [0]
    for tid in threads:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
                changed.append(tid)
        except OSError:  # not permitted, or the thread ended: same priority, still a process of its own
            pass
    return changed


class LongInputPredictor:
    """The long-input replica of one archive: one request at a time, texts one by one, at a
    lower CPU priority than the ingress replicas (and one torch thread) so that they keep the
    processor for short requests. Nice 19, the lowest: Ray starts its workers at nice 15
    (``RAY_worker_niceness``), ingress replicas included, so a lower value (10, until 2026-11-27)
    changed nothing."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None, niceness: int = 19, included: Sequence = ()):
        lower_priority(niceness)
        import torch

        loopback_replica_server()
        torch.set_num_threads(1)
        self.loaded = LoadedArchive(run_dir, batch_size, included)

    def predict(self, instances: list[dict]):
        try:
            return self.loaded.predict_one_by_one(instances)
        except (RequestError, MultigrainError) as e:
            return {"status": getattr(e, "status", 400), "error": str(e)}


def check_port_free(host: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise ConfigurationError(f"--port {port}: expected a TCP port from 1 to 65535")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (OSError, UnicodeError) as e:
        raise ConfigurationError(f"--host {host}: not an address of this machine ({e})") from None
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server does: TIME_WAIT is free
        try:
            s.bind((host, port))
        except OSError as e:
            raise ConfigurationError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None


def replica_resources(num_cpus: float, num_gpus: Optional[float], limits: Limits) -> dict:
    """Ray resources of each replica, the long-input one included. Without ``num_gpus`` on a
    cluster with GPUs: one GPU per replica, or half of one when there is a long-input replica
    (a model's ingress and long-input replicas then share one GPU)."""
    gpus = gpus_per_actor(num_gpus)
    if num_gpus is None and gpus >= 1 and limits.long_input_chars:
        gpus = 0.5
    return {"num_cpus": num_cpus, "num_gpus": gpus}


def check_fits(models: int, replicas: int, actor: dict, limits: Limits, have: dict) -> None:
    """One clear error instead of replicas that wait forever for resources a local Ray lacks."""
    per_model = replicas + (1 if limits.long_input_chars else 0)
    for key, name, option in (("num_cpus", "CPU", "--num-cpus"), ("num_gpus", "GPU", "--num-gpus")):
        need = models * per_model * actor[key]
        if need > have.get(name, 0) + 1e-9:
            lane = " + 1 long-input replica" if limits.long_input_chars else ""
            raise ConfigurationError(
                f"{models} model(s) x ({replicas} replica(s){lane}) x {option} {actor[key]:g} = {need:g} {name}s, "
                f"but this Ray has {have.get(name, 0):g}: lower {option} or --replicas (or --long-input-chars 0)")


def url_of(host: str, port: int, name: str) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/predict/{name}"


def start_service(named: dict[str, str], host: str = "127.0.0.1", port: int = 8000, replicas: int = 1,
                  num_cpus: float = 1.0, num_gpus: Optional[float] = None,
                  limits: Optional[Limits] = None, ingress: str = "replica") -> dict[str, str]:
    """One Serve application per archive at ``/predict/<name>``: ``replicas`` ingress replicas
    and, unless ``limits.long_input_chars`` is 0, one long-input replica (each importing the
    user's plugins, ``plugins.travelling``); returns name -> URL. ``ingress``: ``"replica"``, the
    ingress replicas answer HTTP on ``host:port`` themselves (``serve_front``; every replica on
    this machine: a local Ray), or ``"proxy"``, through Serve's HTTP proxy."""
    from ray import serve

    from multigrain.platform.plugins import travelling

    if ingress not in ("replica", "proxy"):
        raise ConfigurationError(f"--ingress {ingress!r}: expected 'replica' or 'proxy'")
    limits = limits or Limits()
    limits.check()
    max_batch = batch_examples()  # MULTIGRAIN_SERVE_MAX_BATCH here, where the command runs
    actor = replica_resources(num_cpus, num_gpus, limits)
    logging = {"enable_access_log": False}  # a log line per request costs the proxy and replica ~1/4 of their time
    shutdown = {"graceful_shutdown_wait_loop_s": 0.5, "graceful_shutdown_timeout_s": 2.0, "logging_config": logging}
    serve.start(proxy_location="Disabled" if ingress == "replica" else None,
                http_options={"host": host, "port": port, "request_timeout_s": limits.request_timeout_s},
                logging_config=logging)
    urls, included = {}, travelling()
    for name, run_dir in named.items():
        long_inputs = None
        if limits.long_input_chars:
            long_inputs = serve.deployment(
                LongInputPredictor, name="long_inputs", num_replicas=1, max_ongoing_requests=1,
                max_queued_requests=limits.long_input_queue, ray_actor_options=actor, **shutdown).bind(run_dir, included=included)
        # through the proxy Serve holds max_ongoing_requests per replica and queues the rest; a
        # front holds them all (its own 429 past max_ongoing + max_queued)
        ongoing = limits.max_ongoing_requests + (limits.max_queued_requests if ingress == "replica" else 0)
        ingress_deployment = serve.deployment(
            ArchivePredictor, name="predictor", num_replicas=replicas,
            max_ongoing_requests=ongoing, max_queued_requests=limits.max_queued_requests,
            backpressure_config={"status_code": 429, "retry_after_s": RETRY_AFTER_S},
            ray_actor_options=actor, **shutdown)
        front = {"name": name, "host": host, "port": port, "names": sorted(named)} if ingress == "replica" else None
        serve.run(ingress_deployment.bind(run_dir, None, asdict(limits), long_inputs, included, max_batch=max_batch,
                                          front=front),
                  name=name, route_prefix=f"/predict/{name}")
        urls[name] = url_of(host, port, name)
    return urls
