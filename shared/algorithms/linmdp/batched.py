"""Privacy-preserving batched LSVI-UCB (Luyo et al. 2021, Alg. 2), JDP only.

A fixed, data-independent schedule of B batches of L = ceil(K/B) episodes: the policy of batch b
is played by every user of the batch; at the end of batches 1..N_K-1 the server adds the batch's
Gram sum as one leaf of the tree counter (B leaves, nodes SymGauss(sigma_Lambda)), re-solves LSVI
over all stored episodes with fresh target noise N(0, sigma_u^2 I) per step, and publishes
release b+1 (Luyo et al. Alg. 2). Release 0 is lambda I, w = 0 (no data, no noise). eps = inf
(or privacy "none") gives B = K: LSVI-UCB updated every episode (Luyo erratum 11; `batches`
forces another B).

Calibrations: "paper" = App. E.1's closed-form sigmas (advanced composition; the ledger charges
what they spend under zCDP, which is less than claimed); "zcdp" = the smallest sigmas spending
exactly (eps, delta) on this schedule. The shift is App. E.1's (c_K + Ups) I ("paper") or twice a
high-probability bound on the prefix noise's norm with sqrt(B0) nodes ("noise"): both are
public, data-independent post-processing, as are beta and the ridge.

beta: App. E.1's theory value (lambda = d, Ups and C its tail bounds), a fixed number, or, with
`noise_norms=variance`, App. E.1's formula 24 H sqrt(d (lambda + d Ups')) ln chi at the run's
ridge with Ups' and C' the norm scales of the actual release noise (`release_norms`): Ups and C
are the paper's bounds on those norms, c_K = d Ups and U_K follow them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from ...privacy.accountant import continuous_gaussian, epsilon_to_rho
from ...privacy.psd import wigner_norm_tail
from ...privacy.schedules import Batches, EveryEpisode, parse_schedule
from ..registry import register
from .common import LSVIAlgorithm, LSVIKnobs
from .constants import batched_beta, batched_constants, luyo_batches, zcdp_batched_sigmas

if TYPE_CHECKING:
    from ...config import RunConfig


class BatchedKnobs(LSVIKnobs):
    """Public knobs of batched LSVI-UCB (Luyo et al. 2021); beta = None: App. E.1's theory value."""

    calibration: Literal["paper", "zcdp"] = Field(
        "paper", description="noise scales: App. E.1's closed forms (spend less than claimed; the"
        " ledger says how much) or the smallest sigmas spending exactly (epsilon, delta)")
    batches: int | None = Field(
        None, ge=1, description="B, the number of batches (default: App. E.1's"
        " ceil((K eps)^(2/5) / (d^(3/5) H^(1/5))), K without noise); fixed before any data")
    shift: Literal["paper", "noise", "variance"] = Field(
        "paper", description="the Gram shift: App. E.1's (c_K + Ups) I, 2 Ups' I with Ups'"
        " a high-probability bound on the prefix noise's norm (sqrt(B0) nodes, no c_K), or"
        " shift_scale times 2 sqrt(d) times the release's actual noise std at each leaf")
    shift_scale: float = Field(1.0, ge=0, description="multiplies the shift (post-processing)")
    ridge: float | None = Field(None, gt=0, description="lambda (default: the paper's d; the"
                                " theory beta keeps lambda = d)")


PRESETS: dict[str, BatchedKnobs] = {
    "faithful": BatchedKnobs(),
    "practical": BatchedKnobs(calibration="zcdp", shift="variance", beta=2.0, ridge=1.0),
}


def batch_schedule(text: str, batches: int | None, default: int, episodes: int) -> Batches:
    """The batches as a release schedule: the run's 'batch:L', or B = `batches` (else
    `default`, App. E.1's) batches of L = ceil(K / B) under 'every' (ValueError otherwise)."""
    schedule = parse_schedule(text)
    if isinstance(schedule, Batches):
        if batches is not None:
            raise ValueError("give the batches once: the knob batches or schedule batch:L")
        return schedule
    if not isinstance(schedule, EveryEpisode):
        raise ValueError(f"lsvi-ucb-batched releases after fixed batches: schedule {text!r} is"
                         " not one (use batch:L, or every for App. E.1's B)")
    b = batches if batches is not None else default
    return Batches(math.ceil(episodes / min(b, episodes)))


@register
class BatchedLSVI(LSVIAlgorithm):
    """Luyo et al.'s Alg. 2 as a privrl plug-in (none, JDP)."""

    name = "lsvi-ucb-batched"
    summary = ("linear-MDP LSVI-UCB with a fixed schedule of B batches (Luyo et al. Alg. 2): tree"
               " counter on the Gram, fresh noise on re-solved targets, JDP only")
    knobs_model = BatchedKnobs
    presets = PRESETS

    def __init__(self, config: RunConfig) -> None:
        """Fix the schedule, noise scales, shift and beta from public numbers."""
        super().__init__(config)
        knobs: BatchedKnobs = self.knobs
        cfg, d = config, self.model.d
        eps = config.epsilon if self.private else math.inf
        K, H, p = cfg.episodes, cfg.horizon, cfg.beta
        self.schedule = batch_schedule(self.config.schedule, knobs.batches,
                                       luyo_batches(K, H, d, eps), K)
        b = math.ceil(K / self.schedule.size)
        self.counter_plan = self.gram_counter(self.planned_leaves())
        sigmas = None
        if self.private and knobs.calibration == "zcdp":
            rho = epsilon_to_rho(eps, cfg.delta, continuous=continuous_gaussian(cfg.noise))
            sigmas = zcdp_batched_sigmas(H, self.planned_rounds(), rho, self.step,
                                         weight=self.counter_weight())
        delta = cfg.delta if self.private else 0.5
        c = batched_constants(K, H, d, eps, delta, p, batches=b, sigmas=sigmas)
        self.constants = c
        self.lam = float(knobs.ridge) if knobs.ridge is not None else c.lam
        self.gram_sigma, self.target_sigma = c.sigma_gram, c.sigma_target
        if knobs.shift == "paper":
            shift = c.c_k + c.ups
        else:
            alpha = p / (6.0 * K * H)
            spread = math.sqrt(self.counter_plan.max_release_factor())
            shift = 2.0 * c.sigma_gram * spread * wigner_norm_tail(d, alpha)
        self.initial_diagonal = self.lam
        self.gram_diagonal = self.lam + knobs.shift_scale * shift
        self.gram_floor = self.lam
        if knobs.shift == "variance":
            self.gram_diagonal = self.noise_shift(knobs.shift_scale)
        self.beta = self.bonus_multiplier(c.beta, lambda ups, norm_u: batched_beta(
            K, H, d, self.lam, d * ups, norm_u, p)[2])

    @property
    def batch_length(self) -> int:
        """L = ceil(K / B): episodes per batch."""
        return self.schedule.size

    def planned_leaves(self) -> int:
        """A leaf at the end of batches 1..N_K-1 (the schedule's releases before episode K)."""
        return self.schedule.releases(self.config.episodes - 1)

    def planned_rounds(self) -> int:
        """A round at the end of batches 1..N_K-1."""
        return self.planned_leaves()

    def may_release(self, items: int, rounds: np.ndarray) -> bool:
        """At the end of batches 1..N_K-1 only."""
        return self.leaf_closes(items)

    def release_due(self, items: int, current: np.ndarray, snapshot: np.ndarray,
                    rounds: np.ndarray) -> np.ndarray:
        """Every replica at the end of batches 1..N_K-1: a data-independent schedule."""
        return np.full(rounds.shape, self.leaf_closes(items))
