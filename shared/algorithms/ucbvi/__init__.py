"""DP-UCBVI (Qiao & Wang): tabular optimistic value iteration on private counts, JDP and LDP.

Users contribute one-hot counts of their trajectory (N(s,a,s'), N(s,a), reward sums); the
learner plans at every new report from the billboard and the public radius E.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...privacy.mechanisms import Gaussian
from ...stats import Stats
from ...worlds.rollout import Trajectories
from ..base import Algorithm, Family, Learner, PolicyMessage
from ..registry import register
from .counts import family_shapes, tabular_counts
from .fused import FusedEpisodes, applies
from .knobs import PRESETS, UCBVIKnobs
from .learner import DPUCBVI
from .support import SupportCells

SUPPORT_FAMILY = "sas_support"  # N(s,a,s') on a support's cells only (s, a, s' flattened)

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration
    from ...trust.base import TrustBoundary


def sensitivities(horizon: int, pooled: bool) -> tuple[float, float]:
    """Replace-one (l1, l2) of every tabular family: a replaced user moves one unit from one
    cell to another at each step h, so 2H and sqrt(2H) per step, sqrt(2)*H when pooled (the paper
    states H: erratum E3)."""
    l1 = 2.0 * horizon
    l2 = math.sqrt(2.0) * horizon if pooled else math.sqrt(2.0 * horizon)
    return l1, l2


def union_radius(calibration: Calibration, algorithm: DPUCBVIAlgorithm) -> float:
    """The paper's radius E with explicit constants (erratum E1): a union bound over every
    released counter."""
    mech, cfg = calibration.mechanism, algorithm.config
    if mech is None or not calibration.noise_scale:
        return 0.0
    s, a = cfg.n_states, cfg.n_actions
    cells = s * a * s if algorithm.support is None else algorithm.support.cells
    counters = cfg.episodes * cfg.horizon * (cells + 2 * s * a)
    plan = calibration.plan
    if plan is not None and plan.kind == "matrix":  # one Gaussian of the largest release std
        worst = Gaussian(calibration.release_std_bound(cfg.episodes), mech.backend)
        return 4.0 * worst.tail_bound(1, cfg.beta / (3.0 * counters))
    m = calibration.levels if calibration.boundary.counters else cfg.episodes
    return 4.0 * mech.tail_bound(m, cfg.beta / (3.0 * counters))


class UCBVILearner(Learner):
    """Optimistic value iteration from the billboard at every new report (Qiao & Wang, Alg. 1)."""

    def __init__(self, algorithm: DPUCBVIAlgorithm, calibration: Calibration, seeds: list[int]):
        self.algorithm, self.calibration = algorithm, calibration
        self.knobs: UCBVIKnobs = algorithm.knobs
        self.planner = DPUCBVI(algorithm.config, self.knobs, seeds)
        self.union = union_radius(calibration, algorithm)
        self.planner.restrict(*self._public_arrays())

    def _public_arrays(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The planner's support mask and per-(s,a) threshold factors (None: none)."""
        cells = self.algorithm.support
        if cells is None:
            return None, None
        if not self.knobs.threshold_per_pair:
            return cells.mask, None
        per_pair = (np.sqrt(cells.widths) if self.knobs.pair_counts == "derived"
                    else np.ones(cells.widths.shape))
        return cells.mask, per_pair / self._pair_factor()

    def _pair_factor(self) -> float:
        """pair_std / release std: sqrt of the most next states summed into N(s,a) when it is
        derived (S, or the largest support), else 1."""
        if self.knobs.pair_counts != "derived":
            return 1.0
        cells = self.algorithm.support
        return math.sqrt(self.algorithm.config.n_states if cells is None
                         else int(cells.widths.max()))

    def plans_at(self, reported: int, last_planned: int) -> bool:
        """Only when the billboard changed: at every release of the run's schedule (every
        report under the papers' schedule, in LDP and without privacy)."""
        cal = self.calibration
        return cal.counter_items(reported) != cal.counter_items(last_planned)

    def radius(self, reported: int) -> float:
        """E after `reported` reports (errata E1, E7): the union bound, or c_E x release std."""
        return self._radius_of(self.calibration.release_std(reported))

    def pair_std(self, reported: int) -> float:
        """Std of the N(s,a) release error: sqrt(S) x larger when summed from N(s,a,s') (the
        largest support's size instead of S with a support; `threshold_per_pair` scales it down
        per (s,a) in the planner)."""
        return self._pair_std_of(self.calibration.release_std(reported))

    def radii(self, first: int, count: int) -> tuple[list[float], list[float]]:
        """`radius` and `pair_std` after first .. first + count - 1 reports (one release std per
        report count instead of two: the fused loop asks for a block at a time)."""
        if self.calibration.mechanism is None:  # no noise: every radius and std is 0
            return [0.0] * count, [0.0] * count
        stds = [self.calibration.release_std(t) for t in range(first, first + count)]
        return [self._radius_of(s) for s in stds], [self._pair_std_of(s) for s in stds]

    def _radius_of(self, release_std: float) -> float:
        """E given the release std after the same reports."""
        if self.calibration.mechanism is None:
            return 0.0
        if self.knobs.radius_mode == "union":
            return self.knobs.radius_scale * self.union
        return self.knobs.radius_scale * release_std

    def _pair_std_of(self, release_std: float) -> float:
        """pair_std given the release std after the same reports."""
        return release_std * self._pair_factor()

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """The greedy optimistic policy of every replica."""
        actions = self.planner.plan(
            billboard,
            self.radius(reported),
            self.pair_std(reported),
            reported,
            private=self.calibration.mechanism is not None,
        )
        return {"actions": actions}


