"""Request body size limit (413 with a message) as a pure ASGI middleware.

A declared Content-Length above the limit is refused before anything is read. A body without a
length (chunked) is read up to the limit and refused as soon as it goes over; under the limit it
is handed on unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from privrl.server.errors import error_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    """Refuse request bodies larger than `max_bytes` with 413 (and malformed lengths with 400)."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, on_refused: Callable[[Scope], None] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = int(max_bytes)
        self.on_refused = on_refused

    def _too_large(self, scope: Scope, size: str) -> ASGIApp:
        """The 413 answer (and the refusal callback, e.g. for metrics)."""
        if self.on_refused is not None:
            self.on_refused(scope)
        return error_response(
            413,
            f"request body too large: {size} bytes, the limit is {self.max_bytes} bytes"
            " (PRIVRL_MAX_BODY_BYTES)",
            code="too_large",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
                if length < 0:
                    raise ValueError
            except ValueError:
                await error_response(400, "invalid Content-Length header", code="malformed")(
                    scope, receive, send
                )
                return
            if length > self.max_bytes:
                await self._too_large(scope, str(length))(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        # No declared length: buffer up to the limit, then replay the body to the app.
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, f"more than {self.max_bytes}")(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        await self.app(scope, _replay([{"type": "http.request", "body": body}], receive), send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive callable that yields `messages` first, then defers to the real one."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
