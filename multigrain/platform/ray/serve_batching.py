"""The request path of an ingress replica of ``multigrain serve`` (``serve.py`` deploys it):
the bounds of a request and its parsing (``Limits``, ``read_body``, ``parse_instances``: 4xx with
one clear message, never a 5xx) and the batching of the requests that arrive together into one
forward pass (``Batcher``).

Batching is continuous: while the model predicts one batch, the requests that arrive wait, and the
next call takes all of them (up to ``max_examples`` texts) as soon as the model is free. Ray
Serve's ``@serve.batch`` was measured in its place and is not used: it closes a batch
``batch_wait_timeout_s`` after the batch's first request and queues it behind the running one, so
its batches are smaller; on the benchmark's BiLSTM-CRF (two shared cores, 32 clients of short
texts, ``benchmarks/serve_load.py``) the replica spent 38 % more CPU per request with a 5 ms wait
(6 to 37 % more with 20 ms) and the p99 was no lower. A batch predicts what its requests would
one by one (``predict_batches`` pads per batch and masks the lengths; the tests compare them).
``MULTIGRAIN_SERVE_MAX_BATCH`` in the environment of ``multigrain serve`` sets the most texts of a
forward pass (default 64; 1: no batching, each request's texts alone, as the benchmark compares).

Most of a short request's cost is Serve's, not the model's: on that benchmark the proxy spends
3.5-4 ms of CPU per request and the replica 4-5 ms, of which the forward pass is ~2 ms. Serve's gRPC
transport between proxy and replicas (``RAY_SERVE_PROXY_USE_GRPC=1``) cut that in most runs with
short requests alone, but with a client of 14,000-character texts beside them (answers of
~100 KB on the same connection) the short requests' p99 was higher than with Ray actor calls in
6 of 7 paired runs, so Serve's default (actor calls) is kept; the benchmark measures both.
"""
from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from multigrain.platform.digits import ascii_digits, whole_number
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.jsonio import too_long_number

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


class _NotJson(ValueError):
    pass


def _no_constant(name: str):  # NaN, Infinity, -Infinity
    raise _NotJson(f"{name} is not a JSON value")


def check_declared_length(declared: str, limit: int) -> None:
    """A request's Content-Length: 400 when it is no number, 413 when it is over ``limit`` bytes."""
    digits = declared.strip()
    if not ascii_digits(digits):
        raise RequestError(400, f"Content-Length {declared!r} is not a number of bytes")
    size = whole_number(digits, max_digits=19)
    if size is None or size > limit:
        shown = "more than 10^19" if size is None else size
        raise RequestError(413, f"the body is {shown} bytes, over the limit of {limit} bytes "
                                f"(multigrain serve --max-body-bytes)")


async def read_body(request, limit: int) -> bytes:
    """The body, refused (413) as soon as it is known to be over ``limit`` bytes: from its
    Content-Length before reading anything, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None:
        check_declared_length(declared, limit)
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
    except (json.JSONDecodeError, UnicodeDecodeError, _NotJson) as e:
        raise RequestError(400, f"the body is not valid JSON: {e}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise RequestError(400, f"the body is not valid JSON: {too_long_number()}") from None
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


MAX_BATCH_ENV = "MULTIGRAIN_SERVE_MAX_BATCH"


def batch_examples(environ=os.environ) -> int:
    """The most texts of one forward pass of an ingress replica: ``MULTIGRAIN_SERVE_MAX_BATCH``, 64
    when unset (read by ``multigrain serve``, which hands it to the replicas)."""
    text = environ.get(MAX_BATCH_ENV, "").strip() or "64"
    examples = whole_number(text, max_digits=9)
    if not examples:
        raise ConfigurationError(f"{MAX_BATCH_ENV}={text!r}: expected a whole number of texts, at least 1")
    return examples
