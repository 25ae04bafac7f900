"""The HTTP front of an ingress replica (``serve_front``), without Ray: routing (404, 405), the
body limit before and while reading (413), the most requests held (429 with Retry-After), the
end-to-end timeout (408), a request for another model handed to its handle, and the real uvicorn
server on a ``SO_REUSEPORT`` socket that a second replica's socket shares."""
import asyncio
import http.client
import json
import socket
import time

import pytest

from multigrain.platform.ray.serve_batching import Limits, RequestError
from multigrain.platform.ray.serve_front import Front, FrontApp, read_asgi_body, reuse_port_socket
from tests.conftest import ROOT


def scope(path="/predict/m", method="POST", headers=()):
    return {"type": "http", "path": path, "method": method, "headers": list(headers)}


def receiver(chunks):
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    read = []

    async def receive():
        read.append(1)
        return messages[len(read) - 1] if len(read) <= len(messages) else {"type": "http.disconnect"}

    receive.read = read
    return receive


async def echo(body: bytes):
    """The replica's request path, standing in: the texts upper-cased."""
    texts = [i["text"] for i in json.loads(body)["instances"]]
    return 200, {"predictions": [t.upper() for t in texts]}, None


def call(app, s, chunks):
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(app(s, receiver(chunks), send))
    start, body = sent
    return start["status"], json.loads(body["body"]), dict(start["headers"])


LIMITS = Limits(max_body_bytes=100, max_ongoing_requests=1, max_queued_requests=1, request_timeout_s=0.2)


def test_answers_and_routes():
    app = FrontApp("m", echo, LIMITS)
    status, payload, headers = call(app, scope(), [b'{"instances": [', b'{"text": "ab"}]}'])
    assert status == 200 and payload == {"predictions": ["AB"]}
    assert headers[b"content-type"] == b"application/json" and int(headers[b"content-length"]) == len(b'{"predictions":["AB"]}')
    assert call(app, scope("/predict/m/"), [b'{"instances": [{"text": "c"}]}'])[1] == {"predictions": ["C"]}
    for path in ("/predict/other", "/predict/", "/", "/predict/m/x", "/predictor/m"):
        status, payload, _ = call(app, scope(path), [b"{}"])
        assert (status, payload) == (404, {"error": f"no model at {path}: POST /predict/<name>"}), path
    status, payload, headers = call(app, scope(method="GET"), [b""])
    assert status == 405 and headers[b"allow"] == b"POST" and "POST a JSON body" in payload["error"]


def test_body_limit_from_content_length_before_reading_and_while_streaming():
    app = FrontApp("m", echo, LIMITS)
    receive = receiver([b"x" * 10])
    with pytest.raises(RequestError) as e:
        asyncio.run(read_asgi_body(scope(headers=[(b"content-length", b"101")]), receive, 100))
    assert e.value.status == 413 and not receive.read
    assert e.value.message == "the body is 101 bytes, over the limit of 100 bytes (multigrain serve --max-body-bytes)"
    receive = receiver([b"x" * 40] * 5)  # no Content-Length: counted as it arrives
    with pytest.raises(RequestError, match="over the limit of 100 bytes") as e:
        asyncio.run(read_asgi_body(scope(), receive, 100))
    assert e.value.status == 413 and len(receive.read) == 3
    status, payload, _ = call(app, scope(headers=[(b"content-length", b"12x")]), [b""])
    assert status == 400 and payload["error"] == "Content-Length '12x' is not a number of bytes"
    with pytest.raises(ConnectionResetError):  # the client left: no answer is sent
        asyncio.run(read_asgi_body(scope(), receiver([]), 100))


