"""Outstanding claims per source: one client cannot hoard a run.

A source is who asked for a claim: the user credential it presented when the run requires
credentials, else the client's network address. Each source has a cap on its outstanding claims,
kept as the run's own window is (`privrl.server.admission`): it starts at the server's limit for
that kind of source, loses one for every claim of the source that lapses unreported (at least 1
remains), and regains one for every report of the source that arrives in time: many honest users
behind one address who sometimes walk away keep their room, a client that never reports is
left with one claim at a time. A source at its cap is
refused with 429 (`code` "source") and a `Retry-After` of the time until its oldest outstanding
claim lapses: a client that hoards claims it never reports is left with one at a time, and its
lapses narrow its own cap, not the run's window that everyone else shares. O(1) per claim,
report and lapse.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from privrl.server.errors import Refusal


@dataclass
class Source:
    """One source's outstanding claims (ticket -> expiry, in issue order) and its cap."""

    cap: float
    open: OrderedDict[str, float] = field(default_factory=OrderedDict)


class Sources:
    """The claims of one run, accounted per source."""

    def __init__(self, limit: int, target: float) -> None:
        """`limit`: a fresh source's cap; `target`: seconds claim -> report that count as in
        time (the run's admission target)."""
        self.limit = float(limit)
        self.target = target
        self.by_key: dict[str, Source] = {}

    def outstanding(self, key: str) -> int:
        """Claims of `key` neither reported nor lapsed."""
        source = self.by_key.get(key)
        return len(source.open) if source is not None else 0

    def cap(self, key: str) -> int:
        """How many claims `key` may have outstanding now."""
        source = self.by_key.get(key)
        return int(source.cap) if source is not None else int(self.limit)

    def check(self, key: str, now: float) -> None:
        """Refuse (429) a claim of `key` when it has as many outstanding as its cap."""
        source = self.by_key.get(key)
        if source is None or len(source.open) < int(source.cap):
            return
        oldest = next(iter(source.open.values()), now + 1.0)
        if oldest <= now:  # lapsed, not swept yet: the run's sweep (under its lock) decides
            return
        wait = max(1, math.ceil(oldest - now))
        raise Refusal(
            429,
            "source",
            f"this client already holds {len(source.open)} outstanding claims of the run, as"
            f" many as it may (claims it let lapse lower its limit); report them, or retry"
            f" after {wait} s",
            {"Retry-After": str(wait)},
        )

    def claimed(self, key: str, ticket: str, expires_at: float) -> None:
        """`key` got a claim."""
        source = self.by_key.get(key)
        if source is None:
            source = self.by_key[key] = Source(self.limit)
        source.open[ticket] = expires_at

    def reported(self, key: str, ticket: str, turnaround: float) -> None:
        """A claim of `key` was reported `turnaround` seconds after it was handed out."""
        source = self.by_key.get(key)
        if source is None or source.open.pop(ticket, None) is None:
            return
        if turnaround <= self.target:
            source.cap = min(self.limit, source.cap + 1.0)
        self._forget_if_idle(key, source)

    def lapsed(self, key: str, ticket: str) -> None:
        """A claim of `key` lapsed unreported: one less in its cap (at least 1)."""
        source = self.by_key.get(key)
        if source is None or source.open.pop(ticket, None) is None:
            return
        source.cap = max(1.0, source.cap - 1.0)

    def _forget_if_idle(self, key: str, source: Source) -> None:
        """Drop a source with nothing outstanding and a full cap (it is a fresh one again)."""
        if not source.open and source.cap >= self.limit:
            del self.by_key[key]
