"""Private UCRL-VTR+ (Luyo et al. 2021, Alg. 3, App. D): variance-weighted value-targeted
regression plus a second-moment regression, on private Gram matrices.

Per step h the billboard holds four noisy sums (tree counters in JDP, sums of locally randomized
reports in LDP, exact sums without privacy):

    wgram   sum sbar^-2 x1 x1^T   (symmetric)      wtarget  sum sbar^-2 x1 V(s')
    gram2   sum x2 x2^T           (symmetric)      target2  sum x2 V(s')^2

with x1 = phi_V(s_h, a_h), x2 = phi_{V^2}(s_h, a_h), V = V^_{h+1} the published value table.
The learner solves both ridge regressions (w^ on the weighted pair, w~ on the second moments,
each regularized like UCRL-VTR's: lambda I + shift or projection), plans optimistically with
(w^, Lambda^, beta^) exactly as UCRL-VTR does, and publishes with the greedy actions and values
the weights 1 / sbar^2 of every (h, s, a):

    varbar = [<x2, w~>]_[0, c^2] - [<x1, w^>]^2_[0, c]
    E      = min(c^2, 2 c betav ||x1||_{Lambda^-1}) + min(c^2, beta~ ||x2||_{Lambda~-1})
    sbar^2 = max(H^2 / d, varbar + E)

(c = the public cap of V_{h+1}: H in the paper). The weights are post-processing of the
billboard, so a user only looks its own (h, s_h, a_h) up in the message; clipped to
[0, d / H^2], they bound the weighted statistics' sensitivity.

Errata followed (docs/explanation/linear-mixture.md): UCRL-VTR's (1-5, 15-17, 23) and Alg. 3's
A3-1..7: E uses x2 = phi_{V^2}, not phi_{V~} (1); the second-moment target's sensitivity is
2 H^4, not 2 H^2 (2); failure probabilities p / (24 K H) (3); Pi_[0,H] (4); the learner
publishes the weights (5); the radii's ln(24 k^2 H / p) at k = the episode that plays the
release (6); the ledger charges the true replace-one cost of the paper's sigmas (7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from ...privacy.calibration import Family, split_scales
from ...privacy.grid import FEATURE_GRID
from ...privacy.psd import inverse_norms
from ...stats import Stats
from ...worlds.rollout import Trajectories
from ..base import PolicyMessage
from ..registry import register
from . import luyo
from .common import gram_and_target, model_sensitivities, value_targets
from .ucrl_vtr import UCRLVTRAlgorithm, UCRLVTRKnobs, UCRLVTRLearner

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration

FAMILIES = ("wgram", "wtarget", "gram2", "target2")


class VTRPlusKnobs(UCRLVTRKnobs):
    """Public, data-independent knobs of private UCRL-VTR+ (UCRL-VTR's, read for Alg. 3)."""

    beta_mode: Literal["corollary", "thm7"] = Field(
        "corollary", description="the radii: 3 (C_w+1) sqrt(lambda+Ups) + Bernstein terms"
        " (Cor. 10/11, eq. 6/7) or Thm. 9's minimal ((lambda+Ups_high) C_w + C)/sqrt(lambda+"
        "Ups_low) + Bernstein terms (eq. 5)")
    ridge: float | None = Field(None, gt=0, description="lambda (default: the paper's 1)")
    bernstein_scale: float = Field(
        1.0, ge=0, description="multiplies the radii's concentration terms (eq. 5's Bernstein"
        " terms, ~300 at K = 1000) before beta_scale multiplies the whole radius"
        " (post-processing)")
    split: Literal["variance", "relative"] = Field(
        "variance", description="how zcdp shares the budget over the four families: sigma_f^2"
        " proportional to Delta_f (the least total variance, as UCRL-VTR) or sigma_f"
        " proportional to Delta_f (a quarter of rho each: the same noise-to-range ratio in both"
        " regressions, whose ranges differ c^2 H^2 / d-fold)")


PRESETS: dict[str, VTRPlusKnobs] = {
    "faithful": VTRPlusKnobs(),
    "practical": VTRPlusKnobs(calibration="zcdp", beta_mode="thm7", beta_scale=0.1,
                              bernstein_scale=0.02, shift="release", shift_scale=1.0,
                              clip_remaining=True, noise_norms="variance", split="relative"),
}


def concentration_terms(learner: UCRLVTRLearner, reported: int) -> tuple[float, float, float]:
    """The radii's concentration terms (hat, check, tilde) of release `reported`, scaled."""
    terms = luyo.bernstein_terms(learner.d, learner.horizon, learner.episodes, reported + 1,
                                 learner.lam, learner.algorithm.config.beta)
    scale = learner.knobs.bernstein_scale
    return terms[0] * scale, terms[1] * scale, terms[2] * scale


class SecondMomentLearner(UCRLVTRLearner):
    """The second-moment regression w~ (its own noise bounds and radius beta~)."""

    pair = ("gram2", "target2")
    failure_split = 24

    def beta(self, reported: int, concentration: float | None = None) -> float:
        """beta~ of release `reported`."""
        return super().beta(reported, concentration_terms(self, reported)[2])


class UCRLVTRPlusLearner(UCRLVTRLearner):
    """UCRL-VTR's optimistic planner on the weighted regression, plus the published weights."""

    pair = ("wgram", "wtarget")
    failure_split = 24

    def __init__(self, algorithm: UCRLVTRPlusAlgorithm, calibration: Calibration,
                 seeds: list[int]) -> None:
        super().__init__(algorithm, calibration, seeds)
        self.second = SecondMomentLearner(algorithm, calibration, seeds)
        self.floor_variance = algorithm.config.horizon**2 / self.d  # sbar^2 >= H^2 / d

    def radii(self, reported: int) -> tuple[float, float]:
        """(beta^, betav) of release `reported`."""
        hat, check, _ = concentration_terms(self, reported)
        return self.beta(reported, hat), self.beta(reported, check)

    def radius(self, reported: int) -> float:
        """The public radius beta^ of the planning regression."""
        return self.radii(reported)[0]

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """Greedy actions (R, H, S), values V^ (R, H+1, S) and weights 1/sbar^2 (R, H, S, A)."""
        w1, chol1 = self.estimates(billboard, reported)
        w2, chol2 = self.second.estimates(billboard, reported)
        beta_hat, beta_check = self.radii(reported)
        beta_tilde = self.second.beta(reported)
        actions, values = self.optimistic(w1, chol1, beta_hat)
        caps, model = self.algorithm.caps, self.model
        n_rep, n_s, n_a = w1.shape[0], model.S, model.A
        weights = np.zeros((n_rep, self.horizon, n_s, n_a))
        for h in range(self.horizon):
            cap = caps[h + 1]
            v_next = np.clip(values[:, h + 1], 0.0, cap)
            x1 = model.value_features(v_next)  # (R, S, A, d)
            x2 = model.value_features(v_next**2)
            mean = np.clip(np.einsum("rsad,rd->rsa", x1, w1[:, h]), 0.0, cap)
            second = np.clip(np.einsum("rsad,rd->rsa", x2, w2[:, h]), 0.0, cap**2)
            n1 = inverse_norms(chol1[:, h], x1.reshape(n_rep, n_s * n_a, -1))
            n2 = inverse_norms(chol2[:, h], x2.reshape(n_rep, n_s * n_a, -1))
            err = (np.minimum(cap**2, 2.0 * cap * beta_check * n1)
                   + np.minimum(cap**2, beta_tilde * n2)).reshape(n_rep, n_s, n_a)
            weights[:, h] = 1.0 / np.maximum(self.floor_variance, second - mean**2 + err)
        return {"actions": actions, "values": values, "weights": weights}

    @property
    def floored(self) -> int:
        """Matrices of both regressions whose eigenvalues had to be floored."""
        return self.fallbacks + self.second.fallbacks


@register
class UCRLVTRPlusAlgorithm(UCRLVTRAlgorithm):
    """Private UCRL-VTR+ as a privrl plug-in (none, JDP, LDP)."""

    name = "ucrl-vtr-plus"
    summary = ("linear-mixture UCRL-VTR+ (Luyo et al. Alg. 3): variance-weighted and second-"
               "moment private Gram/target sums, optimistic value iteration")
    knobs_model = VTRPlusKnobs
    presets = PRESETS

    def __init__(self, config: RunConfig) -> None:
        """UCRL-VTR's checks; lambda defaults to the paper's 1."""
        super().__init__(config)
        self.ridge = float(self.knobs.ridge or 1.0)

    @property
    def weight_max(self) -> float:
        """The largest weight 1/sbar^2 = d / H^2 (sbar^2 >= H^2 / d)."""
        return self.model.d / self.config.horizon**2

    def families(self) -> tuple[Family, ...]:
        """The weighted and second-moment Gram matrices (symmetric) and targets of every step.

        Replace-one sensitivities: the weighted pair is UCRL-VTR's scaled by the weights' bound
        (w X in w [lo, hi] with w in [0, w_max] and lo <= 0 <= hi), the second-moment pair is
        UCRL-VTR's at value caps c^2 (V^2 in [0, c^2]); `model_sensitivities` tightens both by
        the public features. The paper's sigma_B,1 / sigma_B,2 (Cor. 10 / 11) when calibrated
        as in the paper, else one zCDP sigma per family, sigma_f^2 proportional to Delta_f."""
        cfg = self.config
        h, d, wmax = cfg.horizon, self.model.d, self.weight_max
        caps = self.caps[1:]
        first = {k: wmax * v for k, v in model_sensitivities(self.model, caps).items()}
        second = model_sensitivities(self.model, caps**2)
        sens = [first["gram_l2"], first["target_l2"], second["gram_l2"], second["target_l2"]]
        scales: list[float | None] = [None] * 4
        if self.knobs.calibration == "paper" and cfg.boundary.private:
            x_max, fb = self.x_max, self.model.feature_bound
            s1, s2 = (luyo.paper_sigma(cfg.boundary, h, cfg.episodes, cfg.epsilon, cfg.delta,
                                       paper, streams=4)
                      for paper in (2.0 * wmax * x_max**2, 2.0 * (fb * h**2) ** 2))
            scales = [s1, s1, s2, s2]
        elif self.knobs.calibration == "zcdp" and self.knobs.split == "variance":
            scales = list(split_scales(cfg, sens) or scales)
        elif self.knobs.calibration == "zcdp":  # equal shares: the unit split times Delta_f
            unit = split_scales(cfg, [1.0] * len(sens))
            scales = [u * x for u, x in zip(unit, sens, strict=True)] if unit else scales
        x1 = self.model.feature_bound * caps  # ||x1|| <= fb c, ||x2|| <= fb c^2
        tops = (wmax * x1**2, wmax * x1 * caps, (x1 * caps) ** 2, x1 * caps**3)
        kinds = (("gram", first), ("target", first), ("gram", second), ("target", second))
        out = []
        for name, (kind, base), top, scale in zip(FAMILIES, kinds, tops, scales, strict=True):
            sym, peak = kind == "gram", float(top.max(initial=0.0))
            out.append(Family(name, (h, d, d) if sym else (h, d), base[f"{kind}_l1"],
                              base[f"{kind}_l2"], peak, -peak, sym, scale, FEATURE_GRID,
                              rounded=True))
        return tuple(out)

    def message_arrays(self) -> dict[str, tuple[int, ...]]:
        """The value tables V^_1..V^_{H+1} and the weights 1/sbar^2 of every (h, s, a)."""
        cfg = self.config
        return {"values": (cfg.horizon + 1, cfg.n_states),
                "weights": (cfg.horizon, cfg.n_states, cfg.n_actions)}

    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        """The four families of every step from the user's trajectory, the message's value
        tables and its own weight 1/sbar^2 (h, s_h, a_h), clipped to [0, d / H^2]."""
        caps = self.caps
        values = np.clip(np.asarray(message["values"], dtype=np.float64), 0.0,
                         caps[None, :, None])
        rows = np.arange(trajectories.actions.shape[0])[:, None]
        steps = np.arange(self.config.horizon)[None, :]
        raw = np.asarray(message["weights"], dtype=np.float64)
        raw = raw[rows, steps, trajectories.states[:, :-1], trajectories.actions]
        weight = np.clip(np.nan_to_num(raw, nan=0.0), 0.0, self.weight_max)
        gram, target = gram_and_target(*value_targets(self.model, trajectories, values, caps))
        gram2, target2 = gram_and_target(*value_targets(self.model, trajectories, values**2,
                                                        caps**2))
        return {"wgram": weight[..., None, None] * gram, "wtarget": weight[..., None] * target,
                "gram2": gram2, "target2": target2}

    def learner(self, calibration: Calibration, seeds: list[int]) -> UCRLVTRPlusLearner:
        """The optimistic planner over the billboard."""
        return UCRLVTRPlusLearner(self, calibration, seeds)
