"""Private UCRL-VTR (Luyo et al., Alg. 1): value-targeted regression on private Gram matrices.

Per step h the billboard holds the noisy sums of X X^T ("gram", symmetric) and X y ("target"):
tree counters on the server in JDP, sums of locally randomized reports in LDP, exact sums
without privacy. The learner (server side; the public features make the paper's client-side
value iteration a pure function of the billboard) regularizes them into
Lambda~_h = lambda I + shift I + gram_h, solves w~_h = Lambda~_h^{-1} target_h and runs the
optimistic backward pass

    Q~_h(s,a) = Pi_[0,H]( r_h(s,a) + <phi_V(s,a), w~_h> + beta ||phi_V(s,a)||_{Lambda~_h^{-1}} ),

with V = V~_{h+1} (Luyo et al. 2021, Alg. 1; Pi_[0,H] per erratum 4). The policy message
carries the greedy actions and the value tables V~_{1..H+1}, from which each user computes its
own X and y.

Errata followed: symmetric noise = upper triangle i.i.d., mirrored (1); the JDP shift
2 Ups I is included (2); release v carries tree prefix v and v local noises (3); Pi_[0,H] (4);
version 0 is lambda I without shift (5); Gaussian mechanism with max sensitivity and ln(2/delta)
(15); the corollary's beta or Thm. 7's minimal one (16, `beta_mode`); ties by the unclipped score,
then the lowest action index (17); the last step's zero statistics are still sent (23).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...privacy.calibration import split_scales
from ...privacy.grid import FEATURE_GRID
from ...privacy.psd import cholesky_solve, inverse_norms, regularize, variance_norms
from ...stats import Stats
from ...worlds.rollout import Trajectories
from ..base import Algorithm, Family, Learner, PolicyMessage
from ..registry import register
from . import luyo
from .common import (
    gram_and_target,
    model_sensitivities,
    released_since,
    run_model,
    value_caps,
    value_targets,
)

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration


class UCRLVTRKnobs(BaseModel):
    """Public, data-independent knobs of private UCRL-VTR."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calibration: Literal["paper", "zcdp"] = Field(
        "paper",
        description="noise scale: the paper's sigma_B (Cor. 5 / 6: advanced composition, spends"
        " less than claimed; the ledger says how much) or the smallest sigma that spends exactly"
        " (epsilon, delta) under zCDP with this run's sensitivities",
    )
    beta_mode: Literal["corollary", "thm7"] = Field(
        "corollary", description="beta: 3 (C_w+1) sqrt(lambda+Ups) + Hoeffding (Cor. 5/6) or"
        " Thm. 7's minimal ((lambda+Ups_high) C_w + C)/sqrt(lambda+Ups_low) + Hoeffding")
    beta_scale: float = Field(1.0, ge=0, description="multiplies beta (post-processing)")
    shift: Literal["paper", "release"] = Field(
        "paper", description="Ups from the paper's worst case over the run (sqrt(K0) JDP nodes,"
        " sqrt(K) LDP reports) or from the release's own error std (a running maximum over"
        " versions; data-independent)")
    shift_scale: float = Field(1.0, ge=0, description="the PD shift is 2 shift_scale Ups")
    noise_norms: Literal["tail", "variance"] = Field(
        "tail", description="Ups and C: Claims 26/27's tails with the union bound over K H"
        " (4 sqrt(d) + 2 ln(1/alpha), sqrt(d) + 2 sqrt(ln(1/alpha)), the paper's) or the noise's"
        " own scale from its variance (2 sqrt(d) s_m, sqrt(d) s_v: `privacy.psd.variance_norms`)")
    psd: Literal["shift", "project"] = Field(
        "shift", description="how the noisy Gram is made positive definite: the paper's shift"
        " (lambda + 2 shift_scale Ups) I, or a projection: lambda I + release with every"
        " eigenvalue below lambda + (2 shift_scale - 1) Ups raised to it (explored directions"
        " keep their eigenvalues; both are post-processing)")
    ridge: float | None = Field(None, gt=0, description="lambda (default: the paper's H^2)")
    clip_remaining: bool = Field(
        False, description="clip Q~_h at H-h+1 instead of H (still optimistic: Q*_h <= H-h+1);"
        " V~_{h+1} <= H-h then bounds X_h and y_h, a smaller true sensitivity per step, which"
        " the zcdp calibration turns into less noise for the same (epsilon, delta)")


PRESETS: dict[str, UCRLVTRKnobs] = {
    "faithful": UCRLVTRKnobs(),
    "practical": UCRLVTRKnobs(calibration="zcdp", beta_mode="thm7", beta_scale=0.1,
                              shift="release", shift_scale=1.0, clip_remaining=True,
                              noise_norms="variance"),
}


