"""The one place a report is checked: kind, lengths, shapes, ranges, against its run.

`accept` turns a schema-valid report (pydantic already checked types and finiteness at the edge)
into one typed `Accepted` object, or raises `ReportRejected` whose message says exactly what is
wrong; nothing is changed before every check has passed. `restore` rebuilds the same object from
its stored canonical form for a replay. Messages name positions and bounds, never the submitted
values of other fields (they are the user's data).

Which kind a run takes comes from its algorithm (`Algorithm.report_kind`); each kind is one
`ReportKind` (its wire model, its acceptance check, its description), registered by its owner:
the raw kinds ("trajectory", "returns", what algorithms report to a curator that sees raw data)
here, a trust boundary's own kind in the boundary's module ("noisy": `privrl.trust.local`). No
code here branches on an algorithm's or a boundary's name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, get_args

import numpy as np
from privrl import trust
from privrl.algorithms.base import PolicyMessage
from privrl.protocol import NoisyReport, Report, ReturnsReport, TrajectoryReport
from privrl.stats import Stats
from privrl.wire import pack_floats
from privrl.worlds.first_visit import FirstVisits
from privrl.worlds.rollout import Trajectories

if TYPE_CHECKING:
    from privrl.run import Run

AnyReport = TrajectoryReport | NoisyReport | ReturnsReport


class ReportRejected(ValueError):
    """A report that fails a check: `code` for programs, the message for people."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def invalid(detail: str) -> ReportRejected:
    """A refusal of a report's content (code "invalid")."""
    return ReportRejected("invalid", detail)


@dataclass(frozen=True)
class Accepted:
    """A report that passed every check: its canonical stored form and what the run ingests."""

    kind: str
    payload: str  # canonical JSON (ticket excluded)
    digest: str
    trajectories: Trajectories | FirstVisits | None = None  # raw reports (JDP / non-private)
    noisy: Stats | None = None  # locally randomized reports (LDP)

    def ingest(self, run: Run, served: PolicyMessage) -> None:
        """Feed the run: raw trajectories with the message they were played under, or noise."""
        if self.trajectories is not None:
            run.ingest_trajectories(self.trajectories, served)
        else:
            assert self.noisy is not None
            run.ingest_noisy(self.noisy)


def _first_out_of_range(values: list[int], upper: int) -> int | None:
    """Index of the first value not in [0, upper), or None."""
    return next((i for i, v in enumerate(values) if not 0 <= v < upper), None)


def _trajectory(report: TrajectoryReport, run: Run, served: PolicyMessage, version: int
                ) -> Trajectories:
    """A raw trajectory checked against (S, A, H) and the policy served with its ticket."""
    cfg = run.config
    n_s, n_a, horizon = cfg.n_states, cfg.n_actions, cfg.horizon
    for name, values, want, what in (
        ("states", report.states, horizon + 1, "H+1 (s_1..s_{H+1})"),
        ("actions", report.actions, horizon, "H (a_1..a_H)"),
        ("rewards", report.rewards, horizon, "H (r_1..r_H)"),
    ):
        if len(values) != want:
            raise invalid(f"{name} must have {what} = {want} entries, got {len(values)}")
    bad = _first_out_of_range(report.states, n_s)
    if bad is not None:
        raise invalid(f"states[{bad}] is outside [0, S) = [0, {n_s})")
    bad = _first_out_of_range(report.actions, n_a)
    if bad is not None:
        raise invalid(f"actions[{bad}] is outside [0, A) = [0, {n_a})")
    bad = next((h for h, r in enumerate(report.rewards) if not 0.0 <= r <= 1.0), None)
    if bad is not None:  # the schema states it; a packed reward is only checked here
        raise invalid(f"rewards[{bad}] is not a number in [0, 1]")
    states = np.asarray(report.states, dtype=np.int64)
    actions = np.asarray(report.actions, dtype=np.int64)
    if "probs" in served:  # a stochastic policy: the action must be possible
        possible = served["probs"][0][np.arange(horizon), states[:-1], actions] > 0
        wrong = np.flatnonzero(~possible)
        what = "an action that policy version {v} (served with this ticket) never takes"
    else:
        played = served["actions"][0][np.arange(horizon), states[:-1]]
        wrong = np.flatnonzero(played != actions)
        what = "not the action that policy version {v} (served with this ticket) takes"
    if wrong.size:
        h = int(wrong[0])
        raise invalid(
            f"actions[{h}] is {what.format(v=version)} in states[{h}]; a user plays the policy"
            " it was sent"
        )
    rewards = np.asarray(report.rewards, dtype=np.float64)
    if run.calibration.integer and run.algorithm.integer_rewards:
        bad_reward = np.flatnonzero((rewards != 0.0) & (rewards != 1.0))
        if bad_reward.size:
            h = int(bad_reward[0])
            raise invalid(f"rewards[{h}] must be 0 or 1: this run releases integer reward"
                           " counts, so users report Bernoulli(r) rewards")
    return Trajectories(states=states[None], actions=actions[None], rewards=rewards[None])


def plain_body(report: AnyReport) -> dict:
    """The report's fields as the schema dumps them, without its ticket and kind."""
    return report.model_dump(mode="json", exclude={"ticket", "kind"}, exclude_none=True)


def _body(report: AnyReport) -> dict:
    """The report without its ticket and kind (what is stored and hashed): its kind's `body`."""
    try:
        return kind_named(report.kind).body(report)
    except ValueError:  # not valid: refused by the checks; only hashed, never stored
        return plain_body(report)


# json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False), without building
# the encoder again for every report
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)


def canonical(kind: str, body: dict) -> tuple[str, str]:
    """(payload JSON, sha256 digest): key order and float text fixed."""
    payload = _CANONICAL.encode(body)
    return payload, hashlib.sha256(f"{kind}\n{payload}".encode()).hexdigest()


