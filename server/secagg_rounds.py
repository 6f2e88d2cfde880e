"""Secure aggregation over HTTP: the rounds of each cohort of a `secagg` run, driven by the
protocol's server state machine (`privrl.trust.secagg.protocol.CohortAggregator`).

A member of cohort c is the holder of an open claim of episode e with e // B = c; it is user
e % B of the cohort and authenticates every message with its claim ticket; from its keys on,
the cohort holds its claim (it does not lapse while the cohort runs). A round closes when
every user it waits for has sent its message, or once it has heard nothing for
`ROUND_TIMEOUT` seconds (round 0: `JOIN_TIMEOUT` after the newest member joined, or at once
when no more members can join; the missing users count as dropped): a round that a loaded
server or large cohort makes slow, but that still hears from its members, is not cut. Too
few messages abort the cohort (nothing of it is released, its claims are dropped unreported
and nothing is charged, and its episodes are handed out again). When the unmasking round
closes, its messages are frozen and the aggregator rebuilds the masks in a worker thread
(Shamir reconstruction, X25519 agreements and ChaCha20 masks: about half a second at B =
1,000, during which the event loop keeps serving; the cohort meanwhile still shows round 3
open, and a late unmasking message is refused). Then, on the loop, the cohort's sum goes into
the run under its lock (`CohortPrivatizer.release_sum`; it counts every member's episode, as a
cohort closed in process does): its survivors' claims are reported in one write, each with its
*masked* input (the server never holds a user's clean vector; the released sum is public), the
others' claims end unreported.

Restarts: the rounds live in memory. A restart aborts every cohort in flight (its users are
answered 404 and their claims lapse; nothing of it was counted or charged). A released cohort
is in the store with its reports (`privrl.server.secagg_store`): a replay releases it again at
the same report, once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from privrl.protocol import Ack
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.secagg_store import KIND, masked_payload
from privrl.server.service import Service, durable, fresh, in_thread
from privrl.server.snapshot import EXPIRED, REPORTED
from privrl.server.store import ReportRow, Statement, Store
from privrl.trust.secagg.protocol import (
    Advertisement,
    CohortAborted,
    CohortAggregator,
    CohortSetup,
    MalformedInput,
)
from privrl.trust.secagg.spec import CohortSpec
from privrl.trust.secagg.wire import ROUNDS, cohort_setup, unb64

log = logging.getLogger("privrl.server.secagg")

ROUND_TIMEOUT = float(os.environ.get("PRIVRL_SECAGG_ROUND_TIMEOUT", "30"))
# round 0 (members joining) waits this long after the newest member's keys: users claim and
# play before they join, so the cohort fills at the pace of their episodes
JOIN_TIMEOUT = float(os.environ.get("PRIVRL_SECAGG_JOIN_TIMEOUT", "60"))
LOOK = 0.5  # seconds between a round 0's looks at whether more members can join


@dataclass
class CohortRounds:
    """One cohort's rounds on the server: its aggregator, members and deadlines."""

    index: int
    setup: CohortSetup
    opened: float  # when the current round opened or last heard from a member
    aggregator: CohortAggregator = field(init=False)
    created: float = field(init=False)  # when its first member joined
    keyed: float | None = None  # when round 0 closed (its members known)
    members: dict[str, int] = field(default_factory=dict)  # ticket -> user index
    episodes: dict[int, int] = field(default_factory=dict)  # user index -> episode
    outcome: str | None = None  # "released", "refused" or "aborted" once it ended
    why: str = ""
    dropped: bool = False  # an aborted cohort's claims were ended
    closing: bool = False  # no more members can join: round 0 closes with those it has
    looked: float = 0.0  # when the server last asked whether more members can join
    frozen: bool = False  # the unmasking round closed: no more messages, the sum is rebuilt
    unmasking: asyncio.Task[None] | None = None  # the rebuild and release (SecaggRounds)
    total: np.ndarray | None = None  # the unmasked sum, until the run took it
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.aggregator = CohortAggregator(self.setup)
        self.created = self.opened

    def timing(self, now: float) -> str:
        """'in 12.3 s (rounds 1.2 s)': since its first member joined, and since round 0
        closed."""
        rounds = "" if self.keyed is None else f" (rounds {now - self.keyed:.2f} s)"
        return f"in {now - self.created:.2f} s{rounds}"

    @property
    def ended(self) -> bool:
        """Its outcome is known and, when it released, on disk (its unmasking task, which
        writes the release, is done)."""
        return self.outcome is not None and (self.unmasking is None or self.unmasking.done())

    @property
    def round(self) -> int:
        """The round open now (0 .. 3; 4 once the cohort released its sum). While its sum is
        rebuilt, taken by the run and written, the cohort still shows round 3: its outcome
        is not known yet."""
        if self.frozen and not self.ended:
            return 3
        return self.aggregator.round

    def _waiting_for(self) -> tuple[int, int]:
        """(how many users the current round waits for, how many of their messages arrived):
        O(1) (the aggregator takes a message only from a user the round waits for)."""
        agg, r = self.aggregator, self.aggregator.round
        if r == 0:
            return len(agg.adverts) if self.closing else self.setup.size, len(agg.adverts)
        if r == 1:
            return len(agg.adverts), len(agg.shares)
        if r == 2:
            return len(agg.shares), len(agg.inputs)
        return len(agg.survivors), len(agg.reveals)

    def tick(self, now: float) -> None:
        """Close the current round if everyone it waits for is in or its time is up (the
        unmasking round closes `frozen`: the caller rebuilds the sum, off the event loop)."""
        while self.outcome is None and not self.frozen:
            expected, got = self._waiting_for()
            if got < expected and now - self.opened < self.timeout:
                return
            log.debug("%s: round %s closes with %d of %d", self.setup.cohort.decode(),
                      ROUNDS[self.round], got, expected)
            try:
                self._close_round()
            except CohortAborted as why:
                self.abort(str(why))
            if self.keyed is None:
                self.keyed = now
            self.opened = now
            self._wake()

    def _close_round(self) -> None:
        agg = self.aggregator
        if agg.round == 0:
            agg.roster()
        elif agg.round == 1:
            agg.inbox(-1)  # closes round 1 (no user -1: nothing is addressed to it)
        elif agg.round == 2:
            agg.unmask_request()
        else:
            self.frozen = True

    def rebuild(self) -> np.ndarray | str:
        """Once frozen: the survivors' sum, or why the cohort aborts. The CPU work of the
        unmasking round; it only reads the frozen messages, so it runs in a worker thread."""
        assert self.frozen
        try:
            return self.aggregator.result()
        except CohortAborted as why:
            return str(why)

    def rebuilt(self, got: np.ndarray | str) -> None:
        """On the event loop: `rebuild`'s answer into the cohort (the sum waits for the run
        to take it; still round 3), or its abort."""
        if isinstance(got, str):
            self.abort(got)
        else:
            self.total = got

    def abort(self, why: str) -> None:
        """The cohort ends with nothing released."""
        self.outcome, self.why = "aborted", why
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    @property
    def timeout(self) -> float:
        """How long the current round stays open after it opened or last heard from a
        member."""
        return JOIN_TIMEOUT if self.round == 0 else ROUND_TIMEOUT

    def deadline(self, now: float) -> float:
        """Seconds until the current round closes at the latest."""
        return max(self.opened + self.timeout - now, 0.0)


