"""What a hosted run shows: its status and info, its newest policy, its billboards and ledger,
and the snapshots public reads answer from (`privrl.server.snapshot`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from privrl.config import RunConfig
from privrl.protocol import ArrayPayload, PolicyPayload, RunInfo, RunStatus
from privrl.run import Run
from privrl.server.snapshot import (
    NEVER,
    Answer,
    BoardArrays,
    BoardRef,
    Boards,
    LedgerRef,
    LogView,
    RunHead,
    Snapshot,
    VersionEntry,
    log_counts,
)

if TYPE_CHECKING:
    from privrl.server.replay import OpenClaim


class PublicViews:
    """A hosted run's public views (a mixin of `HostedRun`: what it reads of it)."""

    id: str
    head: RunHead
    config: RunConfig
    run: Run
    version: int
    actions: np.ndarray
    extras: dict[str, np.ndarray]
    entries: list[VersionEntry]
    served: np.ndarray
    boards: Boards
    claimed: int
    joined: dict[str, OpenClaim]  # claims secure-aggregation cohorts hold (never lapsing)
    stopped: bool
    lock: asyncio.Lock
    stale: bool
    durable: asyncio.Future[None] | None
    snapshot: Snapshot | None
    captures: int
    _payload: PolicyPayload | None
    _ledger: LedgerRef | None
    _policy: Answer | None
    n_outstanding: Callable[[float], int]
    next_expiry: Callable[[float], float | None]

    def status(self, now: float) -> RunStatus:
        """Progress counters."""
        return RunStatus(
            episodes=self.config.episodes,
            claimed=self.claimed,
            outstanding=self.n_outstanding(now) + len(self.joined),
            reported=self.run.reported,
            finished=self.run.finished or self.stopped or self.run.exhausted is not None,
            policy_version=self.version,
            budget_exhausted=self.run.exhausted,
        )

    def info(self, now: float) -> RunInfo:
        """Spec and status."""
        return self.head.info(self.status(now))

    def policy_payload(self) -> PolicyPayload:
        """The newest policy (the one the next claim is served unless a report arrives first);
        built once per version, every claim of that version serves the same object."""
        if self._payload is None or self._payload.version != self.version:
            self._payload = PolicyPayload(
                version=self.version,
                actions=self.actions.tolist(),
                arrays={k: ArrayPayload.of(v) for k, v in self.extras.items()},
            )
        return self._payload

    def board(self) -> BoardArrays:
        """A copy of the public release now (the run's, shared with its learner)."""
        reported = self.run.reported
        return BoardArrays(
            run_id=self.id,
            reported=reported,
            arrays={name: np.array(arr, copy=True) for name, arr in self.run.billboard().items()},
            radius=float(self.run.radius()),
            noise_std=float(self.run.calibration.release_std(reported)),
        )

    def _quiet_board(self) -> BoardArrays | None:
        """The release now when a reader may build it (the run is quiet), else None."""
        return self.board() if self.quiet() else None

    def _ledger_ref(self) -> LedgerRef:
        """Privacy spent so far: the ledger's first charges, viewed when read."""
        charges = len(self.run.ledger)
        if (self._ledger is None or self._ledger.charges != charges
                or self._ledger.ledger is not self.run.ledger):
            self._ledger = LedgerRef(self.id, self.run.ledger, charges,
                                     self.config.accounting_delta)
        return self._ledger

    def _policy_answer(self) -> Answer:
        """The newest policy, as a snapshot shares it."""
        payload = self.policy_payload()
        if self._policy is None or self._policy.message is not payload:
            self._policy = Answer(payload)
        return self._policy

    def epsilon_spent(self) -> float:
        """Total epsilon spent (for the metrics gauge)."""
        return float(self.run.ledger.totals(self.config.accounting_delta).epsilon)

    # -- snapshots (what public reads see) --------------------------------------------------------

    def capture(self, now: float) -> Snapshot:
        """The run's public state now (under the lock, or on the loop while nobody holds it and
        no write is pending); published once the writes behind it are committed."""
        self.captures += 1
        lapse = self.next_expiry(now)
        n = len(self.entries)
        return Snapshot(
            seq=self.captures,
            head=self.head,
            status=self.status(now),
            lapses_at=NEVER if lapse is None else now + lapse,
            policy=self._policy_answer(),
            board=BoardRef(self.boards, self.run.reported),
            ledger=self._ledger_ref(),
            log=LogView(self.entries, n, log_counts(n, self.served)),
        )

    def quiet(self) -> bool:
        """No change under way and every write committed: memory is what the store holds."""
        return not self.lock.locked() and not self.stale and (
            self.durable is None or self.durable.done())

    def publish(self, snapshot: Snapshot) -> None:
        """Make `snapshot` what readers see (unless a newer one is already published)."""
        if self.snapshot is None or snapshot.seq > self.snapshot.seq:
            self.snapshot = snapshot
            snapshot.board.boards.committed(snapshot.board.reported)

    def readable(self, now: float) -> Snapshot:
        """The published snapshot; captured again first when a claim of it has lapsed since
        and the run is quiet (lock free, every write committed): status counts lapses too, and
        the end of a run whose privacy filter refused a release."""
        snap = self.snapshot
        assert snap is not None, "a hosted run publishes its first snapshot when it is built"
        ended = snap.status.budget_exhausted != self.run.exhausted  # the filter refused
        if (snap.stale(now) or ended) and self.quiet():
            self.publish(self.capture(now))
            snap = self.snapshot
            assert snap is not None
        return snap
