"""Serving archives over HTTP with Ray Serve: one application per archive at
``/predict/<name>``, its replicas holding the model in memory.

Every request is bounded before a model sees it (``Limits``): the body's size (413), the number
of instances (413), each text's length (413, naming the limit and its option), and its shape
(400: every client error is a 4xx with one clear message, never a 500).

Long inputs do not hold short ones up. A request whose texts add up to more than
``long_input_chars`` characters goes from the ingress replica to a replica of its own
(``long_inputs``): one request at a time, texts one by one (memory bounded by the longest allowed
text), at a lower CPU priority (``nice``), with a short queue (full: 429 with Retry-After). Short
requests are answered by the ingress replicas meanwhile.

Faults: the Serve controller health-checks replicas and replaces one that dies, reloading its
archive (Serve forbids ``max_restarts`` on replicas).
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import asdict, dataclass
from typing import Any, Optional

from multigrain.platform.errors import ConfigurationError, MultigrainError
from multigrain.platform.ray.cluster import gpus_per_actor

#: the string fields a model's ``text_to_instance`` reads (tagger, classifiers, span reader);
#: each is checked to be a non-empty string (``chars``: a string or a list of strings) and counted
TEXT_KEYS = ("text", "chars", "text_a", "text_b", "question", "context")
RETRY_AFTER_S = 1


@dataclass(frozen=True)
class Limits:
    """The bounds of one request; the CLI option of each is named in its 413 message."""

    max_body_bytes: int = 1 << 20       # --max-body-bytes
    max_text_chars: int = 20_000        # --max-text-chars: per text field of an instance
    max_instances: int = 256            # --max-instances: per request
    long_input_chars: int = 4_000       # --long-input-chars: over this in all -> the long-input replica; 0: none
    long_input_queue: int = 4           # long requests waiting per ingress replica before 429
    max_ongoing_requests: int = 64      # per ingress replica, held by it (fewer: Serve's proxy polls for room)
    max_queued_requests: int = 256      # waiting at the proxy before 429 (Serve's max_queued_requests)
    request_timeout_s: float = 120.0    # --request-timeout: end to end, then 408

    def check(self) -> None:
        for key, value in asdict(self).items():
            low = 0 if key == "long_input_chars" else 1  # 0: no long-input replica
            if key != "request_timeout_s" and value < low:
                raise ConfigurationError(f"--{key.replace('_', '-')} {value}: must be at least {low}")
        if not self.request_timeout_s > 0:
            raise ConfigurationError(f"--request-timeout {self.request_timeout_s}: must be more than 0 seconds")


class RequestError(Exception):
    """A client error: its HTTP status (4xx) and the one-line message sent back."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def json_type(value: Any) -> str:
    kinds = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _no_constant(name: str):  # NaN, Infinity, -Infinity
    raise ValueError(f"{name} is not a JSON value")


