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
(O(versions), never O(claims)). JSON answers are built on first read, once per billboard, ledger
and policy version, and a /policies page is joined from each version's JSON built once.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from privrl.protocol import (
    ArrayPayload,
    Billboard,
    PolicyLog,
    RunInfo,
    VersionServed,
)
from pydantic import BaseModel, TypeAdapter

ARRAYS = TypeAdapter(dict[str, ArrayPayload])
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

    @cached_property
    def actions_json(self) -> str:
        """Its actions as JSON (built once)."""
        return json.dumps(self.actions, separators=(",", ":"))

    @cached_property
    def arrays_json(self) -> str:
        """Its other arrays as JSON (built once)."""
        return ARRAYS.dump_json(self.arrays).decode()


@dataclass(frozen=True)
class BoardArrays:
    """The released arrays of one report count (copies, never written again)."""

    run_id: str
    reported: int
    arrays: dict[str, np.ndarray]
    radius: float
    noise_std: float

    @cached_property
    def json(self) -> bytes:
        """The Billboard answer (built once, shared by every snapshot of this report count)."""
        return Billboard(
            run_id=self.run_id,
            reported=self.reported,
            radius=self.radius,
            shapes={name: list(arr.shape[1:]) for name, arr in self.arrays.items()},
            arrays={name: arr[0].ravel().tolist() for name, arr in self.arrays.items()},
            noise_std=self.noise_std,
        ).model_dump_json().encode()


@dataclass(frozen=True, eq=False)
class Answer:
    """A message that is shared by several snapshots, with its JSON built once."""

    message: BaseModel

    @cached_property
    def json(self) -> bytes:
        """The message as JSON."""
        return self.message.model_dump_json().encode()


@dataclass(frozen=True)
class LogView:
    """The policy log at capture: the first `n` versions of an append-only list and their
    episode counts (claimed, reported, expired) then."""

    entries: list[VersionEntry]
    n: int
    served: np.ndarray  # (n, 3) int64, a copy

    def _span(self, after: int, limit: int) -> tuple[int, int, int | None]:
        """(first index, end index, cursor of the next page) of a page."""
        lo = _first_after(self.entries, self.n, after)
        hi = min(self.n, lo + limit)
        return lo, hi, self.entries[hi - 1].version if hi < self.n else None

    def page(self, run_id: str, after: int, limit: int) -> PolicyLog:
        """Versions newer than `after`, at most `limit` of them, with the cursor of the next
        (built from the server's own values: not validated again)."""
        lo, hi, cursor = self._span(after, limit)
        chosen = self.entries[lo:hi]
        served = {
            e.version: VersionServed.model_construct(
                first_episode=e.first_episode, claimed=claimed, reported=reported,
                expired=expired)
            for e, (claimed, reported, expired) in zip(chosen, self.served[lo:hi].tolist(),
                                                       strict=True)
        }
        return PolicyLog.model_construct(
            run_id=run_id,
            versions={e.version: e.actions for e in chosen},
            arrays={e.version: e.arrays for e in chosen if e.arrays},
            served=served,
            next_after=cursor,
        )

    def page_json(self, run_id: str, after: int, limit: int) -> bytes:
        """`page(...)` as JSON, assembled from each version's JSON (built once per version):
        O(limit) string joins per request."""
        lo, hi, cursor = self._span(after, limit)
        chosen = self.entries[lo:hi]
        versions = ",".join(f'"{e.version}":{e.actions_json}' for e in chosen)
        arrays = ",".join(f'"{e.version}":{e.arrays_json}' for e in chosen if e.arrays)
        served = ",".join(
            f'"{e.version}":{{"first_episode":{e.first_episode},"claimed":{c},"reported":{r},'
            f'"expired":{x}}}'
            for e, (c, r, x) in zip(chosen, self.served[lo:hi].tolist(), strict=True))
        head = json.dumps({"run_id": run_id})[:-1]
        tail = "null" if cursor is None else str(cursor)
        return (f'{head},"versions":{{{versions}}},"arrays":{{{arrays}}},"served":{{{served}}},'
                f'"next_after":{tail}}}').encode()


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
    """A run's public state at one commit; each answer's JSON is built once, on first read
    (the billboard, policy and ledger once for every snapshot that shares them)."""

    seq: int  # increases with every capture of the run
    info: RunInfo
    lapses_at: float  # when its earliest outstanding claim lapses (inf: none outstanding)
    policy: Answer  # PolicyPayload
    board: BoardArrays
    ledger: Answer  # LedgerView
    log: LogView

    @cached_property
    def info_json(self) -> bytes:
        """The RunInfo answer."""
        return self.info.model_dump_json().encode()

    def json(self, what: str) -> bytes:
        """The JSON answer of 'info', 'billboard', 'policy' or 'ledger'."""
        if what == "billboard":
            return self.board.json
        if what == "policy":
            return self.policy.json
        if what == "ledger":
            return self.ledger.json
        return self.info_json

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
