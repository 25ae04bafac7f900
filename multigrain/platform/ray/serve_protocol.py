"""The HTTP/1.1 protocol of the serve front (``serve_front.py``): uvicorn's httptools protocol with
the limits the front's ASGI app cannot set, because they apply before a request reaches it.

- The request line and headers together hold at most ``MAX_HEAD_BYTES``; a request still in its
  head past that is answered 431 and closed (uvicorn buffers a head of any size: a header of
  200 MiB was read whole and answered 200).
- A head must be complete within ``HEAD_TIMEOUT_S`` of the connection (or of the request's first
  byte on a kept-alive one); else 408 and the connection is closed (uvicorn's timeouts start only
  once a head is complete or a response was sent, so a client that never finished one held its
  connection for ever).
- A request the parser cannot read (a bad Content-Length, an unknown method, bad framing) is
  answered 400 in JSON, as every other client error of the server (uvicorn answers text/plain).

Every such answer is ``{"error": ...}`` with ``connection: close``.
"""
from __future__ import annotations

import json
from typing import Optional

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_S = 30.0
LINGER_S = 2.0

_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with a bounded head (size and time) and JSON for the parser's 400."""

    head_bytes_limit = MAX_HEAD_BYTES
    head_timeout_s = HEAD_TIMEOUT_S

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_head, self._head_bytes, self._head_timer, self._refused = True, 0, None, False
        self._arm_head_timer()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:  # answered: what the client still sends is read and dropped (see _refuse)
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.head_bytes_limit and not self.transport.is_closing():
            self._refuse(431, f"the request line and headers are over the limit of {self.head_bytes_limit} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self._in_head:  # the next request on a kept-alive connection: its head is timed too
            self._in_head, self._head_bytes = True, 0
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "not an HTTP/1.1 request this server can read (its request line, headers or framing: "
                          "Content-Length, Transfer-Encoding)")

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            self._refuse(408, f"the request line and headers did not arrive within {self.head_timeout_s:g} s")

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` and end the connection the way that lets the client read the answer: our
        side is shut for writing after it, what the client still sends is read and dropped for up to
        ``LINGER_S``, then the connection is closed (closing at once, with the client's bytes unread,
        would reset the connection and lose the answer)."""
        self._cancel_head_timer()
        self._refused = True
        body = json.dumps({"error": message}).encode("utf-8")
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()
