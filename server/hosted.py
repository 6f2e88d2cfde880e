"""One run as the server hosts it: a `privrl.run.Run`, its open claims and its policy log.

All algorithm logic lives in `privrl.run.Run`; this class only decides *when* to call it, checks
tickets and keeps the store in step. It is not thread-safe: the app holds the run's asyncio lock
(one writer per run) around every call, and makes the call on the event loop when the run is
small (`inline`: a claim or report costs well under a millisecond, less than a hop to a worker
thread) and in a worker thread otherwise.

When the learner plans matters (DP-UCBVI clips Q~ by the previous plan), so the planning points
are part of the persisted state (and each version's whole policy message, actions and any other
arrays such as ucrl-vtr's value tables, is in the policy log): the learner plans before the first
episode and at claims, and each claim row records the number of reports counted when it last
planned. Planning is coalesced: a claim made while no other claim is outstanding (always, in a
sequential run) plans, so one-at-a-time users reproduce the in-process runner; under concurrency
a run plans at most once per `plan_interval` seconds however many claims and reports arrive (and
then only on the learner's own schedule). A replay plans at exactly the
recorded points and therefore rebuilds the same policy versions.

Claims are admitted by `privrl.server.admission` (no claim is handed out whose report cannot be
counted before it lapses) and kept in issue order, which is expiry order, so sweeping expired
ones and counting outstanding ones is O(1) amortized. A report is judged late by the time it
arrived at the server, not by the time its turn came.

Claims are also accounted per source (`privrl.server.ops.sources`: the credential or address that
claimed them; a lapse lowers its source's cap and refuses it claims for a backoff, it does not
narrow the run's window), and the public views (`privrl.server.views`) are captured into an
immutable `privrl.server.snapshot.Snapshot` that readers use without the lock: the policy log is
kept as an append-only list of versions, each with the contiguous range of episodes it was
served to and its reported / lapsed counts. A restart rebuilds the run by replaying its store
(`privrl.server.replay`).

With the unseeded 'opendp' noise backend the JDP tree noise cannot be re-derived: every node
value drawn while ingesting a report is stored in that report's transaction, and a replay takes
node values only from the store (a missing one is a RebuildError, never a fresh draw).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from privrl.algorithms.base import PolicyMessage
from privrl.config import RunConfig
from privrl.privacy.accountant import BudgetExhausted
from privrl.privacy.calibration import Calibration
from privrl.privacy.tree import StoredNoiseError
from privrl.protocol import (
    Ack,
    ArrayPayload,
    PolicyPayload,
    RandomizerParams,
    Ticket,
)
from privrl.reports import Accepted, AnyReport, ReportRejected, accept, digest_of
from privrl.run import Run
from privrl.server.admission import Admission, RunLimits
from privrl.server.cohorts import Cohorts
from privrl.server.errors import Refusal
from privrl.server.limits import max_report_bytes
from privrl.server.ops import noise_epochs
from privrl.server.ops.highwater import HighWater, Mark
from privrl.server.ops.sources import Sources
from privrl.server.replay import OpenClaim, RebuildError, Replay, arrays_json, stored_message
from privrl.server.snapshot import (
    CLAIMED,
    EXPIRED,
    REPORTED,
    Answer,
    Boards,
    LedgerRef,
    RunHead,
    Snapshot,
    VersionEntry,
    grown,
)
from privrl.server.store import (
    ClaimRow,
    NoiseRow,
    PolicyRow,
    ReportRow,
    RunRow,
    Statement,
    Store,
)
from privrl.server.views import PublicViews

log = logging.getLogger("privrl.server")
T = TypeVar("T")



def randomizer_params(calibration: Calibration) -> RandomizerParams | None:
    """The local randomizer's public calibration (LDP runs only)."""
    if not calibration.boundary.local_noise or calibration.mechanism is None:
        return None
    return RandomizerParams(
        mechanism=calibration.mechanism_name,
        scale=calibration.noise_scale,
        families={f.name: list(f.shape) for f in calibration.families},
        scales=calibration.scales(),
        symmetric=[f.name for f in calibration.families if f.symmetric],
    )


