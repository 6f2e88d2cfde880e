"""A bounded, metered HTTP transport: every request timed and counted by endpoint and status.

At most `slots` claims and `slots` other requests are in flight at once, so httpcore's pool
(2 * `slots` keep-alive connections) never queues: its per-request scan stays O(slots) however
many users share the process. Claims and reports have separate slots because a claim may be held
by the server (`?wait=`) until a report frees an episode: reports must never wait behind claims.
A secure-aggregation cohort's long polls (`?wait=` on its rounds) have a lane of their own, a slot
for each user (each holds at most one): a poll waits for the other members' messages, which must
never wait behind it. That lane's connections are split over pools of POLL_SHARD each, so that
no pool's scan grows with the users either.
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
POLL_SHARD = 16  # long-poll connections per pool
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
    """httpx's transport behind three semaphores (claims, long polls, the rest), timing every
    request."""

    def __init__(self, slots: int, meter: Meter | None = None,
                 inner: httpx.AsyncBaseTransport | None = None, polls: int | None = None
                 ) -> None:
        """`slots` claims and `slots` other requests in flight at most, over 2 * `slots`
        connections, and `polls` long polls (default `slots`; the users of the process) over
        as many connections of their own (`inner`: the transport to send all through, by
        default httpx's own pools of those sizes)."""
        polls = slots if polls is None else polls
        if slots < 1 or polls < 1:
            raise ValueError("a bounded transport needs at least one slot")
        self.meter = meter or Meter()
        self.claims, self.others = asyncio.Semaphore(slots), asyncio.Semaphore(slots)
        self.inner = inner or httpx.AsyncHTTPTransport(limits=_limits(2 * slots))
        sizes = [min(POLL_SHARD, polls - k) for k in range(0, polls, POLL_SHARD)]
        self.polls = [(asyncio.Semaphore(n), inner or httpx.AsyncHTTPTransport(limits=_limits(n)))
                      for n in sizes]

    def _lane(self, request: httpx.Request, endpoint: str
              ) -> tuple[asyncio.Semaphore, httpx.AsyncBaseTransport]:
        """A request's semaphore and the pool it goes through: a long poll takes a shard with
        a free slot (the first one when all are busy)."""
        if endpoint != "claim" and "wait" in request.url.params:
            return next((p for p in self.polls if not p[0].locked()), self.polls[0])
        return (self.claims if endpoint == "claim" else self.others), self.inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Wait for a slot, send, read the whole body (the connection is free again), record."""
        endpoint = endpoint_of(request.url.path)
        lane, inner = self._lane(request, endpoint)
        async with lane:
            t0 = time.perf_counter()
            try:
                response = await inner.handle_async_request(request)
                await response.aread()
            except httpx.HTTPError as exc:
                self.meter.record(endpoint, 0, time.perf_counter() - t0, type(exc).__name__)
                raise
            self.meter.record(endpoint, response.status_code, time.perf_counter() - t0)
        return response

    async def aclose(self) -> None:
        """Close the pools."""
        await self.inner.aclose()
        for _, pool in self.polls:
            if pool is not self.inner:
                await pool.aclose()


def _limits(connections: int) -> httpx.Limits:
    return httpx.Limits(max_connections=connections, max_keepalive_connections=connections,
                        keepalive_expiry=CLIENT_KEEPALIVE_SECONDS)
