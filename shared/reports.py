"""The one place a report is checked: kind, lengths, shapes, ranges, against its run.

`accept` turns a schema-valid report (pydantic already checked types and finiteness at the edge)
into one typed `Accepted` object, or raises `ReportRejected` whose message says exactly what is
wrong; nothing is changed before every check has passed. `restore` rebuilds the same object from
its stored canonical form for a replay. Messages name positions and bounds, never the submitted
values of other fields (they are the user's data).

Which kind a run takes comes from its algorithm (`Algorithm.report_kind`); how each kind is
checked comes from the `KINDS` table below, so no code here branches on an algorithm's name.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from privrl.algorithms.base import PolicyMessage
from privrl.privacy.calibration import FALSE_REFUSAL, Calibration
from privrl.privacy.grid import first_off_grid
from privrl.protocol import NoisyReport, ReturnsReport, TrajectoryReport
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


def _invalid(detail: str) -> ReportRejected:
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
            raise _invalid(f"{name} must have {what} = {want} entries, got {len(values)}")
    bad = _first_out_of_range(report.states, n_s)
    if bad is not None:
        raise _invalid(f"states[{bad}] is outside [0, S) = [0, {n_s})")
    bad = _first_out_of_range(report.actions, n_a)
    if bad is not None:
        raise _invalid(f"actions[{bad}] is outside [0, A) = [0, {n_a})")
    bad = next((h for h, r in enumerate(report.rewards) if not 0.0 <= r <= 1.0), None)
    if bad is not None:  # the schema states it; a packed reward is only checked here
        raise _invalid(f"rewards[{bad}] is not a number in [0, 1]")
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
        raise _invalid(
            f"actions[{h}] is {what.format(v=version)} in states[{h}]; a user plays the policy"
            " it was sent"
        )
    rewards = np.asarray(report.rewards, dtype=np.float64)
    if run.calibration.integer and run.algorithm.integer_rewards:
        bad_reward = np.flatnonzero((rewards != 0.0) & (rewards != 1.0))
        if bad_reward.size:
            h = int(bad_reward[0])
            raise _invalid(f"rewards[{h}] must be 0 or 1: this run releases integer reward"
                           " counts, so users report Bernoulli(r) rewards")
    return Trajectories(states=states[None], actions=actions[None], rewards=rewards[None])


def _noisy(report: NoisyReport, calibration: Calibration) -> Stats:
    """An LDP report: exactly the released families, exact flattened sizes, every entry within
    its family's clean range widened by the mechanism's tail at a false-refusal probability of
    FALSE_REFUSAL per honest report (`Calibration.acceptance_margin`), and on its family's
    public grid under integer noise."""
    want = {f.name: f.shape for f in calibration.families}
    got = set(report.arrays)
    if got != set(want):
        missing = sorted(set(want) - got)
        extra = sorted(got - set(want))
        parts = [f"missing {missing}"] if missing else []
        parts += [f"unexpected {extra}"] if extra else []
        raise _invalid(
            f"arrays must be exactly the released families {sorted(want)}: " + ", ".join(parts)
        )
    out = {}
    for name in sorted(want):
        fam = calibration.family(name)
        shape = want[name]
        size = math.prod(shape)
        try:
            arr = report.array(name)
        except ValueError as exc:
            raise _invalid(f"arrays[{name!r}] is not base64 of little-endian float64s: {exc}"
                           ) from None
        if arr.size != size:
            raise _invalid(
                f"arrays[{name!r}] must have {size} entries (shape {list(shape)} flattened in C"
                f" order), got {arr.size}"
            )
        margin = calibration.acceptance_margin(FALSE_REFUSAL, name)
        lo, hi = fam.clean_min - margin, fam.clean_max + margin
        inside = (arr >= lo) & (arr <= hi)  # false for NaN
        if not (inside.all() and math.isfinite(hi - lo)):  # one pass for an honest report
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                raise _invalid(f"arrays[{name!r}][{int(bad[0])}] is not a finite number")
            outside = np.flatnonzero(~inside)
            if outside.size:
                raise _invalid(
                    f"arrays[{name!r}][{int(outside[0])}] is outside [{lo:.6g}, {hi:.6g}]: a"
                    f" clean value in [{fam.clean_min:g}, {fam.clean_max:g}] plus this run's"
                    f" noise lands there with probability below {FALSE_REFUSAL:g} per honest"
                    " report"
                )
        off = first_off_grid(arr, fam.grid) if calibration.integer else None
        if off is not None:
            raise _invalid(
                f"arrays[{name!r}][{off}] is not on this run's public grid (integer multiples of"
                f" {fam.grid:g}): its noise is integer, drawn in grid units"
            )
        arr = arr.reshape((1, *shape))
        if fam.symmetric:
            asym = np.argwhere(arr != np.swapaxes(arr, -1, -2))
            if asym.size:
                where = tuple(int(i) for i in asym[0][1:])
                raise _invalid(
                    f"arrays[{name!r}] must hold symmetric matrices (its last two axes), but entry"
                    f" {list(where)} differs from its mirror; honest users mirror their noise"
                )
        out[name] = arr
    return out


def _body(report: AnyReport) -> dict:
    """The report without its ticket and kind (what is stored and hashed). Noisy arrays are
    stored packed (base64 float64, lossless) in whichever form they came; first-visit returns
    sparse, in whichever form they came."""
    try:
        if isinstance(report, NoisyReport):
            return {"arrays": report.packed()}
        if isinstance(report, ReturnsReport):
            return {"visits": [list(pair) for pair in report.pairs()]}
    except ValueError:  # not valid: refused by the checks; only hashed, never stored
        pass
    return report.model_dump(mode="json", exclude={"ticket", "kind"}, exclude_none=True)


# json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False), without building
# the encoder again for every report
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)


def _canonical(kind: str, body: dict) -> tuple[str, str]:
    """(payload JSON, sha256 digest): key order and float text fixed."""
    payload = _CANONICAL.encode(body)
    return payload, hashlib.sha256(f"{kind}\n{payload}".encode()).hexdigest()


def _accept_trajectory(report: AnyReport, run: Run, served: PolicyMessage, version: int
                       ) -> Accepted:
    assert isinstance(report, TrajectoryReport)
    traj = _trajectory(report, run, served, version)
    return Accepted(report.kind, *_canonical(report.kind, _body(report)), trajectories=traj)


def _accept_noisy(report: AnyReport, run: Run, served: PolicyMessage, version: int
                  ) -> Accepted:
    assert isinstance(report, NoisyReport)
    noisy = _noisy(report, run.calibration)
    # `_body(report)` from the arrays just decoded and checked (the same floats, the same text)
    body = {"arrays": {name: pack_floats(noisy[name]) for name in sorted(noisy)}}
    return Accepted(report.kind, *_canonical(report.kind, body), noisy=noisy)


def _first_visits(report: ReturnsReport, run: Run) -> FirstVisits:
    """First-visit returns: every state in [0, S), each at most once (one return per state per
    user); the values' finiteness and sign were checked by the schema (sparse form) or here
    (dense form, which must hold exactly S values)."""
    n_states = run.config.n_states
    try:
        pairs = report.pairs()
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    if report.returns is not None and len(report.returns) != len(pack_floats(np.zeros(n_states))):
        raise _invalid(f"returns must hold S = {n_states} packed float64s")
    states = [s for s, _ in pairs]
    bad = _first_out_of_range(states, n_states)
    if bad is not None:
        raise _invalid(f"visits[{bad}] names a state outside [0, S) = [0, {n_states})")
    seen: set[int] = set()
    for i, s in enumerate(states):
        if s in seen:
            raise _invalid(
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
        raise _invalid(str(exc)) from None
    return Accepted(report.kind, *_canonical(report.kind, _body(report)), trajectories=visits)


KindCheck = Callable[[AnyReport, "Run", PolicyMessage, int], Accepted]
KINDS: dict[str, tuple[type[AnyReport], KindCheck]] = {
    "trajectory": (TrajectoryReport, _accept_trajectory),
    "noisy": (NoisyReport, _accept_noisy),
    "returns": (ReturnsReport, _accept_returns),
}
DESCRIBE = {
    "trajectory": "raw trajectories (states, actions, rewards)",
    "noisy": "locally randomized arrays",
    "returns": "first-visit returns [[state, return], ...]",
}


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
            f" kind={want!r} reports ({DESCRIBE.get(want, want)});{extra}",
        )
    return KINDS[report.kind][1](report, run, served, version)


def digest_of(report: AnyReport) -> str:
    """The digest a report would be stored under (to recognise a retry)."""
    return _canonical(report.kind, _body(report))[1]


def restore(kind: str, payload: str, run: Run, served: PolicyMessage, version: int) -> Accepted:
    """A stored report as accepted (for a replay): parsed and checked by the same code."""
    model = KINDS[kind][0]
    report = model.model_validate({**json.loads(payload), "kind": kind, "ticket": "0" * 16})
    return accept(report, run, served, version)
