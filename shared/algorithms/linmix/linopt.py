"""Private LinOpt-VI and LinOpt-PO (Zhou, Alg. 1 and 2): optimism under changing regularizers.

Per step h four statistics are released: the transition Gram X X^T and moment X y (value-targeted,
X = phi_{V_{h+1}}(s_h, a_h), y = V_{h+1}(s_{h+1}) with the V of the episode of collection) and the
reward Gram f f^T and moment f r (f = varphi(s_h, a_h), r the observed reward). Tree counters in
JDP (the paper's PRIVATIZER), sums of locally randomized reports in LDP (an extension: the
paper gives no LDP constants), exact sums without privacy. The learner forms

    Lambda_{h,*} = release + (lambda + 2 Sigma_*) I,   theta_hat = Lambda^{-1} u,
    Q_h = Pi_[0, H-h+1]( <varphi, theta_r> + <phi_V, theta_p> + beta_p ||phi_V||_{Lambda_p^-1}
                         + beta_r ||varphi||_{Lambda_r^-1} )

and plays greedily (VI, ties uniformly at random from the server's seed; `tie_break=first`: the
lowest index, erratum 13) or a softmax policy updated by mirror descent pi^{k+1} = softmax(eta
sum_{j<=k} Q^j) (PO). Errata followed: Lambda^1 = Z^1 (1), features of the episode of collection
(2), Q truncated at H-h+1 (4), m = max(1, ceil(log2 K)) (5), Sigma_p with sqrt(d1) (8),
lowest-index ties (13) as the `first` option only (a saturated Q ties everywhere), eigenvalue
floor (17), LDP as a labelled extension (18). Our one addition: the private regularizer also
carries the non-private ridge lambda (default 1), so that eps -> inf reduces to the non-private
algorithm exactly (the paper's private Z = N + 2 Sigma I is singular at sigma = 0); it only makes
lambda_min, lambda_max larger by lambda and is post-processing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...privacy.calibration import split_scales
from ...privacy.grid import FEATURE_GRID
from ...privacy.psd import cholesky_solve, inverse_norms, regularize
from ...stats import Stats
from ...ties import best_action, tie_priorities
from ...worlds.rollout import Trajectories
from ..base import Algorithm, Family, Learner, PolicyMessage
from ..registry import register
from . import zhou
from .common import (
    clip_norm,
    gram_and_target,
    model_sensitivities,
    released_since,
    run_model,
    value_caps,
    value_targets,
    vtr_sensitivities,
)

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration

FAMILIES = ("gram_p", "target_p", "gram_r", "target_r")


class LinOptKnobs(BaseModel):
    """Public, data-independent knobs of Private-LinOpt-VI / -PO."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calibration: Literal["paper", "zcdp"] = Field(
        "paper", description="noise scales: Zhou's sigma_p1, sigma_p2, sigma_r (Thm. 6.4; LDP:"
        " m = 1) or per-family sigmas spending exactly (epsilon, delta) under zCDP, split"
        " with sigma_f^2 proportional to the family's sensitivity (Gaussian; Laplace: one scale)")
    beta_scale: float = Field(1.0, ge=0, description="multiplies beta_p and beta_r")
    shift: Literal["paper", "release"] = Field(
        "paper", description="Sigma from sqrt(m) sigma (JDP) / sqrt(K) sigma (LDP), or from the"
        " release's own error std (running maximum over versions)")
    shift_scale: float = Field(1.0, ge=0, description="the shift is 2 shift_scale Sigma")
    noise_norms: Literal["tail", "variance"] = Field(
        "tail", description="Sigma and the vector noise's norm: Lemmas B.4/B.5's tails with the"
        " union bound over K H (the paper's) or the noise's own scale from its variance"
        " (2 sqrt(d) s_m, sqrt(d) s_v: `privacy.psd.variance_norms`)")
    psd: Literal["shift", "project"] = Field(
        "shift", description="how the noisy Gram is made positive definite: the paper's shift"
        " (lambda + 2 shift_scale Sigma) I, or a projection: lambda I + release with every"
        " eigenvalue below lambda_min raised to it (explored directions keep their eigenvalues;"
        " both are post-processing)")
    ridge: float = Field(1.0, gt=0, description="lambda: the non-private regularizer,"
                         " also added to the private one")
    tie_break: Literal["first", "random"] = Field(
        "random", description="VI's actions whose clipped Q tie (every Q saturates at H-h+1"
        " early on): one drawn uniformly from the server's secret seed and the release, or the"
        " lowest index (Zhou's erratum 13; post-processing either way)")


