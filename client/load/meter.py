"""A bounded, metered HTTP transport: every request timed and counted by endpoint and status.

At most `slots` claims and `slots` other requests are in flight at once, so httpcore's pool
(2 * `slots` keep-alive connections) never queues: its per-request scan stays O(slots) however
many users share the process. Claims and reports have separate slots because a claim may be held
by the server (`?wait=`) until a report frees an episode: reports must never wait behind claims.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import MutableSequence
from dataclasses import dataclass, field

import httpx
import numpy as np
from privrl.protocol import CLIENT_KEEPALIVE_SECONDS

ENDPOINTS = ("claim", "report", "healthz", "other")
ACKS, REQUESTS, ERRORS = 0, 1, 2  # slots of one process's live counters
COUNTERS = 3
FLOW = {409: "claim_waits_409", 410: "claims_after_finish_410"}  # a claim's answers that are
# flow control, not errors: every episode is claimed (wait, retry), the run is finished (stop)


def endpoint_of(path: str) -> str:
    """The endpoint a request path belongs to (the last path segment names it)."""
    tail = path.rstrip("/").rsplit("/", 1)[-1]
    return {"claims": "claim", "reports": "report", "healthz": "healthz"}.get(tail, "other")


@dataclass
class Meter:
    """Every request of one process: when it ended, endpoint, status (0: no answer), seconds.

    `errors` counts every answer >= 400 and every transport failure by kind ("report 410");
    the live error counter leaves out a claim's 409 and 410 (`FLOW`)."""

    ended: list[float] = field(default_factory=list)
    endpoint: list[int] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    live: MutableSequence[int] | None = None  # counters shared with a parent process
    base: int = 0  # this process's [acks, requests, errors] are live[base:base + 3]

    def record(self, endpoint: str, status: int, seconds: float, error: str | None = None) -> None:
        """Count one finished request (an error: HTTP status >= 400 or a transport failure)."""
        self.ended.append(time.time())
        self.endpoint.append(ENDPOINTS.index(endpoint))
        self.status.append(status)
        self.seconds.append(seconds)
        failed = error is not None or status >= 400
        if failed:
            self.errors[f"{endpoint} {error or status}"] += 1
        failed = failed and not (endpoint == "claim" and status in FLOW)
        if self.live is not None:
            self.live[self.base + REQUESTS] += 1
            self.live[self.base + ERRORS] += int(failed)
            self.live[self.base + ACKS] += int(endpoint == "report" and status == 200)

    def arrays(self) -> dict[str, np.ndarray]:
        """The samples as numpy arrays (what a child process sends back)."""
        return {"ended": np.asarray(self.ended, float), "endpoint": np.asarray(self.endpoint, int),
                "status": np.asarray(self.status, int), "seconds": np.asarray(self.seconds, float)}


class BoundedTransport(httpx.AsyncBaseTransport):
    """httpx's transport behind two semaphores (claims, the rest), timing every request."""

    def __init__(self, slots: int, meter: Meter | None = None,
                 inner: httpx.AsyncBaseTransport | None = None) -> None:
        """`slots` requests of each kind in flight at most, over 2 * `slots` connections
        (`inner`: the transport to send through, httpx's own pool of that size by default)."""
        if slots < 1:
            raise ValueError("a bounded transport needs at least one slot")
        self.meter = meter or Meter()
        self.claims, self.others = asyncio.Semaphore(slots), asyncio.Semaphore(slots)
        limits = httpx.Limits(max_connections=2 * slots, max_keepalive_connections=2 * slots,
                              keepalive_expiry=CLIENT_KEEPALIVE_SECONDS)
        self.inner = inner or httpx.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Wait for a slot, send, read the whole body (the connection is free again), record."""
        endpoint = endpoint_of(request.url.path)
        async with self.claims if endpoint == "claim" else self.others:
            t0 = time.perf_counter()
            try:
                response = await self.inner.handle_async_request(request)
                await response.aread()
            except httpx.HTTPError as exc:
                self.meter.record(endpoint, 0, time.perf_counter() - t0, type(exc).__name__)
                raise
            self.meter.record(endpoint, response.status_code, time.perf_counter() - t0)
        return response

    async def aclose(self) -> None:
        """Close the pool."""
        await self.inner.aclose()
