"""Admission control and overload answers: a claim is only handed out if it can be reported in time.

A report is late only if it *arrives* after its claim lapsed (the server's own queueing never
makes it late), so what can make it late is the time between the claim and the report's arrival:
the user's turnaround (waiting for its answer, playing, randomizing, sending), which grows when
the users' machines, or their load generator, have too many episodes in hand. The server watches
the turnaround of every report and keeps a window of outstanding claims per run, as TCP keeps a
congestion window: it starts open (`max_outstanding`), halves (at most once per half the target)
for a report that arrives later than `queue_fraction` of the claim timeout after its claim or a
claim that lapses, never below `min_outstanding`, and widens by one for every timely report. A
claim beyond the window waits (up to its `?wait=`, at most `max_waiting` claims per run, in
arrival order) for a report to free a slot, else is answered 429 with a `Retry-After` of the
expected wait. Everything here is O(1)
per request in the number of users.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from privrl.server.errors import Refusal


@dataclass(frozen=True)
class RunLimits:
    """The per-run limits of a server (`Settings.run_limits`: the settings are their one home)."""

    claim_timeout: float
    min_outstanding: int
    max_outstanding: int
    queue_fraction: float
    max_waiting: int
    plan_interval: float
    inline_entries: int = 16_384  # runs up to this size are served on the event loop
    window: float = 5.0  # seconds of reports the throughput is measured over
    per_address: int = 256  # claims outstanding per client address (runs without credentials)
    per_credential: int = 4  # claims outstanding per user credential (runs that require them)


class Throughput:
    """Events per second over the last `window` seconds (amortized O(1) per event)."""

    def __init__(self, window: float) -> None:
        self.window = float(window)
        self.times: deque[float] = deque()
        self.first: float | None = None

    def add(self, now: float) -> None:
        """Record one event at time `now`."""
        if self.first is None:
            self.first = now
        self.times.append(now)
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.times and self.times[0] <= now - self.window:
            self.times.popleft()

    def rate(self, now: float) -> float:
        """Events per second (over the time observed so far when younger than the window)."""
        self._trim(now)
        if self.first is None:
            return 0.0
        span = min(self.window, max(now - self.first, 1.0))
        return len(self.times) / span


class Admission:
    """How many claims of one run may be outstanding now (an AIMD window on the turnaround of
    reports), and the refusal beyond it."""

    def __init__(self, limits: RunLimits) -> None:
        self.limits = limits
        self.reports = Throughput(limits.window)
        self.window = float(limits.max_outstanding)  # open until reports come late
        self.target = limits.queue_fraction * limits.claim_timeout  # seconds claim -> report
        self.last_cut = -math.inf
        self.waiting = 0  # claims of this run waiting for a slot right now

    def reported(self, turnaround: float, now: float) -> None:
        """A report arrived `turnaround` seconds after its claim: widen or narrow the window."""
        self.reports.add(now)
        if turnaround <= self.target:
            self.window = min(float(self.limits.max_outstanding), self.window + 1.0)
        else:
            self.narrow(now)

    def narrow(self, now: float) -> None:
        """Halve the window (a late report or a lapsed claim), at most once per target / 2."""
        if now - self.last_cut >= self.target / 2:
            self.window = max(float(self.limits.min_outstanding), self.window / 2)
            self.last_cut = now

    def limit(self, now: float) -> int:
        """The outstanding claims this run admits now."""
        return int(self.window)

    def admits(self, outstanding: int, now: float) -> bool:
        """Whether one more claim can be handed out."""
        return outstanding < self.limit(now)

    def retry_after(self, now: float) -> int:
        """Whole seconds until a slot is expected to be free for a refused claimant: the claims
        waiting ahead of it over the report rate (1 .. half the claim timeout)."""
        rate = self.reports.rate(now)
        wait = (self.waiting + 1) / rate if rate > 0 else 1.0
        return int(min(max(1, math.ceil(wait)), max(1, self.limits.claim_timeout // 2)))

    def refusal(self, run_id: str, outstanding: int, now: float) -> Refusal:
        """The 429 answer of a claim this run cannot admit now."""
        wait = self.retry_after(now)
        return Refusal(
            429,
            "admission",
            f"run {run_id} has {outstanding} claims outstanding, as many as its users report"
            f" in time now; nothing was claimed, retry after {wait} s",
            {"Retry-After": str(wait)},
        )


MAX_TRACKED = 4096  # client addresses whose read rate is remembered before the full are dropped


class InFlight:
    """A bound on the claims and reports a server handles at once (503 beyond it).

    Reports get twice the room of claims: a refused report is an episode played for nothing,
    and admission control already bounds them by the outstanding claims.
    """

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.count = 0

    def enter(self, report: bool) -> None:
        """Take a place, or raise the 503 overload refusal."""
        room = 2 * self.limit if report else self.limit
        if self.count >= room:
            raise Refusal(
                503,
                "overloaded",
                f"the server is handling {self.count} claims and reports at once, its limit"
                " (PRIVRL_MAX_IN_FLIGHT); nothing was done, retry after 1 s",
                {"Retry-After": "1"},
            )
        self.count += 1

    def leave(self) -> None:
        """Give a place back."""
        self.count -= 1


class ReadSlots:
    """Public reads per client address: at most `limit` answered at once, and at most `rate`
    per second on average (bursts of `2 * rate`). A read beyond either waits its turn, and a
    reader sends no new request meanwhile, so one client looping over the public views gets a
    bounded share of the server whatever the number of its connections (a waiting read costs
    nothing but its socket)."""

    def __init__(self, limit: int, rate: float) -> None:
        self.limit = int(limit)
        self.rate = float(rate)
        self.burst = 2.0 * self.rate
        self.slots: dict[str, tuple[asyncio.Semaphore, int]] = {}  # key -> (slots, users)
        self.buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when counted)

    def _delay(self, key: str, now: float) -> float:
        """Take one of `key`'s tokens; the seconds to wait until it is there."""
        tokens, then = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate) - 1.0
        self.buckets[key] = (tokens, now)
        if len(self.buckets) > 4 * MAX_TRACKED:  # forget addresses whose bucket is full again
            self.buckets = {k: (t, w) for k, (t, w) in self.buckets.items()
                            if t + (now - w) * self.rate < self.burst}
        return max(0.0, -tokens / self.rate)

    @asynccontextmanager
    async def held(self, key: str) -> AsyncIterator[None]:
        """Hold one of `key`'s slots (waiting for it, and for its rate) during the block."""
        slots, users = self.slots.get(key) or (asyncio.Semaphore(self.limit), 0)
        self.slots[key] = (slots, users + 1)
        try:
            async with slots:
                delay = self._delay(key, time.monotonic())
                if delay > 0:
                    await asyncio.sleep(delay)
                yield
        finally:
            slots, users = self.slots[key]
            if users == 1:
                del self.slots[key]  # nobody holds or waits: forget its slots
            else:
                self.slots[key] = (slots, users - 1)