@register
class DPUCBVIAlgorithm(Algorithm):
    """DP-UCBVI as a privrl plug-in."""

    name = "dp-ucbvi"
    summary = "tabular DP-UCBVI (Qiao & Wang): private counts, optimistic value iteration"
    knobs_model = UCBVIKnobs
    presets = PRESETS
    default_world = "riverswim"
    # the frontier's rows read it (studies/frontier.py): Gaussian lets the practical preset's
    # matrix counter run. JDP at eps = 1, K = 50,000, seeds 0-1 on RiverSwim: 101% of uniform
    # regret with Laplace (smoothed tree), 30-32% with this default (delta = 2e-6)
    default_mechanism = "gaussian"
    integer_rewards = True  # under integer noise the reward sums are counts of Bernoulli(r)
    practical_schedule = "geometric:1.1"  # tuning seeds (docs/results/frontier.md)
    practical_counter = ("matrix", 256)

    @classmethod
    def mechanism_for(cls, boundary: TrustBoundary) -> str:
        """Pure-epsilon Laplace where each user noises its own report alone (pooled LDP at
        eps = 10, K = 50,000, tuning seeds 5-6: 7-13% of uniform regret against ~100% with
        Gaussian at delta = 2e-6), else Gaussian."""
        if boundary.local_noise and boundary.cohort_size == 1:
            return "laplace"
        return super().mechanism_for(boundary)

    def __init__(self, config: RunConfig) -> None:
        """Bind (`Algorithm.__init__`); the released (s, a, s') cells of the `support` knob
        (None: every cell), a malformed one refused at once."""
        super().__init__(config)
        self.support: SupportCells | None = (
            None if self.knobs.support is None
            else SupportCells(self.knobs.support, self.config.n_states, self.config.n_actions))

    def families(self) -> tuple[Family, ...]:
        """N(s,a,s') (only its support's cells, as "sas_support", with a support), N(s,a)
        unless derived, and reward sums; all share one sensitivity: a replaced user moves one
        unit per step whichever cells are released."""
        cfg, knobs = self.config, self.knobs
        shapes = family_shapes(cfg.n_states, cfg.n_actions, cfg.horizon, knobs.pooled)
        if self.support is not None:
            shapes[SUPPORT_FAMILY] = (shapes["sas"][0], self.support.cells)
        first = "sas" if self.support is None else SUPPORT_FAMILY
        names = [first, "r"] if knobs.pair_counts == "derived" else [first, "sa", "r"]
        l1, l2 = sensitivities(cfg.horizon, knobs.pooled)
        clean_max = float(cfg.horizon) if knobs.pooled else 1.0
        return tuple(Family(n, shapes[n], l1, l2, clean_max) for n in names)

    @functools.cached_property
    def _released(self) -> tuple[str, ...]:
        """The released families' names (fixed by the configuration; asked once per report)."""
        return tuple(f.name for f in self.families())

    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        """One-hot counts of each trajectory (only the released families)."""
        cfg = self.config
        counts = tabular_counts(trajectories, cfg.n_states, cfg.n_actions, self.knobs.pooled)
        if self.support is not None:  # a transition outside the support counts nowhere
            counts[SUPPORT_FAMILY] = self.support.pack(counts["sas"])
        return {name: counts[name] for name in self._released}

    def check_world(self, world: Any) -> None:
        """The default check, and refuse a world that moves outside the `support` knob."""
        super().check_world(world)
        if self.support is not None and self.support.outside(world):
            raise ValueError("the users' world moves to next states outside the knob support:"
                             " pass the world's own (`support_knob`)")

    def learner(self, calibration: Calibration, seeds: list[int]) -> UCBVILearner:
        """DP-UCBVI's planner over the billboard."""
        return UCBVILearner(self, calibration, seeds)

    def simulator(self, run: Any, world: Any) -> FusedEpisodes | None:
        """DP-UCBVI's own in-process episode loop for `run` in `world` when it applies
        (`fused.applies`), else None; outside the plug-in contract (`privrl.run.Simulates`)."""
        if self.support is not None:  # the fused loop sums every cell
            return None
        return FusedEpisodes(run, world) if applies(run, world) else None

    def postprocess(self, release: Stats) -> Stats:
        """N(s,a,s') in full (zero outside a support), and N(s,a) = sum_s' N(s,a,s') when it is
        not released itself."""
        if SUPPORT_FAMILY in release:
            assert self.support is not None
            packed = release[SUPPORT_FAMILY]
            release = {k: v for k, v in release.items() if k != SUPPORT_FAMILY}
            release["sas"] = self.support.unpack(packed)
        if "sa" not in release:
            release = {**release, "sa": release["sas"].sum(axis=-1)}
        return release
