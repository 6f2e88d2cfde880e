"""What the public reads of a run are served from: an immutable snapshot of it, published after
each commit, read without the run's lock.

The run's writer captures a `Snapshot` under the lock when it queues the rows of a change and
swaps it in (`HostedRun.publish`) once those rows are committed, so nothing is published before
it is durable (a restart could otherwise rebuild a different release with the same
counter-based noise). A reader takes `hosted.snapshot`, one attribute read, and answers from it:
a claim hoarder or a slow plan never makes a reader wait, and no reader makes the run wait.

A capture is cheap: the billboard arrays are copied only when a report changed them, the ledger
view is rebuilt only when a charge was added, and the policy log is an append-only list of
versions (the snapshot keeps its length) with a copy of the per-version episode counts
(O(versions), never O(claims)). JSON answers are built once per snapshot, on first read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from privrl.protocol import (
    ArrayPayload,
    Billboard,
    LedgerView,
    PolicyLog,
    PolicyPayload,
    RunInfo,
    VersionServed,
)

LOG_PAGE = 100  # policy versions per /policies page unless ?limit= says otherwise
LOG_PAGE_MAX = 1000  # most versions one /policies page holds

# columns of `LogView.served`
CLAIMED, REPORTED, EXPIRED = 0, 1, 2


@dataclass(frozen=True)
class VersionEntry:
    """One policy version of the public log, as first served (never changed afterwards)."""

    version: int
    first_episode: int  # the first episode index it was served to (versions serve in order)
    actions: list[list[int]]
    arrays: dict[str, ArrayPayload]


@dataclass(frozen=True)
class BoardArrays:
    """The released arrays of one report count (copies, never written again)."""

    reported: int
    arrays: dict[str, np.ndarray]
    radius: float
    noise_std: float


@dataclass(frozen=True)
class LogView:
    """The policy log at capture: the first `n` versions of an append-only list and their
    episode counts (claimed, reported, expired) then."""

    entries: list[VersionEntry]
    n: int
    served: np.ndarray  # (n, 3) int64, a copy

    def page(self, run_id: str, after: int, limit: int) -> PolicyLog:
        """Versions newer than `after`, at most `limit` of them, with the cursor of the next."""
        lo = _first_after(self.entries, self.n, after)
        hi = min(self.n, lo + limit)
        chosen = self.entries[lo:hi]
        served = {}
        for i, e in zip(range(lo, hi), chosen, strict=True):
            claimed, reported, expired = (int(x) for x in self.served[i])
            served[e.version] = VersionServed(first_episode=e.first_episode, claimed=claimed,
                                              reported=reported, expired=expired)
        return PolicyLog(
            run_id=run_id,
            versions={e.version: e.actions for e in chosen},
            arrays={e.version: e.arrays for e in chosen if e.arrays},
            served=served,
            next_after=chosen[-1].version if hi < self.n else None,
        )


def _first_after(entries: list[VersionEntry], n: int, after: int) -> int:
    """Index of the first of `entries[:n]` (sorted by version) whose version is > `after`."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[mid].version <= after:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass(frozen=True, eq=False)
class Snapshot:
    """A run's public state at one commit; its answers are built on first read."""

    seq: int  # increases with every capture of the run
    info: RunInfo
    lapses_at: float  # when its earliest outstanding claim lapses (inf: none outstanding)
    policy: PolicyPayload
    board: BoardArrays
    ledger: LedgerView
    log: LogView
    answers: dict[str, bytes] = field(default_factory=dict)

    @cached_property
    def billboard(self) -> Billboard:
        """The Billboard message of the captured release."""
        board = self.board
        return Billboard(
            run_id=self.info.id,
            reported=board.reported,
            radius=board.radius,
            shapes={name: list(arr.shape[1:]) for name, arr in board.arrays.items()},
            arrays={name: arr[0].ravel().tolist() for name, arr in board.arrays.items()},
            noise_std=board.noise_std,
        )

    def json(self, what: str) -> bytes:
        """The JSON answer of 'info', 'billboard', 'policy' or 'ledger', serialized once."""
        cached = self.answers.get(what)
        if cached is None:
            message = {"info": self.info, "policy": self.policy, "ledger": self.ledger}.get(what)
            if message is None:
                message = self.billboard
            cached = self.answers[what] = message.model_dump_json().encode()
        return cached

    def stale(self, now: float) -> bool:
        """Whether an outstanding claim of it has lapsed since (its status overstates them)."""
        return self.lapses_at <= now

    def policy_log(self) -> PolicyLog:
        """The whole policy log (every version)."""
        return self.log.page(self.info.id, -1, max(1, self.log.n))


def log_counts(n: int, served: np.ndarray) -> np.ndarray:
    """A (n, 3) copy of the first `n` rows of the growing count table."""
    return np.array(served[:n], dtype=np.int64, copy=True)


def grown(table: np.ndarray, rows: int) -> np.ndarray:
    """`table` with room for at least `rows` rows (doubling; the new rows are zero)."""
    if rows <= table.shape[0]:
        return table
    bigger = np.zeros((max(rows, 2 * table.shape[0], 8), table.shape[1]), dtype=table.dtype)
    bigger[: table.shape[0]] = table
    return bigger


NEVER = math.inf
