"""Private LSVI-UCB with adaptive low switching (Ngo, Vietri & Wu, ICML 2022,
Alg. 1), JDP only.

Every episode the Gram matrices go through one tree counter (K leaves, symmetric Gaussian node
noise) and are released shifted by 2 lam_t I. Before episode k+1 the server switches policy iff
some step's released Gram has log det grown by ln C (C = 2) since the last switch (computed on
the *released*, noisy matrices only) and the switch counter is below the hard cap N_max; a
switch re-solves LSVI over all stored episodes with fresh noise N(0, sigma_y^2 I) on each step's
targets (Ngo et al. Alg. 1). Every tree level and every switch is charged.

Calibration "sound" (the default) is a corrected one (errata E3-E6): it spends exactly the
budget, rho/2 on the Gram tree and rho / (2 (ceil(N_max) - 1)) on each of the switches that can
occur (the paper sizes them for N_max), at the tight sensitivities of `constants` (Gram sqrt(2)
per step, targets 2 (H - h + 1)). "paper" keeps the paper's lam_t and sigma_y (a reference
only): its scales spend far more than rho (23.8 rho in the paper's reference configuration; the
run is refused at creation). rho comes from the run's (epsilon, delta) by the tight zCDP
conversion. Errata also followed: Q clipped (E6; at H - h + 1), the counter moves once per switch
(E7), the initial policy is w = 0 against 2 lam_t I (E8), no extra ridge beyond `ridge` =
min_shift (E12), symmetric noise (E19). Ties: uniformly at random from the server's seed by
default (`tie_break=random`, as the paper's analysis assumes), or the lowest action index
(`first`).

beta: Theorem 16's theory value, a fixed number, or, with `noise_norms=variance`, Theorem 16's
formula 5 H^2 sqrt(d lam_t ln chi) + 6 d H sqrt(ln chi) with lam_t and lam_y (the paper's
bounds on the Gram and target noise norms) replaced by the norm scales of the actual release
noise (`release_norms`); without noise it is the non-private limit's (lam_t = 0).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from ...privacy.accountant import continuous_gaussian, epsilon_to_rho
from ...privacy.schedules import parse_schedule
from ..registry import register
from .common import LSVIAlgorithm, LSVIKnobs
from .constants import rounds_cap, switching_beta, switching_constants

if TYPE_CHECKING:
    from ...config import RunConfig


class SwitchingKnobs(LSVIKnobs):
    """Public knobs of private LSVI-UCB with adaptive switching (Ngo et al. 2022); beta = None:
    Theorem 16's theory value."""

    calibration: Literal["sound", "paper"] = Field(
        "sound", description="noise scales: the sound calibration (spends exactly the"
        " budget) or the paper's literal constants (a reference: the ledger shows they spend far"
        " more than claimed)")
    ridge: float = Field(1.0, gt=0, description="min_shift: the Gram shift is max(2 lam_t,"
                         " ridge) (the ridge of the non-private limit, where lam_t = 0)")
    shift: Literal["bound", "variance"] = Field(
        "bound", description="the Gram shift: 2 lam_t, a high-probability bound on the prefix"
        " noise's norm (the paper), or the ridge plus shift_scale times 2 sqrt(d) times the"
        " release's actual noise std at each leaf (post-processing either way)")
    shift_scale: float = Field(1.0, ge=0, description="with shift=variance: how many expected"
                               " noise norms the shift adds")
    trigger: Literal["det", "always"] = Field(
        "det", description="switch when some step's released log det grew by ln(switch_ratio)"
        " (the paper), or every episode (LSVI-UCB; still capped by N_max when noisy)")
    switch_ratio: float = Field(2.0, gt=1.0, description="C, the determinant ratio that triggers"
                                " a switch")


PRESETS: dict[str, SwitchingKnobs] = {
    "faithful": SwitchingKnobs(),
    "practical": SwitchingKnobs(beta=2.0, shift="variance", shift_scale=3.0),
}


