"""``multigrain serve`` under bad and heavy input: body and text limits (413 naming the limit),
client errors as 400 (never 500), a short request answered while a long one is in flight,
every process of its Ray listening on 127.0.0.1 only and gone within 10 s of the stop, and
one clear error (exit 2) for a port it cannot use; requests predicted together in one forward
pass answered as they would be one by one.

The request tests share one ``multigrain serve`` process (a tiny BiLSTM-CRF trained once for
the module, small limits); the request-parsing rules are also checked without Ray."""
import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from multigrain.platform.commands import main as cli_main
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.ray.serve import (Batcher, Limits, LoadedArchive, RequestError, batch_examples, check_fits,
                                           parse_instances, read_body, replica_resources)
from tests.conftest import ROOT
from tests.platform.distributed.ray_head import free_port
from tests.conftest import alive, in_session, proc_stat, resume_tagger_spec, write_spec

LIMITS = {"max_body_bytes": 1_500_000, "max_text_chars": 100_000, "max_instances": 8, "long_input_chars": 2_000}
SERVE_FLAGS = ["--max-body-bytes", "1500000", "--max-text-chars", "100000", "--max-instances", "8",
               "--long-input-chars", "2000", "--num-cpus", "0.5"]
SENTENCE = "张三，男，1962年出生，中国国籍，现任北京大学教授。"


# ---------------------------------------------------------------------------- without Ray
def status_of(body: bytes, limits: Limits = Limits(**LIMITS)) -> tuple[int, str]:
    try:
        parse_instances(body, limits)
    except RequestError as e:
        return e.status, e.message
    return 200, ""


@pytest.mark.parametrize("body, status, message", [
    (b'{"instances": [{"text": 5}]}', 400, "instances[0].text: expected a string, got a number"),
    (b'{"instances": [{"text": null}]}', 400, "instances[0].text: expected a string, got null"),
    (b'{"instances": [{"text": ["a"]}]}', 400, "instances[0].text: expected a string, got a list"),
    (b'{"instances": [{"text": {"a": 1}}]}', 400, "instances[0].text: expected a string, got an object"),
    (b'{"instances": [{"text": true}]}', 400, "instances[0].text: expected a string, got a boolean"),
    (b'{"instances": [{"text": NaN}]}', 400, "the body is not valid JSON: NaN is not a JSON value"),
    (b'{"instances": [{"text": ""}]}', 400, "instances[0].text: empty; expected some text"),
    (b'{"instances": [{"text": "ok"}, "x"]}', 400,
     'instances[1]: expected an object like {"text": "..."}, got a string'),
    (b'{"instances": [{"chars": ["a", 1]}]}', 400, "instances[0].chars: expected a string or a list of strings, "
                                                   "found a number in it"),
    (b'{"texts": ["a"]}', 400, 'expected a JSON object {"instances": [{"text": "..."}, ...]}: no "instances" key'),
    (b'["a"]', 400, 'expected a JSON object {"instances": [{"text": "..."}, ...]}, got a list'),
    (b'{"instances": "a"}', 400, '"instances": expected a list of objects, got a string'),
    (b'{"instances": [', 400, "the body is not valid JSON: Expecting value: line 1 column 16 (char 15)"),
    (b'\xff\xfe{', 400, "the body is not valid JSON: "),
    (b"[" * 100_000 + b"]" * 100_000, 400, "the body is not valid JSON: nested too deeply"),
    (b'{"instances": [{"text": "a\\ud800b"}]}', 400, "the body is not valid Unicode: a lone surrogate '\\ud800'"),
    (json.dumps({"instances": [{"text": "a"}] * 9}).encode(), 413,
     "9 instances, over the limit of 8 per request (multigrain serve --max-instances)"),
    (json.dumps({"instances": [{"text": "字" * 100_001}]}).encode(), 413,
     "instances[0].text: 100001 characters, over the limit of 100000 characters per text "
     "(multigrain serve --max-text-chars)"),
    (json.dumps({"instances": [{"text": "字" * 100_000}, {"text": "ok", "id": 3}]}).encode(), 200, ""),
])
def test_request_rules(body, status, message):
    got_status, got_message = status_of(body)
    assert got_status == status
    assert got_message.startswith(message) and (message or not got_message)