KindCheck = Callable[[AnyReport, "Run", PolicyMessage, int], Accepted]


@dataclass(frozen=True)
class ReportKind:
    """One report kind, declared once by its owner: `model` its wire model (the member of
    `privrl.protocol.Report` whose `kind` is `name`), `accept` its check against a run (an
    `Accepted`, or `ReportRejected`), `describe` a few words for error messages, and `body` its
    stored form without ticket and kind (a ValueError for an invalid report: then `plain_body`
    is hashed, never stored)."""

    name: str
    model: type[AnyReport]
    accept: KindCheck
    describe: str
    body: Callable[[AnyReport], dict] = plain_body

    def __post_init__(self) -> None:
        if get_args(self.model.model_fields["kind"].annotation) != (self.name,):
            raise ValueError(f"report kind {self.name!r}: its model {self.model.__name__}"
                             " states another kind")


_kinds: dict[str, ReportKind] = {}


def register_kind(kind: ReportKind) -> ReportKind:
    """Add `kind` under its name (a name is registered once)."""
    old = _kinds.get(kind.name)
    if old is not None and old is not kind:
        raise ValueError(f"a report kind named {kind.name!r} is registered already")
    _kinds[kind.name] = kind
    return kind


def kind_named(name: str) -> ReportKind:
    """The kind registered as `name` (KeyError if none); the trust boundaries, which declare
    their own kinds, are loaded first."""
    if name not in _kinds:
        trust.names()  # loads every boundary's module
    return _kinds[name]


def kinds() -> tuple[ReportKind, ...]:
    """Every kind the wire schema takes, in its order (`privrl.protocol.Report`)."""
    models = get_args(get_args(Report)[0])
    return tuple(kind_named(get_args(m.model_fields["kind"].annotation)[0]) for m in models)


def _accept_trajectory(report: AnyReport, run: Run, served: PolicyMessage, version: int
                       ) -> Accepted:
    assert isinstance(report, TrajectoryReport)
    traj = _trajectory(report, run, served, version)
    return Accepted(report.kind, *canonical(report.kind, _body(report)), trajectories=traj)


def _first_visits(report: ReturnsReport, run: Run) -> FirstVisits:
    """First-visit returns: every state in [0, S), each at most once (one return per state per
    user); the values' finiteness and sign were checked by the schema (sparse form) or here
    (dense form, which must hold exactly S values)."""
    n_states = run.config.n_states
    try:
        pairs = report.pairs()
    except ValueError as exc:
        raise invalid(str(exc)) from None
    if report.returns is not None and len(report.returns) != len(pack_floats(np.zeros(n_states))):
        raise invalid(f"returns must hold S = {n_states} packed float64s")
    states = [s for s, _ in pairs]
    bad = _first_out_of_range(states, n_states)
    if bad is not None:
        raise invalid(f"visits[{bad}] names a state outside [0, S) = [0, {n_states})")
    seen: set[int] = set()
    for i, s in enumerate(states):
        if s in seen:
            raise invalid(
                f"visits[{i}] repeats a state listed earlier: a user reports one first-visit"
                " return per state"
            )
        seen.add(s)
    return FirstVisits.from_pairs(pairs, n_states)


def _accept_returns(report: AnyReport, run: Run, served: PolicyMessage, version: int
                    ) -> Accepted:
    assert isinstance(report, ReturnsReport)
    visits = _first_visits(report, run)
    try:  # the algorithm's own checks of a contribution (e.g. an impossible return)
        run.algorithm.user_statistics(visits, served)
    except ValueError as exc:
        raise invalid(str(exc)) from None
    return Accepted(report.kind, *canonical(report.kind, _body(report)), trajectories=visits)


def _returns_body(report: AnyReport) -> dict:
    """First-visit returns stored sparse, in whichever form they came."""
    assert isinstance(report, ReturnsReport)
    return {"visits": [list(pair) for pair in report.pairs()]}


# the raw kinds: what algorithms report to a curator that sees raw data (`raw_report_kind`)
TRAJECTORY = register_kind(ReportKind("trajectory", TrajectoryReport, _accept_trajectory,
                                      "raw trajectories (states, actions, rewards)"))
RETURNS = register_kind(ReportKind("returns", ReturnsReport, _accept_returns,
                                   "first-visit returns [[state, return], ...]",
                                   body=_returns_body))


def _describe(name: str) -> str:
    """A kind's description (its name if no kind of that name is registered)."""
    try:
        return kind_named(name).describe
    except KeyError:
        return name


def accept(report: AnyReport, run: Run, served: PolicyMessage, version: int) -> Accepted:
    """Check `report` once against `run` and the message served with its ticket."""
    want = run.algorithm.report_kind(run.config.privacy)
    if report.kind != want:
        # a boundary that turns raw reports into another kind must never see a raw one
        raw = run.algorithm.raw_report_kind
        extra = " a raw report must never be sent to it" if want != raw else ""
        raise ReportRejected(
            "wrong_kind",
            f"this is a {run.config.privacy!r} run of {run.config.algo!r}: it accepts only"
            f" kind={want!r} reports ({_describe(want)});{extra}",
        )
    return kind_named(report.kind).accept(report, run, served, version)


def digest_of(report: AnyReport) -> str:
    """The digest a report would be stored under (to recognise a retry)."""
    return canonical(report.kind, _body(report))[1]


def restore(kind: str, payload: str, run: Run, served: PolicyMessage, version: int) -> Accepted:
    """A stored report as accepted (for a replay): parsed and checked by the same code."""
    model = kind_named(kind).model
    report = model.model_validate({**json.loads(payload), "kind": kind, "ticket": "0" * 16})
    return accept(report, run, served, version)
