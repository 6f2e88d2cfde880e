"""Admission control and overload answers: a claim is only handed out if it can be reported in time.

A report sent now is counted after the reports already claimed ahead of it. By Little's law that
takes about `outstanding / throughput` seconds, so a run admits at most
`throughput * queue_fraction * claim_timeout` outstanding claims (never fewer than
`min_outstanding`, never more than `max_outstanding`): the reports of admitted claims are counted
within a fraction of the claim timeout even when every one of them arrives at once. Throughput is
the run's counted reports per second over a sliding window. A claim beyond the limit waits (up to
its `?wait=`, at most `max_waiting` claims per run) for a report to free a slot, else is answered
429 with a `Retry-After`. Everything here is O(1) per request in the number of users.
"""

from __future__ import annotations

import math
from collections import deque
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
    inline_cells: int
    window: float = 5.0  # seconds of reports the throughput is measured over


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
    """How many claims of one run may be outstanding now, and the refusal beyond it."""

    def __init__(self, limits: RunLimits) -> None:
        self.limits = limits
        self.reports = Throughput(limits.window)
        self.waiting = 0  # claims of this run waiting for a slot right now

    def limit(self, now: float) -> int:
        """The outstanding claims this run admits at its current throughput."""
        lim = self.limits
        budget = self.reports.rate(now) * lim.queue_fraction * lim.claim_timeout
        return int(min(lim.max_outstanding, max(lim.min_outstanding, math.floor(budget))))

    def admits(self, outstanding: int, now: float) -> bool:
        """Whether one more claim can be handed out."""
        return outstanding < self.limit(now)

    def retry_after(self, now: float) -> int:
        """Whole seconds after which a refused claimant should try again (1..claim timeout/4)."""
        rate = self.reports.rate(now)
        ahead = self.waiting + self.limit(now)
        wait = ahead / rate if rate > 0 else 1.0
        return int(min(max(1, math.ceil(wait)), max(1, self.limits.claim_timeout // 4)))

    def refusal(self, run_id: str, outstanding: int, now: float) -> Refusal:
        """The 429 answer of a claim this run cannot admit now."""
        wait = self.retry_after(now)
        return Refusal(
            429,
            "admission",
            f"run {run_id} has {outstanding} claims outstanding, as many as it can count before"
            f" they lapse at its current throughput; nothing was claimed, retry after {wait} s",
            {"Retry-After": str(wait)},
        )


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