def test_a_body_that_does_not_arrive_in_time_is_408_and_frees_its_slot():
    app = FrontApp("m", echo, Limits(max_body_bytes=100, max_ongoing_requests=1, max_queued_requests=0,
                                     request_timeout_s=5.0))
    app.body_timeout_s = 0.1

    async def trickle():
        await asyncio.sleep(1.0)  # a client sending its body too slowly
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def answered(receive):
        sent = []

        async def send(message):
            sent.append(message)

        await app(scope(), receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"])

    started = time.monotonic()
    assert asyncio.run(answered(trickle)) == (408, {"error": "the body did not arrive within 0.1 s"})
    assert time.monotonic() - started < 0.9 and app.held == 0
    assert asyncio.run(answered(receiver([b'{"instances": [{"text": "a"}]}']))) == (200, {"predictions": ["A"]})


def test_requests_over_the_limit_are_429_and_a_slow_answer_is_408():
    async def slow(body):
        await asyncio.sleep(float(body))
        return 200, {"predictions": []}, None

    app = FrontApp("m", slow, LIMITS)  # holds 1 + 1 requests

    async def three():
        sent: list = [[], [], []]

        def sender(i):
            async def send(message):
                sent[i].append(message)
            return send

        await asyncio.gather(*(app(scope(), receiver([b"0.1"]), sender(i)) for i in range(3)))
        return [(m[0]["status"], json.loads(m[1]["body"]), dict(m[0]["headers"])) for m in sent]

    answers = asyncio.run(three())
    assert [a[0] for a in answers] == [200, 200, 429]
    assert answers[2][1] == {"error": "busy: 2 requests held by this replica; retry later"}
    assert answers[2][2][b"retry-after"] == b"1"
    assert app.held == 0
    started = time.perf_counter()
    status, payload, _ = call(app, scope(), [b"5"])
    assert status == 408 and payload == {"error": "no answer within 0.2 s (multigrain serve --request-timeout)"}
    assert time.perf_counter() - started < 2 and app.held == 0


class Remote:
    """A DeploymentHandle's method, standing in: ``answer.remote(body)`` is awaitable."""

    def __init__(self, name):
        self.name, self.bodies = name, []
        self.answer = self

    def remote(self, body):
        self.bodies.append(body)

        async def reply():
            return 200, {"predictions": [self.name]}, None

        return reply()


def test_a_request_for_another_model_goes_to_its_handle():
    other = Remote("n")
    app = FrontApp("m", echo, LIMITS, lambda name: other if name == "n" else None)
    assert call(app, scope("/predict/n"), [b'{"a": 1}']) == (200, {"predictions": ["n"]},
                                                             {b"content-type": b"application/json",
                                                              b"content-length": b"21"})
    assert other.bodies == [b'{"a": 1}']
    assert call(app, scope("/predict/z"), [b"{}"])[0] == 404


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_real_server_answers_on_a_port_that_another_replica_shares():
    port = free_port()
    front = Front(FrontApp("m", echo, Limits(max_body_bytes=1000)), "127.0.0.1", port)
    second = reuse_port_socket("127.0.0.1", port)  # a second replica binds the same port
    second.close()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for text in ("ab", "张三"):  # one keep-alive connection
            conn.request("POST", "/predict/m", body=json.dumps({"instances": [{"text": text}]}).encode())
            response = conn.getresponse()
            assert response.status == 200 and json.loads(response.read()) == {"predictions": [text.upper()]}
        conn.request("POST", "/predict/m", body=b"x" * 1001)
        response = conn.getresponse()
        assert response.status == 413 and "over the limit of 1000 bytes" in json.loads(response.read())["error"]
        conn.close()
        front.check()
    finally:
        front.stop()
    with pytest.raises(RuntimeError, match="the replica's HTTP front stopped"):
        front.check()


def raw_exchange(port: int, data: bytes, wait: float = 10.0) -> tuple[int, dict, float]:
    """Send ``data`` on a new connection; (status, JSON body, seconds until the server closed it)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while sending: the answer is already there
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), answer[:300]
    return int(head.split()[1]), json.loads(body), time.monotonic() - started


def test_the_real_server_bounds_the_head_and_answers_parser_errors_in_json(monkeypatch):
    from multigrain.platform.ray import serve_protocol
    from multigrain.platform.ray.serve_protocol import MAX_HEAD_BYTES, BoundedHttpToolsProtocol

    monkeypatch.setattr(BoundedHttpToolsProtocol, "head_timeout_s", 1.0)
    monkeypatch.setattr(serve_protocol, "LINGER_S", 0.3)
    port = free_port()
    front = Front(FrontApp("m", echo, Limits(max_body_bytes=1000)), "127.0.0.1", port)
    good = json.dumps({"instances": [{"text": "ab"}]}).encode()
    try:
        huge = b"POST /predict/m HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (4 * MAX_HEAD_BYTES)
        status, payload, _ = raw_exchange(port, huge)
        assert status == 431 and payload["error"] == f"the request line and headers are over the limit of " \
                                                      f"{MAX_HEAD_BYTES} bytes"
        for partial in (b"", b"POST /predi", b"POST /predict/m HTTP/1.1\r\nHost: x\r\n"):  # a head never finished
            status, payload, seconds = raw_exchange(port, partial)
            assert status == 408 and "did not arrive within 1 s" in payload["error"] and 0.9 < seconds < 5
        for bad in (b"Content-Length: -1\r\n", b"Content-Length: 0x10\r\n", b"Transfer-Encoding: gzip\r\n"):
            status, payload, _ = raw_exchange(port, b"POST /predict/m HTTP/1.1\r\nHost: x\r\n" + bad + b"\r\n")
            assert status == 400 and payload["error"].startswith("not an HTTP/1.1 request this server can read")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/predict/m", body=good, headers={"X-Fine": "b" * (MAX_HEAD_BYTES // 2)})
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read()) == {"predictions": ["AB"]}
        time.sleep(1.5)  # idle on a kept-alive connection: keep-alive's own timeout (30 s), not the head's
        conn.request("POST", "/predict/m", body=good)
        assert conn.getresponse().status == 200
        conn.close()
        front.check()
    finally:
        front.stop()


def test_the_long_input_replica_lowers_every_thread_of_its_process():
    """A nice value belongs to a thread on Linux: all of the process's threads are lowered, and
    the threads they start after it inherit the value (Serve predicts in an executor's threads)."""
    import os
    import subprocess
    import sys

    code = """
import os, threading
from multigrain.platform.ray.serve import lower_priority
gate = threading.Event()
early = threading.Thread(target=gate.wait)  # a thread that exists before
early.start()
changed = lower_priority(7)
early_value = os.getpriority(os.PRIO_PROCESS, early.native_id)
gate.set()
early.join()
values = []
late = threading.Thread(target=lambda: values.append(os.getpriority(os.PRIO_PROCESS, 0)))  # one started after
late.start()
late.join()
print(len(changed), early_value, values[0], os.getpriority(os.PRIO_PROCESS, 0))
"""
    start = os.getpriority(os.PRIO_PROCESS, 0)
    if start >= 7:
        pytest.skip(f"this test process already runs at nice {start}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    threads, early, late, main = map(int, out.stdout.split())
    assert threads >= 2 and (early, late, main) == (7, 7, 7)
