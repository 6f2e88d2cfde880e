"""Bounded request bodies, as a pure ASGI middleware: a size cap, a deadline and a memory budget.

Every body is read here, before the app sees it, into one buffer:

* **Size.** A declared Content-Length above the cap is refused with 413 before anything is read;
  a body without a length (chunked) is refused as soon as it goes over. The cap is
  PRIVRL_MAX_BODY_BYTES, or less for a route that says so (`limit_of`): a report is a
  fixed-size function of its run's public config (`max_report_bytes`).
* **Time.** The whole body must arrive within PRIVRL_BODY_TIMEOUT seconds of its headers, else
  408 and the connection is closed: a client that stalls half-way holds nothing for longer.
* **Memory.** The bodies being received and handled hold at most PRIVRL_MAX_BODY_BUFFER_BYTES at
  once (a declared length is reserved up front, a chunked body as it arrives); beyond, 503 with
  Retry-After, before anything is read. A body is read into one preallocated buffer, not a list
  of chunks, and handed on as one bytes object.

A refusal answers with `Connection: close`: the rest of the body is never read. A client that
disconnects mid-body is dropped without calling the app.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.server.errors import error_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The longest a number takes in a JSON report ("-1.2345678901234567e-300" is 24 characters)
# plus its separator and some indentation: a report of n numbers has at most this many bytes
# per number, plus REPORT_SLACK_BYTES for its ticket, field names and kind.
JSON_BYTES_PER_NUMBER = 32
REPORT_SLACK_BYTES = 4096

# A route's own cap: (bytes, what it caps, e.g. "a report of run 1f2e").
Limit = tuple[int, str]


def report_numbers(config: RunConfig) -> int:
    """How many numbers one report of a run carries at most (its public config alone): its
    trust boundary's answer (`TrustBoundary.report_numbers`), e.g. a raw trajectory's 3H+1, a
    policy evaluation's S (state, return) pairs, an LDP report's every released array."""
    return config.boundary.report_numbers(bind(config))


def max_report_bytes(config: RunConfig) -> int:
    """The largest body a report of this run can legitimately have (JSON arrays, indented)."""
    return report_numbers(config) * JSON_BYTES_PER_NUMBER + REPORT_SLACK_BYTES


class Budget:
    """Bytes of request bodies held at once, across every request (one event loop: no lock)."""

    def __init__(self, total: int) -> None:
        self.total = int(total)
        self.held = 0

    def take(self, size: int) -> bool:
        """Reserve `size` bytes; False (nothing reserved) when they do not fit."""
        if self.held + size > self.total:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Release bytes taken before."""
        self.held -= size


class Refused(Exception):
    """A body refused while it was read: its answer."""

    def __init__(self, answer: ASGIApp) -> None:
        super().__init__()
        self.answer = answer


class BodyLimit:
    """Cap, time and budget every request body (see the module); the app gets it in one piece."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, timeout: float, max_buffered: int,
        limit_of: Callable[[Scope], Limit | None] | None = None,
        on_refused: Callable[[Scope], None] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = int(max_bytes)
        self.timeout = float(timeout)
        self.budget = Budget(max_buffered)
        self.limit_of = limit_of
        self.on_refused = on_refused

    def _limit(self, scope: Scope) -> Limit:
        """This request's cap: the route's own, else PRIVRL_MAX_BODY_BYTES."""
        own = self.limit_of(scope) if self.limit_of is not None else None
        if own is not None and own[0] < self.max_bytes:
            return own
        return self.max_bytes, "any request (PRIVRL_MAX_BODY_BYTES)"

    def _too_large(self, scope: Scope, size: str, limit: Limit) -> ASGIApp:
        """The 413 answer (and the refusal callback, e.g. for metrics)."""
        if self.on_refused is not None:
            self.on_refused(scope)
        return _closing(413, f"request body too large: {size} bytes; at most {limit[0]} bytes"
                        f" for {limit[1]}", "too_large")

    def _busy(self) -> ASGIApp:
        """The 503 answer when the bodies in flight already hold the whole budget."""
        return _closing(503, f"the server holds {self.budget.total} bytes of request bodies"
                        " at once (PRIVRL_MAX_BODY_BUFFER_BYTES) and they are in use; retry",
                        "overloaded", {"Retry-After": "1"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        length: int | None = None
        if declared is not None:
            try:
                length = int(declared)
                if length < 0:
                    raise ValueError
            except ValueError:
                await _closing(400, "invalid Content-Length header", "malformed")(
                    scope, receive, send)
                return
        if (length == 0 or length is None) and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        limit = self._limit(scope)
        if length is not None and length > limit[0]:
            await self._too_large(scope, str(length), limit)(scope, receive, send)
            return
        reserved = [0]
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    body = await self._read(scope, receive, length, limit, reserved)
            except TimeoutError:
                answer = _closing(408, f"request body not received within {self.timeout:g} s"
                                  " (PRIVRL_BODY_TIMEOUT)", "timeout")
                await answer(scope, receive, send)
                return
            except Refused as refused:
                await refused.answer(scope, receive, send)
                return
            if body is None:  # the client left mid-body: nobody to answer
                return
            await self.app(scope, _replay({"type": "http.request", "body": body}, receive), send)
        finally:
            self.budget.give(reserved[0])

    async def _read(self, scope: Scope, receive: Receive, length: int | None, limit: Limit,
                    reserved: list[int]) -> bytes | None:
        """The whole body in one buffer (None: the client disconnected). The bytes it holds are
        reserved from the budget first and counted in `reserved` (released by the caller)."""
        if length is not None:
            if not self.budget.take(length):
                raise Refused(self._busy())
            reserved[0] = length
        buffer = bytearray(length or 0)
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            end = size + len(chunk)
            if length is not None and end > length:
                raise Refused(_closing(400, f"request body longer than its declared {length}"
                                       " bytes", "malformed"))
            if end > limit[0]:
                raise Refused(self._too_large(scope, f"more than {limit[0]}", limit))
            if length is None:
                if not self.budget.take(len(chunk)):
                    raise Refused(self._busy())
                reserved[0] += len(chunk)
                buffer += chunk
            else:
                buffer[size:end] = chunk
            size = end
            more = message.get("more_body", False)
        if length is not None and size < length:
            raise Refused(_closing(400, f"request body ended after {size} of its {length}"
                                   " declared bytes", "malformed"))
        return bytes(buffer)


def _closing(status: int, detail: str, code: str,
             headers: dict[str, str] | None = None) -> ASGIApp:
    """An error answer after which the server closes the connection (the body is not read)."""
    return error_response(status, detail, {**(headers or {}), "Connection": "close"}, code)


def _replay(message: Message, receive: Receive) -> Receive:
    """A receive callable that yields `message` first, then defers to the real one."""
    pending = [message]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