PRESETS: dict[str, LinOptKnobs] = {
    "faithful": LinOptKnobs(),
    "practical": LinOptKnobs(calibration="zcdp", beta_scale=0.1, shift="release",
                             noise_norms="variance"),
}


class LinOptLearner(Learner):
    """The optimistic backward pass (Zhou 2022, Alg. 1) on the private regularized statistics."""

    def __init__(self, algorithm: LinOptAlgorithm, calibration: Calibration,
                 seeds: list[int]) -> None:
        self.algorithm, self.calibration = algorithm, calibration
        self.model, self.knobs = algorithm.model, algorithm.knobs
        self.seeds = [int(s) for s in seeds]
        cfg = algorithm.config
        self.horizon, self.episodes = cfg.horizon, cfg.episodes
        self.private = calibration.mechanism is not None
        self.fallbacks = 0
        n = len(seeds)
        self.po = algorithm.policy_optimization
        self.eta = zhou.eta(cfg.n_actions, cfg.horizon, cfg.episodes)
        self.logits = np.zeros((n, cfg.horizon, cfg.n_states, cfg.n_actions))
        self.q: np.ndarray | None = None  # Q^k of the last plan (PO's next mirror step)
        self.planned_at = 0
        self.caps = float(cfg.horizon) - np.arange(cfg.horizon, dtype=float)  # H - h + 1

    def plans_at(self, reported: int, last_planned: int) -> bool:
        """Only when the billboard changed (at the schedule's releases)."""
        return released_since(self.calibration, reported, last_planned)

    def parts(self, reported: int) -> tuple[zhou.Part, zhou.Part]:
        """The transition and reward regressions' Sigma, lambdas, nu and beta at this release."""
        cal, cfg, k = self.calibration, self.algorithm.config, self.knobs
        stds = dict.fromkeys(FAMILIES, 0.0)
        if self.private:
            if k.shift == "paper":
                terms = zhou.tree_levels(self.episodes) if cal.boundary.counters else self.episodes
                stds = {n: cal.family(n).scale * math.sqrt(terms) for n in FAMILIES}
            else:
                stds = {n: cal.release_std_bound(reported, n) for n in FAMILIES}
        common = (self.horizon, self.episodes, cfg.beta, k.ridge, k.shift_scale, k.noise_norms)
        p = zhou.part("p", self.model.d, stds["gram_p"], stds["target_p"], *common)
        r = zhou.part("r", self.model.d2, stds["gram_r"], stds["target_r"], *common)
        return p, r

    def radius(self, reported: int) -> float:
        """The public transition radius beta_p (what the billboard view reports)."""
        return self.knobs.beta_scale * self.parts(reported)[0].beta

    def _solve(self, gram: np.ndarray, target: np.ndarray, part: zhou.Part
               ) -> tuple[np.ndarray, np.ndarray]:
        """theta_hat and L^{-1} of Lambda = release + (lambda + 2 s Sigma) I floored at
        lambda_min (`psd=shift`), or release + lambda I projected onto eigenvalues >= lambda_min
        (`psd=project`)."""
        shift = 2.0 * self.knobs.shift_scale * part.big_sigma if self.knobs.psd == "shift" else 0.0
        reg = regularize(gram, self.knobs.ridge + shift, floor=part.lam_min)
        self.fallbacks += int(reg.floored.sum())
        return cholesky_solve(reg.matrices, target)

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """VI: greedy actions and V; PO: the mirror-descent softmax policy and V^pi."""
        if self.po and self.q is not None:  # one mirror step per episode played with Q^k
            self.logits += self.eta * (reported - self.planned_at) * self.q
        p, r = self.parts(reported)
        theta_p, inv_p = self._solve(billboard["gram_p"], billboard["target_p"], p)
        theta_r, inv_r = self._solve(billboard["gram_r"], billboard["target_r"], r)
        model, scale = self.model, self.knobs.beta_scale
        assert model.reward_features is not None
        n_rep, n_s, n_a = theta_p.shape[0], model.S, model.A
        varphi = model.reward_features.reshape(n_s * n_a, -1)
        reward = np.einsum("ne,rhe->rhn", varphi, theta_r)
        reward += scale * r.beta * inverse_norms(inv_r, np.broadcast_to(
            varphi, (n_rep, self.horizon, *varphi.shape)))
        reward = reward.reshape(n_rep, self.horizon, n_s, n_a)
        probs = None
        if self.po:
            z = self.logits - self.logits.max(axis=-1, keepdims=True)
            probs = np.exp(z)
            probs /= probs.sum(axis=-1, keepdims=True)
        values = np.zeros((n_rep, self.horizon + 1, n_s))
        q_all = np.empty((n_rep, self.horizon, n_s, n_a))
        for h in range(self.horizon - 1, -1, -1):
            x = model.value_features(values[:, h + 1])
            bonus = inverse_norms(inv_p[:, h], x.reshape(n_rep, n_s * n_a, -1))
            q = (reward[:, h] + np.einsum("rsad,rd->rsa", x, theta_p[:, h])
                 + scale * p.beta * bonus.reshape(n_rep, n_s, n_a))
            q = np.clip(q, 0.0, self.caps[h])
            q_all[:, h] = q
            values[:, h] = (probs[:, h] * q).sum(-1) if probs is not None else q.max(-1)
        self.q, self.planned_at = q_all, reported
        if probs is None:
            return {"actions": self._greedy(q_all, billboard, reported), "values": values}
        return {"actions": np.argmax(probs, axis=-1), "probs": probs, "values": values}


    def _greedy(self, q_all: np.ndarray, billboard: Stats, reported: int) -> np.ndarray:
        """VI's greedy actions (R, H, S): ties to the lowest index, or (`tie_break=random`) to
        priorities drawn from the server's seed and this release."""
        if self.knobs.tie_break == "first":
            return np.argmax(q_all, axis=-1)
        release = [billboard[name] for name in FAMILIES]
        release.append(np.full((q_all.shape[0], 1), reported, dtype=np.int64))
        return best_action(q_all, tie_priorities(self.seeds, "linopt", release, q_all.shape[1:]))