@register
class SwitchingLSVI(LSVIAlgorithm):
    """Ngo, Vietri & Wu's Alg. 1 as a privrl plug-in (none, JDP)."""

    name = "lsvi-ucb-switching"
    summary = ("linear-MDP LSVI-UCB that switches policy when a released Gram determinant doubles,"
               " at most N_max times (Ngo, Vietri & Wu Alg. 1, sound calibration), JDP only")
    knobs_model = SwitchingKnobs
    presets = PRESETS
    practical_schedule = "batch:50"  # learns from eps = 100 at K = 50,000 (docs/results/lsvi.md)

    def __init__(self, config: RunConfig) -> None:
        """Fix rho, the noise scales, the shift, the cap and beta from public numbers."""
        super().__init__(config)
        knobs: SwitchingKnobs = self.knobs
        rho = (epsilon_to_rho(config.epsilon, config.delta,
                              continuous=continuous_gaussian(config.noise))
               if self.private else math.inf)
        self.schedule = parse_schedule(self.config.schedule)  # the preset's, if not given
        self.counter_plan = self.gram_counter(self.planned_leaves())
        c = switching_constants(config.episodes, config.horizon, self.model.d, rho, config.beta,
                                knobs.calibration, knobs.ridge, step=self.step,
                                weight=self.counter_weight(),
                                spread=self.counter_plan.max_release_factor())
        self.rho, self.constants = rho, c
        self.gram_sigma, self.target_sigma = math.sqrt(c.sigma_node2), math.sqrt(c.sigma_y2)
        self.gram_diagonal = max(2.0 * c.lam_t, knobs.ridge)
        self.gram_floor = c.lam_t if c.lam_t > 0 else knobs.ridge
        if knobs.shift == "variance" and self.private:
            self.gram_floor = knobs.ridge
            self.gram_diagonal = self.noise_shift(knobs.shift_scale)
        self.initial_diagonal = self.gram_diagonal
        self.beta = self.bonus_multiplier(c.beta, lambda lam_t, lam_y: switching_beta(
            config.episodes, config.horizon, self.model.d, lam_t, lam_y, config.beta,
            knobs.ridge)[2])
        self.max_rounds = rounds_cap(c.n_max)
        self.log_ratio = math.log(knobs.switch_ratio)

    def spend_depends_on_data(self) -> bool:
        """Yes, unless a round follows every leaf: a round (charged) happens when released
        Grams grew, so how many of the planned rounds are spent depends on released data."""
        return self.private and self.knobs.trigger != "always"

    def planned_leaves(self) -> int:
        """A leaf at each of the schedule's releases before episode K (every episode's Gram in
        the paper, line 22)."""
        return self.schedule.releases(self.config.episodes - 1)

    def planned_rounds(self) -> int:
        """The cap ceil(N_max) - 1, and at most one round per leaf."""
        return int(min(self.max_rounds, self.planned_leaves()))

    def may_release(self, items: int, rounds: np.ndarray) -> bool:
        """When a leaf closes (before episode items+1 <= K), while some replica is under the
        cap: a switch is decided on a new Gram release only."""
        return self.leaf_closes(items) and bool(np.any(rounds < self.max_rounds))

    def release_due(self, items: int, current: np.ndarray, snapshot: np.ndarray,
                    rounds: np.ndarray) -> np.ndarray:
        """When a leaf closed (before episode items+1 <= K): the trigger on released Grams,
        under the cap."""
        if not self.leaf_closes(items):
            return np.zeros(rounds.shape, dtype=bool)
        under_cap = rounds < self.max_rounds
        if self.knobs.trigger == "always":
            return under_cap
        grown = np.linalg.slogdet(current)[1] - np.linalg.slogdet(snapshot)[1]  # (R, H)
        return under_cap & np.any(grown >= self.log_ratio, axis=-1)