class HostedRun(Replay, PublicViews):
    """The server-side state of one run (one replica of `Run`) plus its tickets."""

    def __init__(self, row: RunRow, config: RunConfig, store: Store, limits: RunLimits) -> None:
        self.id = row.id
        self.row = row
        self.config = config
        self.head = RunHead(row.id, config, row.created_at, row.sequential, row.credentials)
        self.max_report_bytes = max_report_bytes(config)  # its body limit
        self.store = store
        self.limits = limits
        self.claim_timeout = float(limits.claim_timeout)
        self.admission = Admission(limits)
        per_source = limits.per_credential if row.credentials else limits.per_address
        slots = 1 if row.sequential else limits.max_outstanding
        self.sources = Sources(per_source, self.admission.target, self.claim_timeout / slots)
        self.deleted = False
        self.stopped = row.stopped  # an admin stopped it after its store went back
        self.stale = False  # memory ran ahead of a write that failed: rebuild before serving
        self.durable: asyncio.Future[None] | None = None  # the newest queued write's future
        self.lock = asyncio.Lock()
        self.slot_freed = asyncio.Condition(self.lock)
        self.captures = 0  # snapshots captured (their sequence numbers)
        self.snapshot: Snapshot | None = None  # what public reads see
        self._reset()
        entries = sum(math.prod(f.shape) for f in self.run.calibration.families)
        self.inline = entries <= limits.inline_entries  # claims and reports on the event loop

    def _reset(self) -> None:
        """Empty in-memory state: a fresh Run, no claims, no policy yet."""
        self.run = Run(self.config, [self.row.seed])
        boundary = self.run.calibration.boundary
        exchange = boundary.exchange()  # a boundary with cohorts: its reports count by cohort
        self.cohorts = None if exchange is None else Cohorts(boundary.cohort_size, exchange)
        self.epoch = 0  # noise epoch (> 0 once an admin continued it after a rollback)
        self.claimed = 0  # claims handed out (lapsed and ended ones too): RunStatus.claimed
        # the next claim's episode index: past `claimed` once a secure-aggregation cohort
        # closed short of B skipped its unused indices (`privrl.server.secagg_rounds`)
        self.next_episode = 0
        self.stored_reports = 0  # report rows (a held cohort member's too): the next one's seq
        self.open: OrderedDict[str, OpenClaim] = OrderedDict()  # issue order = expiry order
        self.joined: dict[str, OpenClaim] = {}  # claims a secagg cohort holds: they never lapse
        self.version = 0
        self.planned_at = 0  # reports counted when the learner was last consulted
        self.planned_time = -math.inf
        self.unsettled: dict[str, tuple[str, Ack]] = {}  # ticket -> (digest, Ack) not yet durable
        self.actions = np.zeros((self.config.horizon, self.config.n_states), dtype=np.int64)
        self.extras: dict[str, np.ndarray] = {}  # the message's other arrays (one replica)
        self._payload: PolicyPayload | None = None  # the newest version's, once built
        self.entries: list[VersionEntry] = []  # the public policy log, append-only
        self.version_index: dict[int, int] = {}  # version -> its index in `entries`
        self.served = np.zeros((8, 3), dtype=np.int64)  # per entry: claimed, reported, expired
        self.boards = Boards(self._quiet_board)  # billboards by report count, built when read
        self._ledger: LedgerRef | None = None  # the newest number of charges' view, once captured
        self._policy: Answer | None = None  # the newest version's payload, once captured
        self.run.privatizer.journal_noise()

    @property
    def reported(self) -> int:
        """Reports counted so far."""
        return self.run.reported

    @property
    def sequential(self) -> bool:
        """At most one outstanding claim at a time."""
        return self.row.sequential

    # -- life cycle -------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        run_id: str,
        config: RunConfig,
        sequential: bool,
        store: Store,
        limits: RunLimits,
        now: float,
        seed: int,
        highwater: HighWater,
        credentials: bool = False,
    ) -> HostedRun:
        """A new run: plan the first policy (0 reports) and persist spec, secret seed and policy
        together. `credentials`: claims need a user credential issued by the admin. The run's
        first mark goes to `highwater` before the store holds it: a stored run always has one,
        so a store whose mark is lost is told from a new one (`privrl.server.ops.highwater`)."""
        row = RunRow(run_id, config.model_dump_json(), now, sequential, seed,
                     credentials=credentials)
        hosted = cls(row, config, store, limits)
        first = hosted._plan()
        assert first is not None
        highwater.set(run_id, Mark())
        store.insert_run(row, first)
        hosted.boards.add(hosted.board())
        hosted.publish(hosted.capture(now))
        return hosted

    @classmethod
    def restore(cls, row: RunRow, store: Store, limits: RunLimits) -> HostedRun:
        """Rebuild a stored run by replaying its reports and planning points."""
        config = RunConfig.model_validate_json(row.config)
        hosted = cls(row, config, store, limits)
        try:
            hosted._load()
        except StoredNoiseError as exc:
            raise RebuildError(f"run {row.id}: {exc}") from exc
        hosted.boards.add(hosted.board())
        hosted.publish(hosted.capture(time.time()))
        return hosted

    def start_noise_epochs(self, epochs: list[int], published: int) -> None:
        """An admin continues the run after its store went back: start `epochs` now (the
        caller checked the budget and stored them)."""
        for epoch in epochs:
            noise_epochs.start(self.run, epoch, published)
            self.epoch = epoch

    def published(self) -> tuple[str, int, int]:
        """(id, noise epoch, reports counted): the high-water mark once the newest change is
        committed."""
        return self.id, self.epoch, self.run.reported

    def _drawn_noise(self) -> list[NoiseRow]:
        """The node noise drawn since last asked, as rows to store with the current write."""
        return [
            NoiseRow(
                self.id,
                node.family,
                node.level,
                node.index,
                np.ascontiguousarray(node.value, dtype="<f8").tobytes(),
            )
            for node in self.run.privatizer.take_drawn()
        ]

    def _plan(self) -> PolicyRow | None:
        """Let the learner plan at the current report count; the new version's row, if any."""
        message = self.run.message()
        self.planned_at = self.run.reported
        if self.run.policy_version == self.version:
            return None
        self.version = self.run.policy_version
        self.actions = np.array(message["actions"][0], dtype=np.int64)
        self.extras = {k: np.array(v[0], dtype=np.float64) for k, v in message.items()
                       if k != "actions"}
        actions = json.dumps(self.actions.tolist(), separators=(",", ":"))
        self.version_index[self.version] = len(self.entries)
        self.entries.append(VersionEntry(
            self.version, self.next_episode, self.actions.tolist(),
            {k: ArrayPayload.of(v) for k, v in self.extras.items()}))
        self.served = grown(self.served, len(self.entries))
        return PolicyRow(self.id, self.version, self.run.reported, actions,
                         arrays_json(self.extras))

    def _current_message(self) -> PolicyMessage:
        """The newest policy message, one replica (what a claim serves)."""
        return {"actions": self.actions[None], **{k: v[None] for k, v in self.extras.items()}}

    def _atomically(self, what: str, mutate: Callable[[], T]) -> T:
        """Mutate memory; on failure mark the run stale (rebuilt from the store before it serves
        anything again) and refuse with 503."""
        try:
            return mutate()
        except BudgetExhausted:  # the filter refuses before any change: nothing is stale
            raise
        except Exception as exc:
            log.exception("run %s: could not record a %s; it will be rebuilt", self.id, what)
            self.mark_stale()
            raise Refusal(
                503, "store", f"the server could not record this {what}; nothing changed, retry"
            ) from exc

    def mark_stale(self) -> None:
        """Memory may hold changes the store will never have: rebuild before serving again."""
        self.stale = True

    def rebuild(self) -> None:
        """Rebuild memory from the store (after a failed write; every queued write has ended)."""
        self._load()
        self.stale = False
        self.boards.add(self.board())
        self.publish(self.capture(time.time()))

    # -- claims -----------------------------------------------------------------------------------

    def _sweep(self, now: float) -> None:
        """Forget expired claims (their rows stay; expiry is a function of the stored time).

        Claims are kept in expiry order, so this pops from the front: O(1) amortized."""
        while self.open:
            ticket, first = next(iter(self.open.items()))
            if first.expires_at > now:
                return
            del self.open[ticket]
            self._lapsed(first, now)

    def _lapsed(self, claim: OpenClaim, now: float) -> None:
        """A claim lapsed unreported: it counts against its source (its cap loses one and it
        backs off), or, when its source is unknown (restored after a restart), against the
        run's window."""
        self._count(claim.policy_version, EXPIRED)
        if claim.source is not None:
            self.sources.lapsed(claim.source, claim.ticket, claim.expires_at)
        else:
            self.admission.narrow(now)

    def n_outstanding(self, now: float) -> int:
        """How many claims are neither reported nor expired."""
        self._sweep(now)
        return len(self.open)

    def next_expiry(self, now: float) -> float | None:
        """Seconds until the earliest outstanding claim lapses (None without any)."""
        self._sweep(now)
        return next(iter(self.open.values())).expires_at - now if self.open else None

    def admit(self, now: float, source: str | None = None) -> None:
        """Refuse a claim that cannot be handed out now (O(1)): 410 finished, 429 when its
        source holds as many claims as it may, 409 busy (a sequential run) or full (reported +
        outstanding = K), 429 over the admission limit."""
        k_total = self.config.episodes
        self._refuse_stopped()
        self._refuse_exhausted()
        if self.run.finished:
            raise Refusal(410, "finished", f"run {self.id} has finished: all {k_total} episodes"
                          " are reported")
        pending = self.n_outstanding(now)
        if source is not None:
            self.sources.check(source, now)
        if not pending and not self.held:
            return
        lapse = self.next_expiry(now)  # None: only held claims (they end with their cohort)
        retry = {"Retry-After": str(max(1, math.ceil(lapse if lapse is not None else 1.0)))}
        wait = retry["Retry-After"]
        if self.sequential and pending:
            episode = next(iter(self.open.values())).episode
            raise Refusal(
                409,
                "busy",
                f"run {self.id} is sequential and episode {episode} is still"
                f" outstanding; retry after it is reported or expires (at most {wait} s),"
                " or claim with ?wait=SECONDS",
                retry,
            )
        if self.run.reported + pending + self.held >= k_total:
            raise Refusal(
                409,
                "full",
                f"run {self.id}: {self.run.reported} of {k_total} episodes are reported and"
                f" the remaining {pending} claimed; retry after a claim expires (at"
                f" most {wait} s) or claim with ?wait=SECONDS",
                retry,
            )
        if not self.admission.admits(pending, now):
            raise self.admission.refusal(self.id, pending, now)

    def claim(self, now: float, source: str | None = None) -> tuple[Ticket, list[Statement]]:
        """Hand out the next episode to `source`: index, single-use ticket, current policy
        (planned here unless coalesced), and the rows that record it (the caller commits them
        before it answers)."""
        self.admit(now, source)
        episode = self.next_episode
        ticket = secrets.token_urlsafe(24)
        expires_at = now + self.claim_timeout
        replan = (self.sequential or not self.open
                  or now - self.planned_time >= self.limits.plan_interval)

        def mutate() -> list[Statement]:
            new_policy = self._plan() if replan else None
            if replan:
                self.planned_time = now
                if self.run.billboard_built() and not self.boards.has(self.run.reported):
                    self.boards.add(self.board())  # the release the learner just read
            row = ClaimRow(
                ticket, self.id, episode, self.version, self.planned_at, now, expires_at, "open"
            )
            return Store.claim_statements(row, new_policy, self._drawn_noise())

        rows = self._atomically("claim", mutate)
        self.claimed += 1
        self.next_episode += 1
        self._count(self.version, CLAIMED)
        self.open[ticket] = OpenClaim(ticket, episode, self.version, expires_at,
                                      self._current_message(), source)
        if source is not None:
            self.sources.claimed(source, ticket, expires_at)
        log.debug("run %s: episode %d claimed (policy version %d)", self.id, episode, self.version)
        return Ticket(
            run_id=self.id,
            episode=episode,
            ticket=ticket,
            policy=self.policy_payload(),
            randomizer=randomizer_params(self.run.calibration),
            expires_in=self.claim_timeout,
        ), rows

    # -- reports ----------------------------------------------------------------------------------

    def report(self, report: AnyReport, now: float) -> tuple[Ack, list[Statement]]:
        """Validate a report against its ticket and the run and ingest it, or refuse; the Ack
        and the rows that record it (none for a retry; the caller commits them before it
        answers). `now` is the time the report arrived: a report is late only if it arrived
        late."""
        unsettled = self.unsettled.get(report.ticket)
        if unsettled is not None:  # a retry whose original is not on disk yet
            return self._retried(digest_of(report), *unsettled), []
        claim = self.open.get(report.ticket)
        if claim is None:
            settled = self._settled_claim(report.ticket, digest_of(report))
            if isinstance(settled, Ack):
                return settled, []
            claim = settled
        self._refuse_stopped()
        self._refuse_exhausted()
        if self.run.finished:
            raise Refusal(410, "finished", f"run {self.id} has finished: all"
                          f" {self.config.episodes} episodes are reported")
        if claim.expires_at <= now:
            if self.open.pop(claim.ticket, None) is not None:
                self._lapsed(claim, now)
            raise Refusal(
                410,
                "expired",
                f"the claim of episode {claim.episode} expired {now - claim.expires_at:.1f} s ago"
                f" (claims last {self.claim_timeout:g} s); nothing was counted, claim a new"
                " episode",
            )
        served = claim.message if claim.message is not None else self._served_message(
            claim.policy_version
        )
        try:
            accepted = accept(report, self.run, served, claim.policy_version)
        except ReportRejected as exc:
            raise Refusal(422, exc.code, exc.detail) from None

        def mutate() -> tuple[Ack, list[Statement]]:
            self._take(accepted, claim.episode, served, now)
            ack = Ack(run_id=self.id, episode=claim.episode, reported=self.run.reported)
            row = ReportRow(
                self.id,
                self.stored_reports + 1,
                claim.ticket,
                claim.episode,
                accepted.kind,
                accepted.payload,
                accepted.digest,
                ack.model_dump_json(),
            )
            return ack, Store.report_statements(row, self._drawn_noise())

        try:
            ack, rows = self._atomically("report", mutate)
        except BudgetExhausted:  # refused before anything changed: the run has ended
            self._refuse_exhausted()
            raise
        self.stored_reports += 1
        self.open.pop(claim.ticket, None)
        self._count(claim.policy_version, REPORTED)
        self.unsettled[claim.ticket] = (accepted.digest, ack)
        issued = claim.expires_at - self.claim_timeout
        self.admission.reported(now - issued, now)
        if claim.source is not None:
            self.sources.reported(claim.source, claim.ticket, now - issued)
        log.debug(
            "run %s: report of episode %d accepted (%d/%d reported)",
            self.id,
            claim.episode,
            ack.reported,
            self.config.episodes,
        )
        return ack, rows

    @property
    def held(self) -> int:
        """Reports held in cohorts not complete yet (neither counted nor outstanding), and
        claims a secure-aggregation cohort's rounds hold (`privrl.server.secagg_rounds`)."""
        return (0 if self.cohorts is None else self.cohorts.held) + len(self.joined)

    def _take(self, accepted: Accepted, episode: int, served: PolicyMessage, now: float,
              replayed: bool | None = None) -> None:
        """Count an accepted report: ingest it, or (a boundary with cohorts) hold it as its
        member's input and ingest its cohort's item when this report completes the cohort
        (`replayed`: during a replay, whether the stored Ack says it did)."""
        if self.cohorts is None:
            accepted.ingest(self.run, served)
            return
        stats = accepted.noisy
        if stats is None:
            assert accepted.trajectories is not None
            stats = self.run.algorithm.user_statistics(accepted.trajectories, served)
        if replayed is None:
            expiry = {c.episode: c.expires_at for c in self.open.values()}
            inputs = self.cohorts.reported(
                episode, stats, lambda e: e < self.next_episode and expiry.get(e, now) <= now)
        else:
            inputs = self.cohorts.replayed(episode, stats, replayed)
        if inputs is not None:
            try:
                self.run.ingest_cohort(inputs)
            except BudgetExhausted:  # the cohort is gone from memory: rebuild it
                self.mark_stale()
                raise

    def _refuse_stopped(self) -> None:
        """410 for a run an admin stopped."""
        if self.stopped:
            raise Refusal(410, "stopped", f"run {self.id} was stopped by an admin after its"
                          f" store went back; it stays at {self.run.reported} reports")

    def _refuse_exhausted(self) -> None:
        """409 once the run's privacy filter refused a release (the run has ended)."""
        if self.run.exhausted is not None:
            raise Refusal(409, "budget_exhausted", f"run {self.id} has ended at"
                          f" {self.run.reported} reports: {self.run.exhausted}")

    def _count(self, version: int, column: int) -> None:
        """One more episode of `version` claimed, reported or lapsed (the public log's counts)."""
        self.served[self.version_index[version], column] += 1

    def _retried(self, sent: str, stored: str, ack: Ack) -> Ack:
        """The answer to a report sent again with a used ticket (`sent`: its digest, `stored`:
        the counted one's): the stored Ack, or 409 when the report differs."""
        if sent == stored:
            return ack.model_copy(update={"duplicate": True})
        raise Refusal(
            409,
            "conflict",
            f"this ticket was already used for episode {ack.episode} with a different report;"
            " a ticket is single-use (nothing was counted)",
        )

    def _settled_claim(self, ticket: str, digest: str) -> OpenClaim | Ack:
        """A ticket not open in memory: the stored Ack of a retry or a lapsed claim; else refuse."""
        row = self.store.find_claim(ticket)
        if row is None or row.run_id != self.id:
            raise Refusal(404, "unknown_ticket", f"unknown ticket: run {self.id} never issued it")
        if row.state == "reported":
            stored = self.store.find_report(ticket)
            assert stored is not None, "a claim marked reported has its report (one transaction)"
            return self._retried(digest, stored.digest, Ack.model_validate_json(stored.ack))
        return OpenClaim(row.ticket, row.episode, row.policy_version, row.expires_at)

    def _served_message(self, version: int) -> PolicyMessage:
        """The message of policy `version` (the current one, or from the stored log)."""
        if version == self.version:
            return self._current_message()
        for row in self.store.policies(self.id):
            if row.version == version:
                return stored_message(row)
        raise RebuildError(f"run {self.id}: policy version {version} is missing from the log")

