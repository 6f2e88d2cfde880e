"""What the public reads of a run are served from: an immutable snapshot of it, published after
each commit, read without the run's lock.

The run's writer captures a `Snapshot` under the lock when it queues the rows of a change and
swaps it in (`HostedRun.publish`) once those rows are committed, so nothing is published before
it is durable (a restart could otherwise rebuild a different release with the same
counter-based noise). A reader takes `hosted.snapshot`, one attribute read, and answers from it:
a claim hoarder or a slow plan never makes a reader wait, and no reader makes the run wait.

A capture costs O(1) whatever the size of the run: a few counters, the run's status, and
references to views that are built when first read and then shared by every snapshot of the
same version (never rebuilt on a change): the policy of a version, the ledger of a number of
charges (`LedgerRef`: the ledger is append-only, so its first n charges are its state at n) and
the billboard of a report count (`Boards`: built from the live run when a reader finds it quiet,
or taken from the planner, which reads the same release; a busy run's reader gets the newest
committed release built so far, with its own report count). The policy log is an append-only
list of versions (the snapshot keeps its length) with a copy of the per-version episode counts
(O(versions), never O(claims)). JSON answers are built on first read, and a /policies page is
joined from each version's JSON built once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger
from privrl.protocol import (
    ArrayPayload,
    Billboard,
    LedgerView,
    PolicyLog,
    RunInfo,
    RunStatus,
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


class Boards:
    """A run's billboards by report count, built when read (or planned), never on a report.

    `live()` builds the live run's board when that is safe to read now (the run is quiet: no
    change under way and every write committed), else None. Kept: every board from the newest
    one at or below the committed count (`committed`) on; a reader of count k gets k's board or
    the newest committed one below it."""

    def __init__(self, live: Callable[[], BoardArrays | None]) -> None:
        self._live = live
        self._built: dict[int, BoardArrays] = {}
        self._committed = 0

    def add(self, board: BoardArrays) -> None:
        """Keep a board built elsewhere (the planner's)."""
        self._built.setdefault(board.reported, board)

    def has(self, reported: int) -> bool:
        """Whether the board of `reported` reports is kept."""
        return reported in self._built

    def committed(self, reported: int) -> None:
        """A snapshot of `reported` reports is published: forget the boards below the newest
        one it can answer with."""
        self._committed = max(self._committed, reported)
        floor = max((k for k in self._built if k <= self._committed), default=None)
        if floor is not None:
            for k in [k for k in self._built if k < floor]:
                del self._built[k]

    def at(self, reported: int) -> BoardArrays:
        """The board of `reported` reports, or the newest committed one below it (the run
        seeds a board whenever it is built, so there is one)."""
        board = self._built.get(reported)
        if board is not None:
            return board
        live = self._live()
        if live is not None:
            self.add(live)
            if live.reported == reported:
                return live
        below = [k for k in self._built if k <= reported]
        if not below:  # an old snapshot read late: the boards it could have had are forgotten
            below = [k for k in self._built if k <= self._committed]
        return self._built[max(below)]


@dataclass(frozen=True, eq=False)
class BoardRef:
    """A snapshot's billboard: the board of its report count, found when read."""

    boards: Boards
    reported: int

    @property
    def json(self) -> bytes:
        """The Billboard answer."""
        return self.boards.at(self.reported).json


@dataclass(frozen=True, eq=False)
class LedgerRef:
    """A snapshot's ledger: the first `charges` charges of an append-only ledger, its view
    built on first read (shared by every snapshot of the same number of charges)."""

    run_id: str
    ledger: Ledger
    charges: int
    delta: float

    @cached_property
    def json(self) -> bytes:
        """The LedgerView answer."""
        prefix = self.ledger.prefix(self.charges)
        return LedgerView.of(self.run_id, prefix, self.delta).model_dump_json().encode()


@dataclass(frozen=True)
class RunHead:
    """What never changes of a hosted run's public info."""

    id: str
    config: RunConfig
    created_at: float
    sequential: bool
    credentials: bool

    def info(self, status: RunStatus) -> RunInfo:
        """Its RunInfo with `status`."""
        return RunInfo(id=self.id, config=self.config, status=status,
                       created_at=self.created_at, sequential=self.sequential,
                       credentials=self.credentials)


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
    head: RunHead
    status: RunStatus
    lapses_at: float  # when its earliest outstanding claim lapses (inf: none outstanding)
    policy: Answer  # PolicyPayload
    board: BoardRef
    ledger: LedgerRef
    log: LogView

    @cached_property
    def info(self) -> RunInfo:
        """The RunInfo (built on first read)."""
        return self.head.info(self.status)

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
