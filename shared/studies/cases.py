"""What `privrl frontier` runs: the learning cases, their ε ranges, and the ablation's levers.

A *case* is an (algorithm, privacy mode, knobs) on the algorithm's default world; the study runs
it under both presets at every ε of its grid. A *lever* is a named set of overrides (RunConfig
fields and knobs) by which the practical preset departs from the faithful one; the ablation
applies each lever alone, then all of them, to the faithful preset at one ε per family. A lever
whose field or knob this build does not have is named, and reported as not available.
Sensitivities from the public features are not a lever: both presets use them. Nor is the exact
Gaussian privacy profile: it accounts float-noise ledgers only, and the study runs integer noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import trust
from ..algorithms import registry
from ..config import RunConfig

LEVER_KINDS = ("schedule", "counter", "split", "sensitivity", "accounting", "learner")


@dataclass(frozen=True)
class Case:
    """One learning case: an algorithm in one privacy mode with fixed knobs, and its ε range."""

    name: str
    algo: str
    privacy: str
    knobs: Mapping[str, Any] = field(default_factory=dict)
    epsilon_range: tuple[float, float] = (0.1, 1e5)
    target: float | None = None  # the ε from which the case should learn: always on its grid

    @property
    def title(self) -> str:
        """'dp-ucbvi pooled JDP': the boundary's label from the registry."""
        extra = " pooled" if self.knobs.get("pooled") else ""
        return f"{self.algo}{extra} {trust.get(self.privacy).label}"

    def grid(self, size: int) -> list[float]:
        """`size` log-spaced ε over the case's range, at two significant digits, and the
        target ε (so the study answers whether the case learns there)."""
        lo, hi = self.epsilon_range
        points = np.geomspace(lo, hi, size) if size > 1 else np.array([hi])
        grid = {float(f"{e:.2g}") for e in points}
        return sorted(grid | ({self.target} if self.target is not None else set()))


@dataclass(frozen=True)
class Lever:
    """Overrides of the faithful preset: RunConfig fields and the algorithm's knobs."""

    kind: str  # one of LEVER_KINDS
    label: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    knobs: Mapping[str, Any] = field(default_factory=dict)

    def overrides(self) -> str:
        """'counter=matrix, knob beta_scale=0.1'."""
        parts = [f"{k}={v}" for k, v in self.fields.items()]
        parts += [f"knob {k}={v}" for k, v in self.knobs.items()]
        return ", ".join(parts)

    def missing(self, algo: str) -> list[str]:
        """The fields and knobs this lever names that this build lacks (empty: available)."""
        knobs = registry.get(algo).knobs_model.model_fields
        return ([f"RunConfig has no field {k!r}" for k in self.fields
                 if k not in RunConfig.model_fields]
                + [f"{algo} has no knob {k!r}" for k in self.knobs if k not in knobs])


@dataclass(frozen=True)
class Ablation:
    """A case's levers, measured at one ε."""

    case: str
    epsilon: float
    levers: tuple[Lever, ...]


def _name(boundary: trust.TrustBoundary | None) -> str:
    assert boundary is not None, "the built-in boundaries are always registered"
    return boundary.name


# the boundaries the rows measure, asked of the registry by what they declare
JDP, LDP, SECAGG = (_name(trust.central_boundary()), _name(trust.local_boundary()),
                    _name(trust.cohort_boundary()))

# targets: the ε from which each family should learn (the project's goals for the practical preset)
CASES: tuple[Case, ...] = (
    Case("dp-ucbvi-step-jdp", "dp-ucbvi", JDP, {}, (0.1, 100.0), 1.0),
    Case("dp-ucbvi-pooled-jdp", "dp-ucbvi", JDP, {"pooled": True}, (0.01, 10.0), 0.1),
    Case("dp-ucbvi-pooled-ldp", "dp-ucbvi", LDP, {"pooled": True}, (0.3, 1000.0), 5.0),
    Case("ucrl-vtr-jdp", "ucrl-vtr", JDP, {}, (0.1, 1e5), 1.0),
    Case("ucrl-vtr-ldp", "ucrl-vtr", LDP, {}, (1.0, 1e6), 1000.0),
    # UCRL-VTR+ (Luyo et al. 2021, App. D): its four privatized families share UCRL-VTR's budget,
    # so its targets sit above UCRL-VTR's (where it learned at K = 5,000, docs/results/linear.md)
    Case("ucrl-vtr-plus-jdp", "ucrl-vtr-plus", JDP, {}, (0.1, 1e5), 30.0),
    Case("ucrl-vtr-plus-ldp", "ucrl-vtr-plus", LDP, {}, (1.0, 1e6), 3000.0),
    Case("linopt-vi-jdp", "linopt-vi", JDP, {}, (0.1, 1e5), 10.0),
    Case("linopt-po-jdp", "linopt-po", JDP, {}, (0.1, 1e5), 10.0),
    Case("lsvi-ucb-batched-jdp", "lsvi-ucb-batched", JDP, {}, (1.0, 1e5), 10.0),
    Case("lsvi-ucb-switching-jdp", "lsvi-ucb-switching", JDP, {}, (1.0, 1e5), 100.0),
    # secure aggregation (docs/explanation/secure-aggregation.md), every family with an LDP mode:
    # the targets are the secure-aggregation goals for DP-UCBVI and UCRL-VTR (pooled at
    # eps <= 1, per step at <= 3, UCRL-VTR at <= 10); LinOpt's, three times its JDP goal, was
    # set before any measurement (docs/results/frontier.md has them all)
    Case("dp-ucbvi-step-secagg", "dp-ucbvi", SECAGG, {}, (0.3, 300.0), 3.0),
    Case("dp-ucbvi-pooled-secagg", "dp-ucbvi", SECAGG, {"pooled": True}, (0.03, 30.0), 1.0),
    Case("ucrl-vtr-secagg", "ucrl-vtr", SECAGG, {}, (0.3, 3e4), 10.0),
    Case("linopt-vi-secagg", "linopt-vi", SECAGG, {}, (0.3, 3e4), 30.0),
    Case("linopt-po-secagg", "linopt-po", SECAGG, {}, (0.3, 3e4), 30.0),
)

