"""The HTTP front of an ingress replica (``multigrain serve`` on a local Ray): the replica process
answers ``POST /predict/<name>`` itself, with no Serve proxy and no Ray actor call on the way.

Why: on the benchmark of ``benchmarks/serve_load.py`` (BiLSTM-CRF, 32 clients of short texts,
two shared cores) 8 to 9 of the ~10 ms of server CPU per request were Serve's (the proxy's ASGI
handling and its actor call into the replica), against ~2 ms for the forward pass. A short
request's latency is, by Little's law, ~clients / throughput, so that CPU was the p99.

How: a uvicorn server (httptools parser with a bounded head, ``serve_protocol.py``; uvloop) in a
thread of the replica, on a socket of its own bound to the service's ``--host``/``--port`` with
``SO_REUSEPORT``, so that every ingress
replica of the machine listens on the same port and the kernel spreads the connections among
them. A request for another model (``/predict/<other>``) goes to that model's ingress
deployment by a ``DeploymentHandle`` (one actor call, as the proxy would make). The request path
is the replica's (``ArchivePredictor.answer``: the same limits, 4xx messages, batching and
long-input replica as through the proxy); this module adds what the proxy did: the body limit
while it streams in (413), the most requests held at once (429 with Retry-After, as Serve's
``max_queued_requests``), the end-to-end timeout (408; 408 too for a body that has not arrived
within ``BODY_TIMEOUT_S``), 404 for a path that names no model, 405
for a method other than POST. Access logs are off (a log line per request costs ~1/4 of a short
request's CPU).
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any, Awaitable, Callable, Optional

from multigrain.platform.ray.serve_batching import RETRY_AFTER_S, Limits, RequestError, check_declared_length

PREFIX = "/predict/"
#: a body must have arrived within this many seconds of its head (or the request's timeout, when
#: shorter): a client that sends its body a byte at a time holds one of the replica's request slots
BODY_TIMEOUT_S = 30.0

#: (status, JSON payload, extra headers) of one answered request
Answer = tuple[int, Any, Optional[dict]]


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` that the other ingress replicas can bind too."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):  # Linux, macOS; elsewhere one ingress replica per port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def encode(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


async def read_asgi_body(scope: dict, receive: Callable, limit: int) -> bytes:
    """The body of an ASGI request, refused (413) as soon as it is known to be over ``limit``
    bytes: from its Content-Length before reading anything, else while it streams in."""
    for key, value in scope["headers"]:
        if key == b"content-length":
            check_declared_length(value.decode("latin-1"), limit)
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("the client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"the body is over the limit of {limit} bytes (multigrain serve --max-body-bytes)")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class FrontApp:
    """The ASGI application of one replica's front. ``answer(body)`` is the replica's request
    path; ``other(name)`` the ``DeploymentHandle`` of another model's ingress (None: no such
    model)."""

    def __init__(self, name: str, answer: Callable[[bytes], Awaitable[Answer]], limits: Limits,
                 other: Callable[[str], Any] = lambda name: None):
        self.name, self.answer, self.limits, self.other = name, answer, limits, other
        self.held = 0  # requests being read or answered
        self.body_timeout_s = BODY_TIMEOUT_S

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":  # lifespan is off, websockets are not served
            return
        try:
            status, payload, headers = await self.respond(scope, receive)
        except ConnectionResetError:  # the client left before its body was read: nobody to answer
            return
        extra = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()]
        body = encode(payload)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *extra]})
        await send({"type": "http.response.body", "body": body})

    async def respond(self, scope: dict, receive: Callable) -> Answer:
        path = scope["path"]
        name = path[len(PREFIX):].rstrip("/") if path.startswith(PREFIX) else None
        if name != self.name and (not name or "/" in name or self.other(name) is None):
            return 404, {"error": f"no model at {path}: POST /predict/<name>"}, None
        if scope["method"] != "POST":
            return 405, {"error": 'POST a JSON body {"instances": [{"text": "..."}]}'}, {"Allow": "POST"}
        if self.held >= self.limits.max_ongoing_requests + self.limits.max_queued_requests:
            return (429, {"error": f"busy: {self.held} requests held by this replica; retry later"},
                    {"Retry-After": RETRY_AFTER_S})
        self.held += 1
        try:
            return await asyncio.wait_for(self._answer(name, scope, receive), self.limits.request_timeout_s)
        except asyncio.TimeoutError:
            return (408, {"error": f"no answer within {self.limits.request_timeout_s:g} s "
                                   f"(multigrain serve --request-timeout)"}, None)
        except RequestError as e:
            return e.status, {"error": e.message}, None
        finally:
            self.held -= 1

    async def _answer(self, name: str, scope: dict, receive: Callable) -> Answer:
        reading = read_asgi_body(scope, receive, self.limits.max_body_bytes)
        if self.body_timeout_s >= self.limits.request_timeout_s:  # the request's own timeout comes first
            body = await reading
        else:
            try:
                body = await asyncio.wait_for(reading, self.body_timeout_s)
            except asyncio.TimeoutError:
                raise RequestError(408, f"the body did not arrive within {self.body_timeout_s:g} s") from None
        if name == self.name:
            return await self.answer(body)
        status, payload, headers = await self.other(name).answer.remote(body)
        return status, payload, headers


class Front:
    """The front's uvicorn server, in a thread of the replica with an event loop of its own
    (the replica's model calls and handles are awaited there)."""

    def __init__(self, app: FrontApp, host: str, port: int):
        import uvicorn

        from multigrain.platform.ray.serve_protocol import BoundedHttpToolsProtocol

        self.socket = reuse_port_socket(host, port)  # bound before the replica reports ready
        config = uvicorn.Config(app, loop="uvloop", http=BoundedHttpToolsProtocol, ws="none", lifespan="off",
                                access_log=False, log_level="warning", timeout_keep_alive=30,
                                server_header=False, date_header=False)
        self.server = uvicorn.Server(config)
        self.failed: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name="multigrain-http-front", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.socket])
        except BaseException as e:  # noqa: BLE001 - reported by the replica's health check
            self.failed = e

    def check(self) -> None:
        """Raises unless the server runs (Serve then replaces the replica)."""
        if self.failed is not None or not self.thread.is_alive():
            raise RuntimeError(f"the replica's HTTP front stopped: {self.failed!r}")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
        self.socket.close()
