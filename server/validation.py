"""Checks of one report against its run (kind, lengths, shapes, ranges) and its canonical form.

Everything here is a pure function: a report is either turned into the arrays a `Run` ingests,
or refused with a `Refusal` (422) whose message says exactly what is wrong. Nothing is changed
before every check has passed. Messages name positions and bounds, never the submitted values of
other fields (they are the user's data).
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from server.errors import Refusal
from shared.config import RunConfig
from shared.privacy.calibration import FALSE_REFUSAL, Calibration
from shared.protocol import NoisyReport, TrajectoryReport
from shared.worlds.rollout import Trajectories

AnyReport = TrajectoryReport | NoisyReport


def _invalid(detail: str) -> Refusal:
    """A 422 refusal of a report's content."""
    return Refusal(422, "invalid", detail)


def check_kind(report: AnyReport, config: RunConfig) -> None:
    """Refuse a report whose kind does not match the run's privacy mode."""
    if config.privacy == "ldp" and report.kind != "noisy":
        raise Refusal(
            422,
            "wrong_kind",
            "this is an LDP run: it accepts only kind='noisy' reports (locally randomized arrays);"
            " a raw trajectory must never be sent to it",
        )
    if config.privacy != "ldp" and report.kind != "trajectory":
        raise Refusal(
            422,
            "wrong_kind",
            f"this is a {config.privacy!r} run: it accepts only kind='trajectory' reports"
            " (states, actions, rewards)",
        )


def _first_out_of_range(values: list[int], upper: int) -> int | None:
    """Index of the first value not in [0, upper), or None."""
    return next((i for i, v in enumerate(values) if not 0 <= v < upper), None)


def trajectory_arrays(
    report: TrajectoryReport, config: RunConfig, policy: np.ndarray, version: int
) -> Trajectories:
    """Validate a raw trajectory against (S, A, H) and the policy served with its ticket."""
    n_s, n_a, horizon = config.n_states, config.n_actions, config.horizon
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
    states = np.asarray(report.states, dtype=np.int64)
    actions = np.asarray(report.actions, dtype=np.int64)
    played = policy[np.arange(horizon), states[:-1]]
    wrong = np.flatnonzero(played != actions)
    if wrong.size:
        h = int(wrong[0])
        raise _invalid(
            f"actions[{h}] is not the action that policy version {version} (served with this"
            f" ticket) takes in states[{h}]; a user plays the policy it was sent"
        )
    rewards = np.asarray(report.rewards, dtype=np.float64)
    return Trajectories(states=states[None], actions=actions[None], rewards=rewards[None])


def noisy_arrays(
    report: NoisyReport, config: RunConfig, calibration: Calibration
) -> dict[str, np.ndarray]:
    """Validate an LDP report: exactly the released families, exact flattened sizes, and every
    entry within its family's clean range widened by the mechanism's tail at a false-refusal
    probability of FALSE_REFUSAL per honest report (`Calibration.acceptance_margin`)."""
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
    margin = calibration.acceptance_margin(FALSE_REFUSAL)
    clean = {f.name: f.clean_max for f in calibration.families}
    out = {}
    for name in sorted(want):
        shape = want[name]
        size = math.prod(shape)
        values = report.arrays[name]
        if len(values) != size:
            raise _invalid(
                f"arrays[{name!r}] must have {size} entries (shape {list(shape)} flattened in C"
                f" order), got {len(values)}"
            )
        arr = np.asarray(values, dtype=np.float64)
        lo, hi = -margin, clean[name] + margin
        outside = np.flatnonzero((arr < lo) | (arr > hi))
        if outside.size:
            raise _invalid(
                f"arrays[{name!r}][{int(outside[0])}] is outside [{lo:.6g}, {hi:.6g}]: a clean"
                f" value in [0, {clean[name]:g}] plus this run's noise lands there with"
                f" probability below {FALSE_REFUSAL:g} per honest report"
            )
        out[name] = arr.reshape((1, *shape))
    return out


def canonical(report: AnyReport) -> tuple[str, str]:
    """(payload JSON, sha256 digest): key order and float text fixed, the ticket excluded."""
    if isinstance(report, TrajectoryReport):
        body = {"states": report.states, "actions": report.actions, "rewards": report.rewards}
    else:
        body = {"arrays": {k: report.arrays[k] for k in sorted(report.arrays)}}
    payload = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    digest = hashlib.sha256(f"{report.kind}\n{payload}".encode()).hexdigest()
    return payload, digest


def decode_trajectory(payload: str) -> Trajectories:
    """A stored trajectory payload as arrays (for replay)."""
    body = json.loads(payload)
    return Trajectories(
        states=np.asarray(body["states"], dtype=np.int64)[None],
        actions=np.asarray(body["actions"], dtype=np.int64)[None],
        rewards=np.asarray(body["rewards"], dtype=np.float64)[None],
    )


def decode_noisy(payload: str, calibration: Calibration) -> dict[str, np.ndarray]:
    """A stored noisy payload as (1, *shape) arrays (for replay)."""
    arrays = json.loads(payload)["arrays"]
    return {
        f.name: np.asarray(arrays[f.name], dtype=np.float64).reshape((1, *f.shape))
        for f in calibration.families
    }