def _unb64(text: str) -> bytes:
    try:
        return unb64(text)
    except ValueError as exc:
        raise Refusal(422, "invalid", "a key, share or ciphertext is not base64") from exc


def _keyed(items: Mapping[str, str]) -> dict[int, bytes]:
    try:
        return {int(k): _unb64(v) for k, v in items.items()}
    except ValueError as exc:
        raise Refusal(422, "invalid", "messages are keyed by user index") from exc


class SecaggRounds:
    """The cohorts in flight of every secagg run of one server (on the event loop)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.cohorts: dict[tuple[str, int], CohortRounds] = {}

    def _hosted(self, run_id: str) -> tuple[HostedRun, CohortSpec]:
        hosted = self.service.table.get(run_id)
        spec = hosted.run.calibration.cohort
        if spec is None:
            raise Refusal(404, "no_cohorts", f"run {run_id} is no secure-aggregation run")
        return hosted, spec

    def _cohort(self, run_id: str, cohort: int, create: bool = False) -> CohortRounds:
        hosted, spec = self._hosted(run_id)
        rounds = self.cohorts.get((run_id, cohort))
        if rounds is None:
            if not create:
                raise Refusal(404, "unknown_cohort", f"cohort {cohort} of run {run_id} is not"
                              " in flight (never opened, or lost in a server restart)")
            cal = hosted.run.calibration
            length = sum(int(np.prod(f.shape)) for f in cal.families)
            setup = cohort_setup(run_id, spec, cohort, length)
            rounds = self.cohorts[(run_id, cohort)] = CohortRounds(cohort, setup, time.time())
        self._tick(run_id, rounds, time.time())
        return rounds

    def _tick(self, run_id: str, rounds: CohortRounds, now: float) -> None:
        """Close the cohort's rounds that are due; once its unmasking round closed, start its
        rebuild and release (once)."""
        rounds.tick(now)
        if rounds.frozen and rounds.unmasking is None:
            rounds.unmasking = asyncio.get_running_loop().create_task(self._unmask(run_id, rounds))

    def _member(self, rounds: CohortRounds, ticket: str) -> int:
        index = rounds.members.get(ticket)
        if index is None:
            raise Refusal(403, "not_member", "this ticket is no member of the cohort")
        if rounds.outcome == "aborted":
            raise Refusal(410, "aborted", f"cohort {rounds.index} aborted: {rounds.why}")
        return index

    def _step(self, run_id: str, rounds: CohortRounds, fn: object, *args: object) -> None:
        """One member's message into the round (422 when malformed, or when the unmasking
        round closed: its messages are frozen while the sum is rebuilt); the round waits from
        now for the others."""
        if rounds.frozen:
            raise Refusal(422, "invalid", f"cohort {rounds.index}'s unmasking round has closed")
        try:
            fn(*args)  # type: ignore[operator]
        except MalformedInput as exc:
            raise Refusal(422, "invalid", str(exc)) from None
        now = time.time()
        rounds.opened = now
        self._tick(run_id, rounds, now)

    # -- round 0 --------------------------------------------------------------------------------

    async def advertise(self, run_id: str, cohort: int, ticket: str, cipher_key: str,
                        mask_key: str) -> int:
        """A member's public keys; its user index in the cohort. From now on the cohort holds
        the member's claim (`HostedRun.joined`): it never lapses, and it ends with the cohort,
        however long its rounds take. A claim of a cohort that takes no more members ends at
        once (410), so that its episode is handed out again."""
        hosted, spec = self._hosted(run_id)
        keys = _unb64(cipher_key), _unb64(mask_key)
        async with hosted.slot_freed:
            now = time.time()
            claim = hosted.open.get(ticket)
            if claim is None or claim.expires_at <= now:
                raise Refusal(403, "not_member", "no open claim has this ticket")
            if claim.episode // spec.size != cohort:
                raise Refusal(403, "not_member", f"episode {claim.episode} is in cohort"
                              f" {claim.episode // spec.size}, not {cohort}")
            rounds = self._cohort(run_id, cohort, create=True)
            if rounds.outcome is not None or rounds.round > 0:
                self._drop(hosted, ticket)
                hosted.slot_freed.notify_all()
                raise Refusal(410, "closed", f"cohort {cohort} takes no more members"
                              f" ({rounds.outcome or 'its rounds have begun'}): nothing of"
                              " this episode was counted, claim another")
            index = claim.episode % spec.size
            self._step(run_id, rounds, rounds.aggregator.advertise, Advertisement(index, *keys))
            hosted.joined[ticket] = hosted.open.pop(ticket)
            rounds.members[ticket] = index
            rounds.episodes[index] = claim.episode
            self._close_if_full(hosted, rounds, now)
        return index

    def _close_if_full(self, hosted: HostedRun, rounds: CohortRounds, now: float) -> None:
        """Under the run's lock, in round 0: when no more members can join, close the round
        with the members it has (at most every LOOK seconds per cohort: it scans the open
        claims).
        No more can join once every episode index of the cohort was handed out, or the run
        hands out no more claims (its K episodes are all reported, claimed or held), and no
        open claim of the cohort is left (its user still playing); but a cohort too small to
        release waits while other cohorts hold episodes (it closes, and ends the run, once it
        holds all the run has left). A cohort closed short of B takes no later claim: the
        next claim opens the next cohort (its unused indices are skipped, not reused: episode
        e stays in cohort e // B, the public schedule, and the closed cohort takes no more
        members). The skip moves only the run's next episode index, not its count of claims
        handed out (RunStatus.claimed: no claim was made for a skipped index, so the count
        exceeds K only by claims that ended unreported: lapsed, refused by a closed cohort or
        ended with an aborted one); a replay skips again past every stored cohort
        (`Replay._load`)."""
        if rounds.round != 0 or rounds.closing or rounds.outcome is not None:
            return
        if now - rounds.looked < LOOK and len(rounds.members) < rounds.setup.size:
            return
        rounds.looked = now
        first, end = rounds.index * rounds.setup.size, (rounds.index + 1) * rounds.setup.size
        pending = hosted.n_outstanding(now)  # lapsed claims swept first
        if hosted.next_episode < end and (hosted.run.reported + pending + hosted.held
                                          < hosted.config.episodes):
            return
        if any(first <= claim.episode < end for claim in hosted.open.values()):
            return
        members = len(rounds.members)
        if (members < rounds.setup.min_survivors
                and hosted.run.reported + members < hosted.config.episodes):
            return  # too few to release, and other cohorts still hold episodes: wait for
            # them (if they abort, their episodes come here), or for the join timeout
        rounds.closing = True
        hosted.next_episode = max(hosted.next_episode, end)
        rounds.tick(now)

    # -- the rounds' messages -------------------------------------------------------------------

    def share(self, run_id: str, cohort: int, ticket: str, sealed: Mapping[str, str]) -> None:
        rounds = self._cohort(run_id, cohort)
        index = self._member(rounds, ticket)
        self._step(run_id, rounds, rounds.aggregator.share, index, _keyed(sealed))

    def submit(self, run_id: str, cohort: int, ticket: str, masked: list[int]) -> None:
        rounds = self._cohort(run_id, cohort)
        index = self._member(rounds, ticket)
        try:  # a negative or too large integer does not fit
            arr = np.asarray(masked, dtype=np.uint64)
        except (OverflowError, ValueError, TypeError) as exc:
            raise Refusal(422, "invalid", "a masked input is a list of residues") from exc
        self._step(run_id, rounds, rounds.aggregator.submit, index, arr)

    def reveal(self, run_id: str, cohort: int, ticket: str, shares: Mapping[str, str]) -> None:
        rounds = self._cohort(run_id, cohort)
        index = self._member(rounds, ticket)
        self._step(run_id, rounds, rounds.aggregator.reveal, index, _keyed(shares))

    # -- long polls -----------------------------------------------------------------------------

    async def await_round(self, run_id: str, cohort: int, ticket: str | None, after: int,
                          wait: float) -> CohortRounds | None:
        """The cohort once round `after` has closed or it ended, waiting up to `wait` s
        (None: still open then). A member asking of an aborted cohort is answered 410."""
        end = time.monotonic() + wait
        while True:
            rounds = self._cohort(run_id, cohort)
            if (rounds.round == 0 and not rounds.closing and rounds.outcome is None
                    and time.time() - rounds.looked >= LOOK):  # the lock only when it may look
                hosted, _ = self._hosted(run_id)
                async with hosted.slot_freed:
                    self._close_if_full(hosted, rounds, time.time())
            if rounds.outcome == "aborted" and not rounds.dropped:
                await self._end_aborted(run_id, rounds)
            if ticket is not None:
                self._member(rounds, ticket)
            if rounds.ended or rounds.round > after:
                return rounds
            left = end - time.monotonic()
            if left <= 0:
                return None
            # round 0 also looks again every second whether more members can join
            look = 1.0 if rounds.round == 0 else math.inf
            try:
                await asyncio.wait_for(rounds.changed.wait(),
                                       min(left, look, rounds.deadline(time.time()) + 0.01))
            except TimeoutError:
                pass

    async def _end_aborted(self, run_id: str, rounds: CohortRounds) -> None:
        """An aborted cohort's claims end unreported, nothing counted or charged, and its
        episodes are handed out again; unless it holds every episode the run has left and too
        few to ever release: then they count as a cohort closed with nothing released (as
        the last cohort of a run in process that is too small), and the run reaches K."""
        hosted, spec = self._hosted(run_id)
        barrier = None
        async with hosted.slot_freed:
            if rounds.dropped:
                return
            rounds.dropped = True
            members = len(rounds.members)
            last = (members < spec.min_survivors
                    and hosted.run.reported + members >= hosted.config.episodes)
            if last:
                await fresh(hosted)
                hosted.run.privatizer.close_unreleased(  # type: ignore[attr-defined]
                    members, hosted.run.ledger)
                rows = self._reported(hosted, rounds, sorted(rounds.members.values()), None)
                barrier = self.service.record(hosted, rows, hosted.capture(time.time()))
            else:
                for ticket in rounds.members:
                    self._drop(hosted, ticket)
                hosted.publish(hosted.capture(time.time()))  # nothing to write: claims freed
            hosted.slot_freed.notify_all()
        if last:
            log.warning("run %s: cohort %d, the run's last %d episodes, too few to release:"
                        " counted, nothing released or charged: %s (%s)", run_id,
                        rounds.index, members, rounds.why, rounds.timing(time.time()))
        else:
            log.warning("run %s: cohort %d aborted, nothing released or charged: %s (%s)",
                        run_id, rounds.index, rounds.why, rounds.timing(time.time()))
        if barrier is not None:
            await durable(barrier)

    # -- the release ----------------------------------------------------------------------------

    async def _unmask(self, run_id: str, rounds: CohortRounds) -> None:
        """Once the unmasking round closed (a task of its own, started once): rebuild the sum
        in a worker thread, so the event loop serves other requests meanwhile, then release it
        on the loop under the run's lock. Nothing is stored or charged before `_release`: a
        restart meanwhile loses the cohort whole. A cohort that aborts here is ended by its
        members' next poll (`await_round`), as at any other round."""
        try:
            got = await in_thread(rounds.rebuild)
        except Exception as exc:  # a fault of the server's, not of a member: nothing released
            log.exception("run %s: cohort %d could not be unmasked", run_id, rounds.index)
            got = f"the server could not unmask the cohort: {exc!r}"
        rounds.rebuilt(got)
        if rounds.total is None:
            return
        try:
            await self._release(run_id, rounds)
        except Refusal as exc:  # the run was deleted, or its store failed (the cohort aborted)
            log.warning("run %s: cohort %d not released: %s", run_id, rounds.index, exc)

    async def _release(self, run_id: str, rounds: CohortRounds) -> None:
        """Under the run's lock (once, from `_unmask`): the cohort's sum into the run, its
        survivors' claims reported (their masked inputs stored) in one write; the others'
        claims dropped."""
        hosted, _ = self._hosted(run_id)
        async with hosted.slot_freed:
            if rounds.outcome is not None:  # aborted meanwhile
                return
            await fresh(hosted)
            assert rounds.total is not None
            agg = rounds.aggregator
            survivors = sorted(agg.survivors)
            try:
                outcome = hosted.run.privatizer.release_sum(  # type: ignore[attr-defined]
                    rounds.total, len(rounds.members), len(survivors), hosted.run.ledger)
            except Exception as exc:
                hosted.mark_stale()
                rounds.abort(f"the run could not take the cohort: {exc}")
                raise Refusal(503, "store", "the cohort could not be counted") from exc
            rows = self._reported(hosted, rounds, survivors, rounds.total)
            rounds.total = None
            rounds.outcome = outcome
            now = time.time()
            barrier = self.service.record(hosted, rows, hosted.capture(now))
            hosted.slot_freed.notify_all()
            log.info("run %s: cohort %d %s (%d of %d users; %d reported) %s", run_id,
                     rounds.index, outcome, len(survivors), len(rounds.members),
                     hosted.run.reported, rounds.timing(now))
        try:
            await durable(barrier)
        finally:  # the members waiting for the outcome hear it once it is on disk
            rounds._wake()

    def _reported(self, hosted: HostedRun, rounds: CohortRounds, counted: list[int],
                  total: np.ndarray | None) -> list[Statement]:
        """The rows of the `counted` members' reports (their masked inputs; the first row also
        the cohort's sum, None when nothing was released) and the memory changes; the other
        members' claims end unreported."""
        tickets = {i: t for t, i in rounds.members.items()}
        release = {"sum": None if total is None else total.tolist(),
                   "members": len(rounds.members), "survivors": len(rounds.aggregator.survivors)}
        rows: list[Statement] = []
        now = time.time()
        for n, i in enumerate(counted):
            ticket, episode = tickets[i], rounds.episodes[i]
            claim = hosted.joined.pop(ticket, None)
            payload = masked_payload(rounds.index, rounds.aggregator.inputs.get(i),
                                     None if n else release)
            ack = Ack(run_id=hosted.id, episode=episode, reported=hosted.run.reported)
            hosted.stored_reports += 1
            rows += Store.report_statements(ReportRow(
                hosted.id, hosted.stored_reports, ticket, episode, KIND, payload,
                hashlib.sha256(payload.encode()).hexdigest(), ack.model_dump_json()))
            if claim is not None:
                hosted._count(claim.policy_version, REPORTED)
                if claim.source is not None:
                    hosted.sources.reported(claim.source, ticket,
                                            now - (claim.expires_at - hosted.claim_timeout))
        for ticket, i in rounds.members.items():
            if i not in counted:
                self._drop(hosted, ticket)
        return rows

    def _drop(self, hosted: HostedRun, ticket: str) -> None:
        """A member's claim ends unreported (its slot is free again); its source is not
        blamed (a cohort's dropouts and aborts are not one client's lapse)."""
        claim = hosted.joined.pop(ticket, None) or hosted.open.pop(ticket, None)
        if claim is not None:
            hosted._count(claim.policy_version, EXPIRED)
            if claim.source is not None:
                hosted.sources.ended(claim.source, ticket)

    async def status(self, run_id: str, cohort: int, wait: float) -> dict[str, object] | None:
        """A cohort's public state once it ended (None: still in flight after `wait` s)."""
        rounds = await self.await_round(run_id, cohort, None, len(ROUNDS) - 1, wait)
        if rounds is None:
            return None
        return {"cohort": cohort, "round": rounds.round, "members": len(rounds.members),
                "survivors": len(rounds.aggregator.survivors), "outcome": rounds.outcome,
                "why": rounds.why}