# Levers shared by every family: the continual-release layer (counters and schedules)
SMOOTHED = Lever("counter", "smoothed tree", {"counter": "smoothed"})
# banded: the full factorization's O(T) work per release does not fit K = 50,000 releases
MATRIX_COUNTER = Lever("counter", "banded matrix-factorization counter (256 bands)",
                       {"counter": "matrix", "counter_bands": 256})
GEOMETRIC = Lever("schedule", "geometric releases (r = 1.1)", {"schedule": "geometric:1.1"})
ZCDP_SPLIT = Lever("split", "zCDP calibration, budget split σ_f² ∝ Δ_f",
                   knobs={"calibration": "zcdp"})
# DP-UCBVI's levers
UCBVI_MATRIX = Lever("counter", "banded matrix-factorization counter (256 bands, Gaussian)",
                     {"counter": "matrix", "counter_bands": 256, "mechanism": "gaussian"})
DERIVED_PAIRS = Lever("split", "N(s,a) derived from N(s,a,s')", knobs={"pair_counts": "derived"})
UCBVI_LEARNER = Lever("learner", "practical bonus and radius", knobs={
    "bonus_scale": 0.01, "privacy_scale": 0.0, "radius_mode": "std", "radius_scale": 0.5,
    "unknown_below": 2.0, "clip_remaining": True})

ABLATIONS: tuple[Ablation, ...] = (
    Ablation("dp-ucbvi-step-jdp", 5.0, (
        GEOMETRIC, SMOOTHED, UCBVI_MATRIX, DERIVED_PAIRS, UCBVI_LEARNER)),
    # at the goals these cases miss (ε = 0.1 pooled JDP, ε = 5 pooled LDP): how far each moves it
    Ablation("dp-ucbvi-pooled-jdp", 0.1, (
        Lever("schedule", "releases every 200 episodes", {"schedule": "batch:200"}),
        SMOOTHED, UCBVI_MATRIX, DERIVED_PAIRS, UCBVI_LEARNER)),
    Ablation("dp-ucbvi-pooled-ldp", 5.0, (DERIVED_PAIRS, UCBVI_LEARNER)),
    Ablation("ucrl-vtr-jdp", 10.0, (
        Lever("schedule", "releases every 10 episodes", {"schedule": "batch:10"}),
        SMOOTHED, MATRIX_COUNTER, ZCDP_SPLIT,
        Lever("sensitivity", "values clipped at H−h+1", knobs={"clip_remaining": True}),
        Lever("learner", "Thm. 7 radius × 0.1, shift and radii from the release's variance",
              knobs={"beta_mode": "thm7", "beta_scale": 0.1, "shift": "release",
                     "shift_scale": 1.0, "noise_norms": "variance"}),
    )),
    Ablation("linopt-vi-jdp", 10.0, (
        Lever("schedule", "releases every 10 episodes", {"schedule": "batch:10"}),
        SMOOTHED, MATRIX_COUNTER, ZCDP_SPLIT,
        Lever("learner", "radius × 0.1, shift and radii from the release's variance", knobs={
            "beta_scale": 0.1, "shift": "release", "noise_norms": "variance"}),
    )),
    Ablation("lsvi-ucb-batched-jdp", 10.0, (
        SMOOTHED, MATRIX_COUNTER,
        Lever("accounting", "zCDP calibration", knobs={"calibration": "zcdp"}),
        Lever("learner", "β = 2, shift from the release's variance, ridge 1", knobs={
            "shift": "variance", "beta": 2.0, "ridge": 1.0}),
    )),
    Ablation("lsvi-ucb-switching-jdp", 100.0, (
        Lever("schedule", "releases every 50 episodes", {"schedule": "batch:50"}),
        SMOOTHED, MATRIX_COUNTER,
        Lever("learner", "β = 2, shift 3× the release's noise norm", knobs={
            "beta": 2.0, "shift": "variance", "shift_scale": 3.0}),
    )),
)


def case_named(name: str) -> Case:
    """The case called `name` (ValueError listing them otherwise)."""
    for case in CASES:
        if case.name == name:
            return case
    raise ValueError(f"unknown case {name!r}: use {', '.join(c.name for c in CASES)}")