async def read_body(request, limit: int) -> bytes:
    """The body, refused (413) as soon as it is known to be over ``limit`` bytes: from its
    Content-Length before reading anything, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise RequestError(400, f"Content-Length {declared!r} is not a number of bytes")
        if int(declared) > limit:
            raise RequestError(413, f"the body is {int(declared)} bytes, over the limit of {limit} bytes "
                                    f"(multigrain serve --max-body-bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"the body is over the limit of {limit} bytes (multigrain serve --max-body-bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def text_length(where: str, value: Any, key: str) -> int:
    """Characters of one text field; 400 unless it is a non-empty string (``chars``: or a list of
    strings)."""
    if key == "chars" and isinstance(value, list):
        if not all(isinstance(c, str) for c in value):
            bad = next(c for c in value if not isinstance(c, str))
            raise RequestError(400, f"{where}: expected a string or a list of strings, found {json_type(bad)} in it")
        length = sum(len(c) for c in value)
    elif isinstance(value, str):
        length = len(value)
    else:
        raise RequestError(400, f"{where}: expected a string, got {json_type(value)}")
    if length == 0:
        raise RequestError(400, f"{where}: empty; expected some text")
    return length


def parse_instances(body: bytes, limits: Limits) -> tuple[list[dict], int]:
    """The request's instances and their characters in all, or a ``RequestError``: 400 for a
    body that is not ``{"instances": [{"text": "..."}, ...]}``, 413 over a limit."""
    shape = 'expected a JSON object {"instances": [{"text": "..."}, ...]}'
    try:
        payload = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise RequestError(400, "the body is not valid JSON: nested too deeply") from None
    except ValueError as e:  # also UnicodeDecodeError
        raise RequestError(400, f"the body is not valid JSON: {e}") from None
    try:  # \ud800-style escapes decode to lone surrogates, which no answer could hold
        json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(400, f"the body is not valid Unicode: a lone surrogate {e.object[e.start]!r}") from None
    if not isinstance(payload, dict):
        raise RequestError(400, f"{shape}, got {json_type(payload)}")
    if "instances" not in payload:
        raise RequestError(400, f'{shape}: no "instances" key')
    instances = payload["instances"]
    if not isinstance(instances, list):
        raise RequestError(400, f'"instances": expected a list of objects, got {json_type(instances)}')
    if len(instances) > limits.max_instances:
        raise RequestError(413, f"{len(instances)} instances, over the limit of {limits.max_instances} per request "
                                f"(multigrain serve --max-instances)")
    total = 0
    for n, instance in enumerate(instances):
        if not isinstance(instance, dict):
            raise RequestError(400, f'instances[{n}]: expected an object like {{"text": "..."}}, '
                                    f"got {json_type(instance)}")
        for key in TEXT_KEYS:
            if key in instance:
                length = text_length(f"instances[{n}].{key}", instance[key], key)
                if length > limits.max_text_chars:
                    raise RequestError(413, f"instances[{n}].{key}: {length} characters, over the limit of "
                                            f"{limits.max_text_chars} characters per text "
                                            f"(multigrain serve --max-text-chars)")
                total += length
    return instances, total


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
    cannot make one)."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None):
        from multigrain.platform.runs import Run

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


class Batcher:
    """An ingress replica's model calls: one at a time, in a thread of their own (the event loop
    goes on reading and checking requests); the requests that arrive meanwhile are predicted
    together in the next call (up to ``max_examples``), each failure kept to its own request."""

    def __init__(self, loaded: LoadedArchive, max_examples: int = 64):
        from concurrent.futures import ThreadPoolExecutor

        self.loaded, self.max_examples = loaded, max_examples
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="predict")
        self.waiting: list = []
        self.running = False

    async def predict(self, examples: list) -> list:
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((examples, future))
        if not self.running:
            self.running = True
            asyncio.get_running_loop().create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self.waiting:
                batch, size = [], 0
                while self.waiting and (not batch or size + len(self.waiting[0][0]) <= self.max_examples):
                    examples, future = self.waiting.pop(0)
                    if not future.done():  # not cancelled (client gone)
                        batch.append((examples, future))
                        size += len(examples)
                if not batch:
                    continue
                results = await asyncio.get_running_loop().run_in_executor(
                    self.executor, self._predict, [examples for examples, _ in batch])
                for (_, future), result in zip(batch, results):
                    if not future.done():
                        (future.set_exception if isinstance(result, Exception) else future.set_result)(result)
        finally:
            self.running = False

    def _predict(self, groups: list[list]) -> list:
        try:
            flat = list(self.loaded.archive.predict_batches([x for g in groups for x in g], self.loaded.batch_size))
        except Exception as e:  # noqa: BLE001 - handed to the request(s) it belongs to
            return [e] if len(groups) == 1 else [self._predict([g])[0] for g in groups]
        out, start = [], 0
        for group in groups:
            out.append(flat[start:start + len(group)])
            start += len(group)
        return out


def _error(status: int, message: str, headers: Optional[dict] = None):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


class ArchivePredictor:
    """The ingress replica of one archive: ``POST {"instances": [{"text": ...}]}`` ->
    ``{"predictions": [...]}``, the same JSON as ``archive.predict_batches``. Short requests are
    predicted here; long ones (``Limits.long_input_chars``) go to ``long_inputs``."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None, limits: Optional[dict] = None,
                 long_inputs: Any = None):
        loopback_replica_server()
        self.loaded = LoadedArchive(run_dir, batch_size)
        self.batcher = Batcher(self.loaded)
        self.limits = Limits(**(limits or {}))
        self.long_inputs = long_inputs  # a DeploymentHandle of LongInputPredictor, or None

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        if request.method != "POST":
            return _error(405, 'POST a JSON body {"instances": [{"text": "..."}]}', {"Allow": "POST"})
        try:
            body = await read_body(request, self.limits.max_body_bytes)
            instances, total = parse_instances(body, self.limits)
            if self.long_inputs is not None and total > self.limits.long_input_chars:
                predictions = await self._long(instances)
            else:
                predictions = await self.batcher.predict(self.loaded.examples(instances))
        except (RequestError, MultigrainError) as e:
            status = getattr(e, "status", 400)
            return _error(status, str(e), {"Retry-After": str(RETRY_AFTER_S)} if status == 429 else None)
        return JSONResponse({"predictions": predictions})

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


class LongInputPredictor:
    """The long-input replica of one archive: one request at a time, texts one by one, at a
    lower CPU priority than the ingress replicas (and one torch thread) so that they keep the
    processor for short requests."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None, niceness: int = 10):
        try:
            os.nice(niceness)
        except OSError:  # not permitted here: same priority, still a process of its own
            pass
        import torch

        loopback_replica_server()
        torch.set_num_threads(1)
        self.loaded = LoadedArchive(run_dir, batch_size)

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
                  limits: Optional[Limits] = None) -> dict[str, str]:
    """One Serve application per archive at ``/predict/<name>``: ``replicas`` ingress replicas
    and, unless ``limits.long_input_chars`` is 0, one long-input replica; returns name -> URL."""
    from ray import serve

    limits = limits or Limits()
    limits.check()
    actor = replica_resources(num_cpus, num_gpus, limits)
    logging = {"enable_access_log": False}  # a log line per request costs the proxy and replica ~1/4 of their time
    shutdown = {"graceful_shutdown_wait_loop_s": 0.5, "graceful_shutdown_timeout_s": 2.0, "logging_config": logging}
    serve.start(http_options={"host": host, "port": port, "request_timeout_s": limits.request_timeout_s},
                logging_config=logging)
    urls = {}
    for name, run_dir in named.items():
        long_inputs = None
        if limits.long_input_chars:
            long_inputs = serve.deployment(
                LongInputPredictor, name="long_inputs", num_replicas=1, max_ongoing_requests=1,
                max_queued_requests=limits.long_input_queue, ray_actor_options=actor, **shutdown).bind(run_dir)
        ingress = serve.deployment(
            ArchivePredictor, name="predictor", num_replicas=replicas,
            max_ongoing_requests=limits.max_ongoing_requests, max_queued_requests=limits.max_queued_requests,
            backpressure_config={"status_code": 429, "retry_after_s": RETRY_AFTER_S},
            ray_actor_options=actor, **shutdown)
        serve.run(ingress.bind(run_dir, None, asdict(limits), long_inputs), name=name, route_prefix=f"/predict/{name}")
        urls[name] = url_of(host, port, name)
    return urls
