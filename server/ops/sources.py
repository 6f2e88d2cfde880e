"""Outstanding claims per source: one client cannot hoard a run, nor stall it.

A source is who asked for a claim: the user credential it presented when the run requires
credentials, else the client's network address. Each source has a cap on its outstanding claims,
kept as the run's own window is (`privrl.server.admission`): it starts at the server's limit for
that kind of source, loses one for every claim of the source that lapses unreported (at least 1
remains), and regains one for every report of the source that arrives in time: many honest users
behind one address who sometimes walk away keep their room, a client that never reports is
left with one claim at a time. A source at its cap is
refused with 429 (`code` "source") and a `Retry-After` of the time until its oldest outstanding
claim lapses: a client that hoards claims it never reports is left with one at a time, and its
lapses narrow its own cap, not the run's window that everyone else shares.

The cap bounds the slots a source holds, not the time it holds them, and in a sequential run
one slot is the whole run: a client that claims and never reports would stall it for a claim
timeout every time. So a lapse also costs its source time. A lapsed claim held `1 / slots` of the
run for `claim_timeout` seconds (slots: 1 in a sequential run, the run's largest window
otherwise), its `hold`; the source is then refused new claims (429, `code` "source", with
`Retry-After`) for a backoff of `BACKOFF_RATIO * hold` at its first lapse, twice the previous one
at each later lapse (at most `2 ** MAX_DOUBLINGS` times the first; lapses while it is refused, as
a crashed client's claims lapsing together, double it once), and every `limit` timely reports of
the source halve it again. A source that stalls a sequential run therefore holds it at most
1 / (1 + BACKOFF_RATIO) of the time at first and less at every repeat, while in a concurrent run
a lapse costs its source a fraction of a second. O(1) per claim, report and lapse.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from privrl.server.errors import Refusal

BACKOFF_RATIO = 4.0  # a lapse that held the run for `hold` seconds refuses its source 4 * hold
MAX_DOUBLINGS = 10  # the backoff grows to at most 2 ** 10 times its first length


@dataclass
class Source:
    """One source's outstanding claims (ticket -> expiry, in issue order) and its cap."""

    cap: float
    open: OrderedDict[str, float] = field(default_factory=OrderedDict)
    backoff: float = 0.0  # seconds its next lapse refuses it for (before doubling); 0: fresh
    until: float = -math.inf  # refused new claims until then (its last lapse's backoff)


class Sources:
    """The claims of one run, accounted per source."""

    def __init__(self, limit: int, target: float, hold: float) -> None:
        """`limit`: a fresh source's cap; `target`: seconds claim -> report that count as in
        time (the run's admission target); `hold`: the run's seconds one lapsed claim held idle
        (claim timeout / slots)."""
        self.limit = float(limit)
        self.target = target
        self.first = BACKOFF_RATIO * hold  # the backoff of a source's first lapse
        self.longest = self.first * 2.0**MAX_DOUBLINGS
        self.halving = 0.5 ** (1.0 / self.limit)  # per timely report: `limit` of them halve it
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
        """Refuse (429) a claim of `key` while it backs off from a lapse, or when it has as
        many outstanding as its cap."""
        source = self.by_key.get(key)
        if source is None:
            return
        if now < source.until:
            wait = max(1, math.ceil(source.until - now))
            raise Refusal(
                429,
                "source",
                f"this client let a claim of the run lapse unreported, so it may not claim for"
                f" {source.backoff:.3g} s (each further lapse doubles that, timely reports"
                f" shorten it); retry after {wait} s",
                {"Retry-After": str(wait)},
            )
        if len(source.open) < int(source.cap):
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
            source.backoff *= self.halving
            if source.backoff < self.first / 2:
                source.backoff = 0.0
        self._forget_if_idle(key, source)

    def ended(self, key: str, ticket: str) -> None:
        """A claim of `key` ended neither reported nor lapsed by its holder (its secure-
        aggregation cohort aborted): forgotten, its cap and backoff unchanged."""
        source = self.by_key.get(key)
        if source is not None and source.open.pop(ticket, None) is not None:
            self._forget_if_idle(key, source)

    def lapsed(self, key: str, ticket: str, expired_at: float) -> None:
        """A claim of `key` lapsed unreported at `expired_at`: one less in its cap (at least
        1), and refused new claims for its backoff, doubled unless it was backing off already."""
        source = self.by_key.get(key)
        if source is None or source.open.pop(ticket, None) is None:
            return
        source.cap = max(1.0, source.cap - 1.0)
        if expired_at >= source.until:
            source.backoff = min(self.longest, max(self.first, 2.0 * source.backoff))
            source.until = expired_at + source.backoff

    def _forget_if_idle(self, key: str, source: Source) -> None:
        """Drop a source with nothing outstanding, a full cap and no backoff (a fresh one)."""
        if not source.open and source.cap >= self.limit and source.backoff == 0.0:
            del self.by_key[key]
