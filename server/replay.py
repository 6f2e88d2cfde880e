"""Rebuilding a hosted run from its store: replay the stored reports through a fresh `Run` at
the recorded planning points and noise epochs, checking every policy version and Ack against
the stored ones (a mismatch is a `RebuildError`: the run is not served); the stored form of a
policy version; and the claims a replay restores."""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from privrl.algorithms.base import PolicyMessage
from privrl.privacy.tree import NodeNoise
from privrl.protocol import Ack
from privrl.reports import ReportRejected, restore
from privrl.run import Run
from privrl.server import secagg_store
from privrl.server.ops import noise_epochs
from privrl.server.snapshot import CLAIMED, REPORTED, VersionEntry
from privrl.server.store import ClaimRow, PolicyRow, Store


class RebuildError(RuntimeError):
    """The stored reports do not replay to the stored policy log (the run is not served)."""


@dataclass
class OpenClaim:
    """A ticket handed out and not yet reported (it may have expired since)."""

    ticket: str
    episode: int
    policy_version: int
    expires_at: float
    message: PolicyMessage | None = None  # the policy message served; None: look it up in the log
    source: str | None = None  # who claimed it (None: a claim restored after a restart)


def arrays_json(arrays: dict[str, np.ndarray]) -> str:
    """A policy message's other arrays as stored: {name: {shape, data}} (floats exact)."""
    doc = {k: {"shape": list(v.shape), "data": v.ravel().tolist()} for k, v in arrays.items()}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def stored_message(row: PolicyRow) -> PolicyMessage:
    """The policy message (one replica, leading axis 1) of a stored policy version."""
    message = {"actions": np.asarray(json.loads(row.actions), dtype=np.int64)[None]}
    for name, arr in json.loads(row.arrays).items():
        message[name] = np.asarray(arr["data"], dtype=np.float64).reshape(arr["shape"])[None]
    return message


class Replay:
    """A hosted run's rebuild from its store (a mixin of `HostedRun`: what it reads of it)."""

    id: str
    run: Run
    store: Store
    version: int
    version_index: dict[int, int]
    entries: list[VersionEntry]
    served: np.ndarray
    claimed: int
    next_episode: int
    open: OrderedDict[str, OpenClaim]
    epoch: int
    stored_reports: int
    _reset: Callable[[], None]
    _plan: Callable[[], PolicyRow | None]
    _take: Callable[..., None]

    def _load(self) -> None:
        """(Re)build everything from the store; checks the replay against the stored log."""
        self._reset()
        self.run.privatizer.begin_replay(self._stored_noise())
        claims = self.store.claims(self.id)
        stored = {p.version: p for p in self.store.policies(self.id)}
        plan_points = {0} | {c.planned_at for c in claims}
        version_of = {c.ticket: c.policy_version for c in claims}
        messages = {v: stored_message(p) for v, p in stored.items()}
        self._replan(stored)
        epochs = self.store.noise_epochs(self.id)
        self._enter_epochs(epochs)
        cohorts_closed = 0  # secure-aggregation cohorts 0 .. this - 1 take no more members
        for rep in self.store.reports(self.id):
            version = version_of[rep.ticket]
            served = messages[version]
            stored_ack = Ack.model_validate_json(rep.ack)
            self.stored_reports = rep.seq
            if rep.kind == secagg_store.KIND:  # a secure-aggregation cohort's report
                cohort = secagg_store.replay_masked(self.run, rep.payload)
                cohorts_closed = max(cohorts_closed, cohort + 1)
            else:
                try:
                    accepted = restore(rep.kind, rep.payload, self.run, served, version)
                except ReportRejected as exc:
                    raise RebuildError(f"run {self.id}: stored report {rep.seq}: {exc}"
                                       ) from exc
                self._take(accepted, rep.episode, served, time.time(),
                           replayed=stored_ack.reported > self.run.reported)
            if stored_ack.reported != self.run.reported:
                raise RebuildError(f"run {self.id}: report {rep.seq} replays out of order")
            if self.run.reported in plan_points:
                self._replan(stored)
            self._enter_epochs(epochs)
        self.run.privatizer.end_replay()
        if stored and self.version != max(stored):
            raise RebuildError(
                f"run {self.id}: replay reached policy version {self.version}, the log has"
                f" {max(stored)}"
            )
        self.claimed = len(claims)
        self.next_episode = max((c.episode for c in claims), default=-1) + 1
        if cohorts_closed:  # past the unused indices of a stored cohort closed short of B
            spec = self.run.calibration.cohort
            assert spec is not None
            self.next_episode = max(self.next_episode, cohorts_closed * spec.size)
        self._count_served(claims)
        pending = [c for c in claims if c.state == "open"]
        self.open = OrderedDict(
            (c.ticket, OpenClaim(c.ticket, c.episode, c.policy_version, c.expires_at,
                                 messages.get(c.policy_version)))
            for c in sorted(pending, key=lambda c: c.expires_at)
        )

    def _enter_epochs(self, epochs: list[tuple[int, int, int]]) -> None:
        """During a replay: start the stored noise epochs that began at the current count."""
        for epoch, at, published in epochs:
            if at == self.run.reported and epoch > self.epoch:
                noise_epochs.start(self.run, epoch, published)
                self.epoch = epoch

    def _count_served(self, claims: list[ClaimRow]) -> None:
        """The policy log's episode counts and first episodes, from the stored claims (the
        open ones are counted as they lapse or are reported)."""
        first: dict[int, int] = {}
        for c in claims:
            i = self.version_index[c.policy_version]
            first.setdefault(i, c.episode)
            self.served[i, CLAIMED] += 1
            self.served[i, REPORTED] += c.state == "reported"
        start = self.next_episode
        for i in reversed(range(len(self.entries))):  # a version never served starts where
            start = first.get(i, start)  # the next one does
            self.entries[i] = VersionEntry(self.entries[i].version, start,
                                           self.entries[i].actions, self.entries[i].arrays)

    def _stored_noise(self) -> list[NodeNoise]:
        """The node noise this run drew and stored (unseeded backend only; else empty)."""
        return [
            NodeNoise(r.family, r.level, r.index, np.frombuffer(r.value, dtype="<f8"))
            for r in self.store.node_noise(self.id)
        ]

    def _replan(self, stored: dict[int, PolicyRow]) -> None:
        """Plan during a replay; a new version must equal the stored one."""
        new = self._plan()
        if new is None:
            return
        old = stored.get(new.version)
        if old is None or json.loads(old.actions) != json.loads(new.actions) or json.loads(
            old.arrays
        ) != json.loads(new.arrays):
            raise RebuildError(f"run {self.id}: policy version {new.version} does not replay")