class LinOptAlgorithm(Algorithm):
    """Private LinOpt (VI or PO) as a privrl plug-in (none, JDP; LDP as an extension)."""

    knobs_model = LinOptKnobs
    presets = PRESETS
    default_world = "zhou-mix"
    default_mechanism = "gaussian"
    practical_schedule = "batch:10"  # learns from eps = 3 (docs/results/linear.md)
    practical_counter = ("matrix", 256)  # tuning seeds (docs/results/frontier.md)
    policy_optimization: ClassVar[bool] = False

    def __init__(self, config: RunConfig) -> None:
        """Bind to `config`: its public model must have reward features and fit (S, A, H)."""
        super().__init__(config)
        self.model = run_model(config, self.name, known_rewards=False, reward_features=True)
        self.caps = value_caps(config.horizon, remaining=True)  # Q_h <= H-h+1 (erratum 4)
        if (config.boundary.private and self.knobs.calibration == "paper"
                and config.mechanism != "gaussian"):
            raise ValueError(f"{self.name}'s paper calibration is Gaussian (Thm. 6.4): use"
                             " --mechanism gaussian, or knob calibration=zcdp for other mechanisms")

    def families(self) -> tuple[Family, ...]:
        """The four statistics of every step with replace-one sensitivities (paper scales when
        calibrated as in the paper)."""
        cfg, model = self.config, self.model
        h, d1, d2 = cfg.horizon, model.d, model.d2
        x_caps = model.feature_bound * self.caps[1:]  # V_{h+1} <= H-h: Q is clipped at H-h+1
        p = model_sensitivities(model, self.caps[1:])
        r = vtr_sensitivities(d2, np.ones(h), np.ones(h))
        scales: dict[str, float | None] = dict.fromkeys(FAMILIES)
        if self.knobs.calibration == "paper" and cfg.boundary.private:
            levels = zhou.tree_levels(cfg.episodes) if cfg.boundary.counters else 1
            args = (h, cfg.epsilon, cfg.delta, levels)
            scales = {"gram_p": zhou.paper_sigma(d1 * h**2, *args),
                      "target_p": zhou.paper_sigma(math.sqrt(d1) * h**2, *args),
                      "gram_r": zhou.paper_sigma(1.0, *args),
                      "target_r": zhou.paper_sigma(1.0, *args)}
        elif self.knobs.calibration == "zcdp":
            split = split_scales(cfg, [p["gram_l2"], p["target_l2"], r["gram_l2"],
                                       r["target_l2"]])
            if split is not None:
                scales = dict(zip(FAMILIES, split, strict=True))
        x_top = float(x_caps.max(initial=0.0))
        y_max = float((x_caps * self.caps[1:]).max(initial=0.0))
        return (
            Family("gram_p", (h, d1, d1), p["gram_l1"], p["gram_l2"], x_top**2, -x_top**2, True,
                   scales["gram_p"], FEATURE_GRID, rounded=True),
            Family("target_p", (h, d1), p["target_l1"], p["target_l2"], y_max, -y_max, False,
                   scales["target_p"], FEATURE_GRID, rounded=True),
            Family("gram_r", (h, d2, d2), r["gram_l1"], r["gram_l2"], 1.0, -1.0, True,
                   scales["gram_r"], FEATURE_GRID, rounded=True),
            Family("target_r", (h, d2), r["target_l1"], r["target_l2"], 1.0, -1.0, False,
                   scales["target_r"], FEATURE_GRID, rounded=True),
        )

    def message_arrays(self) -> dict[str, tuple[int, ...]]:
        """V^k_1..V^k_{H+1} (and PO's action probabilities pi^k)."""
        cfg = self.config
        out = {"values": (cfg.horizon + 1, cfg.n_states)}
        if self.policy_optimization:
            out["probs"] = (cfg.horizon, cfg.n_states, cfg.n_actions)
        return out

    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        """The transition and reward statistics of each step (clipped to Asm. 1's bounds)."""
        x, y = value_targets(self.model, trajectories, message["values"], self.caps)
        gram_p, target_p = gram_and_target(x, y)
        assert self.model.reward_features is not None
        f = clip_norm(self.model.reward_features[trajectories.states[:, :-1],
                                                 trajectories.actions], 1.0)
        r = np.clip(trajectories.rewards, 0.0, 1.0)
        gram_r, target_r = gram_and_target(f, r)
        return {"gram_p": gram_p, "target_p": target_p, "gram_r": gram_r, "target_r": target_r}

    def learner(self, calibration: Calibration, seeds: list[int]) -> LinOptLearner:
        """The optimistic planner over the billboard."""
        return LinOptLearner(self, calibration, seeds)


@register
class LinOptVI(LinOptAlgorithm):
    """Private-LinOpt-VI (Zhou Alg. 1): greedy in the optimistic Q."""

    name = "linopt-vi"
    summary = ("linear-mixture LinOpt-VI (Zhou Alg. 1): private changing regularizers (4H tree"
               " counters), optimistic value iteration; LDP is a labelled extension")


@register
class LinOptPO(LinOptAlgorithm):
    """Private-LinOpt-PO (Zhou Alg. 2): softmax policy, mirror descent on optimistic Q."""

    name = "linopt-po"
    summary = ("linear-mixture LinOpt-PO (Zhou Alg. 2): optimistic policy evaluation, KL mirror"
               " descent pi ~ exp(eta sum Q); LDP is a labelled extension")
    policy_optimization = True