def test_characters_are_counted_over_every_text_field():
    instances, total = parse_instances(json.dumps({"instances": [
        {"text": "一二三"}, {"text_a": "四五", "text_b": "六"}, {"chars": ["七", "八"]},
        {"question": "九", "context": "十十"}]}).encode(), Limits())
    assert len(instances) == 4 and total == 3 + 3 + 2 + 3


class FakeRequest:
    def __init__(self, chunks, content_length=None):
        self.headers = {} if content_length is None else {"content-length": str(content_length)}
        self.chunks = chunks
        self.read = 0

    async def stream(self):
        for chunk in self.chunks:
            self.read += 1
            yield chunk


def test_body_limit_from_content_length_before_reading_and_while_streaming():
    declared = FakeRequest([b"x" * 10], content_length=2_000_000)
    with pytest.raises(RequestError) as e:
        asyncio.run(read_body(declared, 1_000_000))
    assert e.value.status == 413 and declared.read == 0
    assert e.value.message == ("the body is 2000000 bytes, over the limit of 1000000 bytes "
                               "(multigrain serve --max-body-bytes)")
    chunked = FakeRequest([b"x" * 400_000] * 10)  # no Content-Length: counted as it arrives
    with pytest.raises(RequestError) as e:
        asyncio.run(read_body(chunked, 1_000_000))
    assert e.value.status == 413 and chunked.read == 3
    assert asyncio.run(read_body(FakeRequest([b"ab", b"c"], 3), 3)) == b"abc"


class CountingArchive:
    """``predict_batches`` of upper-casing; records each call's examples; fails on "boom"."""

    def __init__(self):
        self.calls = []
        self.archive, self.batch_size = self, None

    def predict_batches(self, examples, batch_size=None):
        self.calls.append(list(examples))
        if "boom" in examples:
            raise ValueError("boom")
        time.sleep(0.05)
        return [x.upper() for x in examples]


def test_waiting_requests_are_predicted_together_and_a_failure_stays_with_its_request():
    loaded = CountingArchive()
    batcher = Batcher(loaded, max_examples=4)

    async def requests(groups):
        return await asyncio.gather(*(batcher.predict(g) for g in groups), return_exceptions=True)

    results = asyncio.run(requests([["a"], ["b", "c"], ["d"], ["e", "f"], ["g"]]))
    assert results == [["A"], ["B", "C"], ["D"], ["E", "F"], ["G"]]
    assert loaded.calls == [["a", "b", "c", "d"], ["e", "f", "g"]]  # up to 4 examples a call, in order
    loaded.calls.clear()
    results = asyncio.run(requests([["a"], ["b"], ["boom"], ["c"]]))
    assert results[:2] == [["A"], ["B"]] and results[3] == ["C"]
    assert isinstance(results[2], ValueError) and str(results[2]) == "boom"
    assert loaded.calls == [["a", "b", "boom", "c"], ["a"], ["b"], ["boom"], ["c"]]  # the call failed: one by one


def fake_archive(directory: Path) -> Path:
    """Enough of a run directory for the checks made before Ray starts: a spec that validates and a
    ``best.pt`` that is a torch file (its weights are read by the replicas)."""
    import torch

    from tests.conftest import resume_tagger_spec

    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(resume_tagger_spec(directory.parent / "data")))
    torch.save({}, directory / "best.pt")
    return directory


@pytest.mark.parametrize("port, message", [
    ("99999", "argument --port: 99999: expected a TCP port from 1 to 65535"),
    ("0", "argument --port: 0: expected a TCP port from 1 to 65535"),
    ("http", "argument --port: 'http': expected a TCP port from 1 to 65535"),
])
def test_bad_port_is_one_clear_error(tmp_path, capsys, port, message):
    with pytest.raises(SystemExit) as e:
        cli_main(["serve", str(fake_archive(tmp_path / "run")), "--port", port])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("error:") == 1 and message in err and "Traceback" not in err


