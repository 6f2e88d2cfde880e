"""Request bodies are bounded in size, time and memory (`privrl.server.limits.BodyLimit`), in
process: a fake ASGI app behind the middleware, and receive callables that stall or count."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import pytest
from privrl.server.limits import BodyLimit, max_report_bytes
from privrl.server.settings import Settings
from pydantic import ValidationError
from starlette.types import Message, Receive, Scope, Send
from support.server import Apps, claim, create, public, spec, user_report, world


def scope(length: int | None = None, chunked: bool = False, path: str = "/v1/runs") -> Scope:
    """An HTTP POST scope declaring `length` body bytes (or a chunked body)."""
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    return {"type": "http", "method": "POST", "path": path, "headers": headers}


class Recorder:
    """A fake app that reads the body it is handed and answers 200; what it saw."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "http.request" and not message.get("more_body", False)
        self.bodies.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def feeding(*chunks: bytes, then: Callable[[], Awaitable[Message]] | None = None) -> Receive:
    """A receive that yields `chunks` (the last one ending the body unless `then` follows),
    then awaits `then` (e.g. a stall) for every later call."""
    pending = list(chunks)
    calls = [0]

    async def receive() -> Message:
        calls[0] += 1
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk,
                    "more_body": bool(pending) or then is not None}
        if then is None:
            raise AssertionError("the body was read past its end")
        return await then()

    receive.calls = calls  # type: ignore[attr-defined]
    return receive


async def forever() -> Message:
    """A client that stalls: no more bytes, ever."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def answer(middleware: BodyLimit, request: Scope, receive: Receive) -> tuple[int, dict, dict]:
    """Status, headers and JSON body the middleware's request gets."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(middleware(request, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, (json.loads(body) if start["status"] != 200 else {})


def limit(app: Recorder, **kw: float) -> BodyLimit:
    """The middleware with small limits (overridable)."""
    args = {"max_bytes": 1000, "timeout": 0.2, "max_buffered": 3000, **kw}
    return BodyLimit(app, **args)  # type: ignore[arg-type]


def test_a_stalled_body_is_answered_408_and_releases_its_memory() -> None:
    app = Recorder()
    middleware = limit(app)
    started = time.monotonic()
    status, headers, body = answer(middleware, scope(800), feeding(b"x" * 400, then=forever))
    assert time.monotonic() - started < 2.0  # 0.2 s timeout; generous for a busy machine
    assert status == 408 and body["code"] == "timeout" and "0.2 s" in body["detail"]
    assert headers["connection"] == "close"
    assert app.bodies == [] and middleware.budget.held == 0


def test_a_declared_length_over_the_cap_is_refused_unread() -> None:
    app = Recorder()
    receive = feeding(then=forever)
    status, headers, body = answer(limit(app), scope(1001), receive)
    assert status == 413 and body["code"] == "too_large"
    assert "1001 bytes; at most 1000 bytes for any request" in body["detail"]
    assert headers["connection"] == "close"
    assert receive.calls[0] == 0 and app.bodies == []  # type: ignore[attr-defined]


def test_a_chunked_body_is_refused_once_over_the_cap() -> None:
    app = Recorder()
    receive = feeding(*[b"y" * 300] * 4, then=forever)
    status, _, body = answer(limit(app), scope(chunked=True), receive)
    assert status == 413 and "more than 1000" in body["detail"]
    assert receive.calls[0] == 4 and app.bodies == []  # type: ignore[attr-defined]


def test_a_route_cap_below_the_global_one_applies() -> None:
    app = Recorder()
    middleware = limit(app, limit_of=lambda s: (500, "a report of run r1"))
    status, _, body = answer(middleware, scope(600), feeding(then=forever))
    assert status == 413 and "at most 500 bytes for a report of run r1" in body["detail"]


def test_the_app_gets_the_body_in_one_piece() -> None:
    app = Recorder()
    middleware = limit(app)
    status, _, _ = answer(middleware, scope(9), feeding(b"abc", b"def", b"ghi"))
    assert status == 200 and app.bodies == [b"abcdefghi"] and middleware.budget.held == 0
    status, _, _ = answer(middleware, scope(chunked=True), feeding(b"ab", b"cd"))
    assert status == 200 and app.bodies[-1] == b"abcd" and middleware.budget.held == 0


def test_bodies_beyond_the_buffer_budget_get_503_and_the_budget_comes_back() -> None:
    app = Recorder()
    middleware = limit(app, max_buffered=1500)

    async def both() -> list[Message]:
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        first = asyncio.ensure_future(middleware(scope(1000), feeding(b"a", then=forever), send))
        await asyncio.sleep(0.01)
        assert middleware.budget.held == 1000
        await middleware(scope(600), feeding(then=forever), send)  # does not fit: 503 at once
        await first  # its timeout
        return sent

    statuses = [m["status"] for m in asyncio.run(both()) if m["type"] == "http.response.start"]
    assert statuses == [503, 408] and middleware.budget.held == 0


def test_a_client_that_leaves_mid_body_is_dropped() -> None:
    app = Recorder()
    middleware = limit(app)

    async def gone() -> Message:
        return {"type": "http.disconnect"}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(middleware(scope(800), feeding(b"x" * 100, then=gone), send))
    assert sent == [] and app.bodies == [] and middleware.budget.held == 0


def test_a_buffer_smaller_than_one_body_is_a_settings_error() -> None:
    with pytest.raises(ValidationError, match="below max_body_bytes"):
        Settings(max_body_bytes=4096, max_body_buffer_bytes=2048)


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_an_honest_report_in_its_longest_form_fits_its_runs_cap(apps: Apps, privacy: str) -> None:
    """A report as indented JSON arrays of 17-digit numbers is accepted, not cut by the cap."""
    config = spec(privacy)
    client = apps()
    run_id = create(client, config)
    report = user_report(claim(client, run_id), config, world(config))
    long = json.dumps(report, indent=2)
    assert len(long) <= max_report_bytes(public(config))
    resp = client.post(f"/v1/runs/{run_id}/reports", content=long,
                       headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