class UCRLVTRLearner(Learner):
    """Optimistic value iteration on the private ridge estimates, every new report.

    `pair` names the (Gram, target) families it regresses on; `failure_split` is the number of
    events the failure probability p is split over per (k, h) (6 in Alg. 1, 24 in Alg. 3)."""

    pair: tuple[str, str] = ("gram", "target")
    failure_split: int = 6

    def __init__(self, algorithm: UCRLVTRAlgorithm, calibration: Calibration,
                 seeds: list[int]) -> None:
        self.algorithm, self.calibration = algorithm, calibration
        self.model, self.knobs = algorithm.model, algorithm.knobs
        cfg = algorithm.config
        self.horizon, self.episodes, self.d = cfg.horizon, cfg.episodes, self.model.d
        self.lam = algorithm.ridge
        self.hoeffding = luyo.hoeffding_term(cfg.horizon, cfg.episodes, self.d, cfg.beta)
        self.private = calibration.mechanism is not None
        self.fallbacks = 0  # matrices whose eigenvalues had to be floored (the bad noise event)
        self.replicas = len(seeds)

    def plans_at(self, reported: int, last_planned: int) -> bool:
        """Only when the billboard changed (at the schedule's releases)."""
        return released_since(self.calibration, reported, last_planned)

    def bounds(self, reported: int) -> luyo.NoiseBounds:
        """Ups and C of the release after `reported` reports (0 without noise)."""
        cal, cfg = self.calibration, self.algorithm.config
        if not self.private:
            return luyo.NoiseBounds(0.0, 0.0)
        if self.knobs.shift == "paper":
            m = luyo.tree_depth(self.episodes) if cal.boundary.counters else self.episodes
            std_m = cal.family(self.pair[0]).scale * math.sqrt(m)
            std_v = cal.family(self.pair[1]).scale * math.sqrt(m)
        else:
            std_m = cal.release_std_bound(reported, self.pair[0])
            std_v = cal.release_std_bound(reported, self.pair[1])
        if self.knobs.noise_norms == "variance":
            return luyo.NoiseBounds(*variance_norms(std_m, std_v, self.d))
        return luyo.noise_bounds(std_m, std_v, self.d, self.horizon, self.episodes, cfg.beta,
                                 self.failure_split)

    def levels(self, reported: int) -> tuple[float, float]:
        """(Ups_low, Ups_high): the noise keeps Lambda~'s eigenvalues within lambda + [low,
        high] (Thm. 7), low = (2 s - 1) Ups, high = (2 s + 1) Ups for shift_scale s."""
        ups, s = self.bounds(reported).ups, self.knobs.shift_scale
        return max(2.0 * s - 1.0, 0.0) * ups, (2.0 * s + 1.0) * ups

    def shift(self, reported: int) -> float:
        """The PD shift added to release `reported` (none at version 0, erratum 5; none when
        the release is projected instead)."""
        if reported == 0 or self.knobs.psd == "project":
            return 0.0
        return 2.0 * self.knobs.shift_scale * self.bounds(reported).ups

    def floor(self, reported: int) -> float:
        """The eigenvalue floor of Lambda~: lambda (the shift's fallback), or lambda + Ups_low
        (the projection; none at version 0)."""
        if self.knobs.psd == "shift" or reported == 0:
            return self.lam
        return self.lam + self.levels(reported)[0]

    def beta(self, reported: int, concentration: float | None = None) -> float:
        """The confidence radius used with release `reported`: the noise's term plus the
        concentration term (default: Thm. 7's Hoeffding term)."""
        at = self.episodes if self.knobs.shift == "paper" else reported
        b, c_w = self.bounds(at), self.model.c_w
        extra = self.hoeffding if concentration is None else concentration
        if self.knobs.beta_mode == "corollary":
            beta = luyo.beta_corollary(self.lam, b.ups, c_w, extra)
        else:
            low, high = self.levels(at)
            beta = luyo.beta_thm7(self.lam, low, high, b.c, c_w, extra)
        return self.knobs.beta_scale * beta

    def radius(self, reported: int) -> float:
        """The public confidence radius beta (what the billboard view reports)."""
        return self.beta(reported)

    def estimates(self, billboard: Stats, reported: int) -> tuple[np.ndarray, np.ndarray]:
        """(w~ (R, H, d), L^{-1} (R, H, d, d)) from the release: shift or projection (an
        eigenvalue floor), Cholesky."""
        reg = regularize(billboard[self.pair[0]], self.lam + self.shift(reported),
                         floor=self.floor(reported))
        self.fallbacks += int(reg.floored.sum())
        return cholesky_solve(reg.matrices, billboard[self.pair[1]])

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """Greedy actions (R, H, S) and value tables V~ (R, H+1, S) of every replica."""
        w, inv_chol = self.estimates(billboard, reported)
        actions, values = self.optimistic(w, inv_chol, self.beta(reported))
        return {"actions": actions, "values": values}

    def optimistic(self, w: np.ndarray, inv_chol: np.ndarray, beta: float
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The optimistic backward pass: greedy actions (R, H, S), values (R, H+1, S)."""
        caps, model = self.algorithm.caps, self.model
        assert model.rewards is not None
        n_rep, n_s, n_a = w.shape[0], model.S, model.A
        values = np.zeros((n_rep, self.horizon + 1, n_s))
        actions = np.zeros((n_rep, self.horizon, n_s), dtype=np.int64)
        for h in range(self.horizon - 1, -1, -1):
            x = model.value_features(values[:, h + 1])  # (R, S, A, d)
            mean = np.einsum("rsad,rd->rsa", x, w[:, h])
            bonus = inverse_norms(inv_chol[:, h], x.reshape(n_rep, n_s * n_a, -1))
            score = model.rewards[h] + mean + beta * bonus.reshape(n_rep, n_s, n_a)
            actions[:, h] = np.argmax(score, axis=-1)  # ties: the lowest index (erratum 17)
            values[:, h] = np.clip(score.max(axis=-1), 0.0, caps[h])
        return actions, values


@register
class UCRLVTRAlgorithm(Algorithm):
    """Private UCRL-VTR as a privrl plug-in (none, JDP, LDP)."""

    name = "ucrl-vtr"
    summary = ("linear-mixture UCRL-VTR (Luyo et al. Alg. 1): private Gram/target sums, "
               "value-targeted ridge regression, optimistic value iteration")
    knobs_model = UCRLVTRKnobs
    presets = PRESETS
    default_world = "lm-hard"
    default_mechanism = "gaussian"
    practical_schedule = "geometric:1.1"  # tuning seeds (docs/results/frontier.md)
    practical_counter = ("matrix", 256)

    def __init__(self, config: RunConfig) -> None:
        """Bind to `config`: its public model must give known rewards and fit (S, A, H)."""
        super().__init__(config)
        self.model = run_model(config, self.name, known_rewards=True, reward_features=False)
        self.ridge = float(self.knobs.ridge or config.horizon**2)
        self.caps = value_caps(config.horizon, self.knobs.clip_remaining)
        if (config.boundary.private and self.knobs.calibration == "paper"
                and config.mechanism != "gaussian"):
            raise ValueError(f"{self.name}'s paper calibration is Gaussian (Cor. 5/6): use"
                             " --mechanism gaussian, or knob calibration=zcdp for other mechanisms")

    @property
    def x_max(self) -> float:
        """||X|| <= feature_bound * H (H = the range of V~)."""
        return self.model.feature_bound * self.config.horizon

    def families(self) -> tuple[Family, ...]:
        """The Gram matrices (symmetric) and targets of every step, with replace-one
        sensitivities; the paper's sigma_B when calibrated as in the paper, and under zcdp with
        Gaussian noise one sigma per family, sigma_f^2 proportional to Delta_f (`split_scales`)."""
        cfg = self.config
        h, d, x_max = cfg.horizon, self.model.d, self.x_max
        x_caps = self.model.feature_bound * self.caps[1:]
        sens = model_sensitivities(self.model, self.caps[1:])
        scale = None
        if self.knobs.calibration == "paper" and cfg.boundary.private:
            paper_sens = 2.0 * x_max**2  # the paper's 2 H^2 (||X|| <= H, y <= H)
            scale = luyo.paper_sigma(cfg.boundary, h, cfg.episodes, cfg.epsilon, cfg.delta,
                                     paper_sens)
        split = (split_scales(cfg, [sens["gram_l2"], sens["target_l2"]])
                 if self.knobs.calibration == "zcdp" else None)
        gram_scale, target_scale = split if split is not None else (scale, scale)
        x_top = float(x_caps.max(initial=0.0))
        y_max = float((x_caps * self.caps[1:]).max(initial=0.0))
        return (
            Family("gram", (h, d, d), sens["gram_l1"], sens["gram_l2"], x_top**2, -x_top**2,
                   True, gram_scale, FEATURE_GRID, rounded=True),
            Family("target", (h, d), sens["target_l1"], sens["target_l2"], y_max, -y_max,
                   False, target_scale, FEATURE_GRID, rounded=True),
        )

    def message_arrays(self) -> dict[str, tuple[int, ...]]:
        """The value tables V~_1..V~_{H+1} (V~_{H+1} = 0) users compute X and y from."""
        return {"values": (self.config.horizon + 1, self.config.n_states)}

    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        """X X^T and X y per step from the user's trajectory and the message's value tables."""
        x, y = value_targets(self.model, trajectories, message["values"], self.caps)
        gram, target = gram_and_target(x, y)
        return {"gram": gram, "target": target}

    def learner(self, calibration: Calibration, seeds: list[int]) -> UCRLVTRLearner:
        """The optimistic planner over the billboard."""
        return UCRLVTRLearner(self, calibration, seeds)