def test_busy_port_is_one_clear_error(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = cli_main(["serve", str(fake_archive(tmp_path / "run")), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1
    assert f"error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)" in err


@pytest.mark.parametrize("flag, value, message", [
    ("--max-text-chars", "0", "argument --max-text-chars: 0: must be at least 1"),
    ("--replicas", "0", "argument --replicas: 0: must be at least 1"),
    ("--num-cpus", "-1", "argument --num-cpus: -1: must be a number more than 0"),
    ("--long-input-chars", "-5", "argument --long-input-chars: -5: must be at least 0"),
    ("--num-gpus", "-1", "argument --num-gpus: -1: must be a number of 0 or more"),
    ("--request-timeout", "0", "argument --request-timeout: 0: must be a number more than 0"),
])
def test_bad_limits_are_one_clear_error(tmp_path, capsys, flag, value, message):
    with pytest.raises(SystemExit) as e:
        cli_main(["serve", str(fake_archive(tmp_path / "run")), flag, value])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("error:") == 1 and message in err


def test_replicas_that_do_not_fit_the_local_ray_are_one_clear_error():
    actor = replica_resources(1.0, 0, Limits())
    check_fits(1, 1, actor, Limits(), {"CPU": 2.0})  # ingress + long-input replica: 2 CPUs
    with pytest.raises(ConfigurationError) as e:
        check_fits(1, 2, actor, Limits(), {"CPU": 2.0})
    assert str(e.value) == ("1 model(s) x (2 replica(s) + 1 long-input replica) x --num-cpus 1 = 3 CPUs, but this Ray "
                            "has 2: lower --num-cpus or --replicas (or --long-input-chars 0)")
    check_fits(1, 2, actor, Limits(long_input_chars=0), {"CPU": 2.0})
    with pytest.raises(ConfigurationError, match=r"x --num-gpus 1 = 2 GPUs, but this Ray has 1"):
        check_fits(1, 1, replica_resources(0.5, 1, Limits()), Limits(), {"CPU": 2.0, "GPU": 1.0})


# ---------------------------------------------------------------------------- processes and sockets (/proc)
def children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        if (fields := proc_stat(entry.name)) and fields[0] != "Z":
            out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def process_tree(pid: int) -> set[int]:
    tree, todo, kids = {pid}, [pid], children()
    while todo:
        for child in kids.get(todo.pop(), []):
            tree.add(child)
            todo.append(child)
    return tree


def listening_sockets() -> dict[str, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket (/proc/net/tcp and tcp6)."""
    out = {}
    for name, size in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            hex_ip, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_ip)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))  # host-order words
            family = socket.AF_INET if size == 4 else socket.AF_INET6
            out[fields[9]] = (socket.inet_ntop(family, raw), int(hex_port, 16))
    return out


def listening_of(pids) -> dict[int, list[tuple[str, int]]]:
    sockets, out = listening_sockets(), {}
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        found = [sockets[link[8:-1]] for link in links if link.startswith("socket:[") and link[8:-1] in sockets]
        if found:
            out[pid] = found
    return out


def is_loopback(address: str) -> bool:
    return address in ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
    except OSError:
        return "?"


# ---------------------------------------------------------------------------- one served model
class Server:
    def __init__(self, run_dir: Path, log: Path, more: tuple = ()):
        self.port = free_port()
        self.log = open(log, "w+")
        env = dict(os.environ, PYTHONPATH=str(ROOT), MULTIGRAIN_QUIET="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "multigrain.platform.cli", "serve", str(run_dir), *map(str, more),
             "--port", str(self.port), *SERVE_FLAGS], stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=run_dir.parent,
            start_new_session=True)  # its own session: every process it starts is found by session id
        self.path = f"/predict/{run_dir.name}"
        deadline = time.time() + 180
        while "serving; Ctrl-C" not in self.output():
            if self.process.poll() is not None or time.time() > deadline:
                self.kill()
                pytest.fail(f"multigrain serve did not start: {self.output()[-3000:]}")
            time.sleep(0.5)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def post(self, body, timeout: float = 120, path: str = "") -> tuple[int, dict, dict]:
        raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", path or self.path, body=raw, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"null"), dict(response.getheaders())
        finally:
            conn.close()

    def kill(self) -> None:
        for pid in in_session(self.process.pid) | alive(process_tree(self.process.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.log.close()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A tiny BiLSTM-CRF, trained once for the module."""
    directory = tmp_path_factory.mktemp("serve_limits")
    run_dir = directory / "tiny"
    spec = write_spec(directory, resume_tagger_spec(directory / "data"))
    assert cli_main(["train", spec, "-s", str(run_dir), "--no-tracking"]) == 0
    return run_dir


def test_a_batch_predicts_what_its_requests_would_one_by_one(tiny_run):
    """Requests that arrive together are predicted in one forward pass (padded to the longest
    text of the batch, lengths masked): each gets the predictions it would get alone."""
    loaded = LoadedArchive(str(tiny_run))
    texts = [SENTENCE, "张三", "现任北京大学教授", SENTENCE * 3, "中国国籍", "1962年出生，中国国籍", "教", "北京" * 40]
    requests = [[{"text": t}] for t in texts] + [[{"text": a}, {"text": b}] for a, b in zip(texts, reversed(texts))]
    alone = [loaded.predict_one_by_one(r) for r in requests]
    assert [p["text"] for p in alone[0]] == [SENTENCE] and len(alone[0][0]["tags"]) == len(SENTENCE)
    sizes, predict_batches = [], loaded.archive.predict_batches

    def recording(examples, batch_size=None):
        sizes.append(len(examples))
        return predict_batches(examples, batch_size)

    loaded.archive.predict_batches = recording
    batcher = Batcher(loaded, max_examples=6)

    async def together():
        return await asyncio.gather(*(batcher.predict(loaded.examples(r)) for r in requests))

    assert asyncio.run(together()) == alone
    assert sum(sizes) == sum(len(r) for r in requests) and max(sizes) > 1  # several texts per forward pass
    assert max(sizes) <= 6


def test_the_most_texts_of_a_forward_pass_come_from_the_environment():
    assert batch_examples({}) == 64 and batch_examples({"MULTIGRAIN_SERVE_MAX_BATCH": "1"}) == 1
    for bad in ("0", "-3", "many", "2.5"):
        with pytest.raises(ConfigurationError, match=f"MULTIGRAIN_SERVE_MAX_BATCH='{bad}': expected a whole number"):
            batch_examples({"MULTIGRAIN_SERVE_MAX_BATCH": bad})


@pytest.fixture(scope="module")
def server(tiny_run):
    """Two models (the tiny run and a copy, ``tiny_b``): each model's ingress replica answers HTTP on
    the same port (``serve_front``), a request for the other model handed over by a handle."""
    import shutil

    run_dir = tiny_run
    copy = run_dir.parent / "tiny_b"
    if not copy.exists():
        shutil.copytree(run_dir, copy)
    served = Server(run_dir, run_dir.parent / "serve.log", more=(copy,))
    yield served
    if served.process.poll() is None:
        served.kill()


def test_answers_and_limits_over_http(server):
    status, body, _ = server.post({"instances": [{"text": SENTENCE}, {"text": "现任北京大学教授"}]})
    assert status == 200 and [p["text"] for p in body["predictions"]] == [SENTENCE, "现任北京大学教授"]
    assert len(body["predictions"][0]["tags"]) == len(SENTENCE)
    status, body, _ = server.post({"instances": [{"text": "字" * 100_001}]})
    assert status == 413 and body["error"] == ("instances[0].text: 100001 characters, over the limit of 100000 "
                                               "characters per text (multigrain serve --max-text-chars)")
    status, body, _ = server.post(b'{"instances": [{"text": "' + b"a" * 1_500_000 + b'"}]}')
    assert status == 413 and body["error"] == ("the body is 1500029 bytes, over the limit of 1500000 bytes "
                                               "(multigrain serve --max-body-bytes)")


def test_both_models_answer_on_the_one_port_whichever_replica_takes_the_connection(server):
    """Every request on a fresh connection: the kernel hands each connection to one of the two
    models' replicas (SO_REUSEPORT), so about half of them are handed over to the other model's
    replica (16 requests: all answered by their own front is a chance of 2**-16)."""
    expected = None
    for n in range(8):
        for path in ("/predict/tiny", "/predict/tiny_b"):
            status, body, _ = server.post({"instances": [{"text": SENTENCE}]}, path=path)
            assert status == 200 and body["predictions"][0]["text"] == SENTENCE, (path, status, body)
            expected = expected or body
            assert body == expected  # the same weights: the same tags
    status, body, _ = server.post({"instances": [{"text": SENTENCE}]}, path="/predict/nothing")
    assert status == 404 and body == {"error": "no model at /predict/nothing: POST /predict/<name>"}


def test_replica_ingress_needs_the_local_ray(tmp_path, capsys):
    code = cli_main(["serve", str(fake_archive(tmp_path / "run")), "--address", "127.0.0.1:1", "--ingress", "replica",
                     "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1
    assert "--ingress replica needs the Ray of this command (no --address)" in err


@pytest.mark.parametrize("body, message", [
    (b'{"instances": [{"text": 5}]}', "instances[0].text: expected a string, got a number"),
    (b'{"instances": [{"text": NaN}]}', "the body is not valid JSON: NaN is not a JSON value"),
    (b'{"instances": [{"text": ["a", "b"]}]}', "instances[0].text: expected a string, got a list"),
    (b'{"instances": [{"text": {"t": "a"}}]}', "instances[0].text: expected a string, got an object"),
    (b'{"instances": [{"text": null}]}', "instances[0].text: expected a string, got null"),
    (b'{"texts": ["a"]}', 'expected a JSON object {"instances": [{"text": "..."}, ...]}: no "instances" key'),
    (b'{"instances": [{"words": "a"}]}', "instances[0]: cannot make an example: "),
    (b"not json", "the body is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    (b'{"instances": [{"text": "\\udfff"}]}', "the body is not valid Unicode: a lone surrogate"),
])
def test_client_errors_are_400_with_a_clear_message(server, body, message):
    status, answer, _ = server.post(body)
    assert status == 400 and answer["error"].startswith(message)


def test_a_short_request_is_answered_while_a_long_one_is_in_flight(server):
    long_text = (SENTENCE * 4000)[:100_000]
    long_request = {"instances": [{"text": long_text}] * 4}  # 400,000 characters: the long-input replica
    done = {}

    def send_long():
        done["status"], answer, _ = server.post(long_request, timeout=170)
        done["n"] = len(answer.get("predictions", []))
        done["at"] = time.time()

    started = time.time()
    thread = threading.Thread(target=send_long)
    thread.start()
    time.sleep(0.5)  # the long request is being read, checked and predicted
    latencies = []
    for _ in range(5):
        t = time.time()
        status, body, _ = server.post({"instances": [{"text": "张三"}]})
        latencies.append(time.time() - t)
        assert status == 200 and body["predictions"][0]["text"] == "张三"
    short_done = time.time()
    thread.join(180)
    assert done["status"] == 200 and done["n"] == 4
    long_seconds = done["at"] - started
    print(f"short latencies {[round(x, 3) for x in latencies]}, long {long_seconds:.2f} s")
    assert done["at"] > short_done  # the short requests were answered while the long one ran
    assert max(latencies) < 1.5 and max(latencies) < long_seconds / 3, (latencies, long_seconds)


def test_every_process_listens_on_loopback_and_is_gone_10_s_after_the_stop(server):
    session = in_session(server.process.pid)
    tree = alive(process_tree(server.process.pid))
    assert tree <= session and len(tree) >= 8  # CLI, GCS, raylet, agents, Serve controller, proxy, replicas
    listening = listening_of(session)
    ports = {port for found in listening.values() for _, port in found}
    assert server.port in ports and len(listening) >= 8
    exposed = {f"{pid} {command_of(pid)}": found for pid, found in listening.items()
               if not all(is_loopback(address) for address, _ in found)}
    assert not exposed
    stopped = time.time()
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(10) == 0
    while alive(session) and time.time() < stopped + 10:
        time.sleep(0.2)
    left = {pid: command_of(pid) for pid in alive(session) | in_session(server.process.pid)}
    assert not left, left
    assert "Traceback" not in server.output() and "SIGTERM received" not in server.output()


def test_serve_stopped_while_starting_says_interrupted(tmp_path, capsys, monkeypatch):
    """Ctrl-C or SIGTERM before 'serving': exit 130 and 'interrupted' (it exited 0, as if it had served)."""
    from multigrain.platform.commands import serve as serve_command
    from multigrain.platform.ray import cluster, serve

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    stopped = []
    monkeypatch.setattr(cluster, "connect", lambda *args, **kwargs: False)
    monkeypatch.setattr(cluster, "cluster_resources", lambda: {"CPU": 2.0, "memory": 8e9})
    monkeypatch.setattr(serve, "check_fits", lambda *args: None)
    monkeypatch.setattr(serve, "start_service", interrupted)
    monkeypatch.setattr(serve_command, "stop", lambda started, local: stopped.append(started))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = cli_main(["serve", str(fake_archive(tmp_path / "run")), "--port", str(free_port())])
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    err = capsys.readouterr().err
    assert code == 130 and err.strip() == "interrupted" and stopped == [False]
