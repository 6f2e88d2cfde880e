"""DP-UCBVI (Qiao & Wang): optimistic value iteration on private counts, vectorized over replicas.

The learner is a function of the billboard only (noisy prefix sums + the public radius E): it
post-processes the noisy counts into valid private counts (Lemma 5.4), builds the Bernstein-type
private bonus and runs optimistic value iteration (Qiao & Wang, Alg. 1), in one compiled pass
(`privrl.accel.kernels.plan_replicas`). Edge cases: errata E4, E5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from ... import accel
from ...config import RunConfig
from ...privacy.schedules import parse_schedule
from ...seeding import episode_rows
from ...stats import Stats
from ...ties import TIE_TOL
from .knobs import UCBVIKnobs

TIEBREAK = "tiebreak"  # the learner's stream of tie-break draws, (H, S) uniforms per episode


def iota(config: RunConfig) -> float:
    """iota = log(30 H S A T / beta), T = H K."""
    h, s, a = config.horizon, config.n_states, config.n_actions
    return math.log(30.0 * h * s * a * h * config.episodes / config.beta)


def union_threshold(config: RunConfig, pooled: bool) -> float:
    """The z with P(N(0,1) > z) = beta / (pairs x releases): every (h,s,a) the planner checks
    at every release of the run's schedule (all public)."""
    pairs = (1 if pooled else config.horizon) * config.n_states * config.n_actions
    releases = max(parse_schedule(config.schedule or "every").releases(config.episodes), 1)
    return NormalDist().inv_cdf(1.0 - config.beta / (pairs * releases))


def dense(array: np.ndarray) -> np.ndarray:
    """A C-contiguous, writable float64 array (the kernels' one signature), copied if needed."""
    return np.require(array, np.float64, ["C", "W"])


class DPUCBVI:
    """The learner of a DP-UCBVI run (one per run; R replicas planned at once)."""

    def __init__(self, config: RunConfig, knobs: UCBVIKnobs, seeds: Sequence[int]) -> None:
        self.config = config
        self.knobs = knobs
        self.seeds = [int(s) for s in seeds]
        self.iota = iota(config)
        self.unknown_below = knobs.unknown_below  # x the count std: the unvisited threshold
        if knobs.unknown_union:
            self.unknown_below = max(self.unknown_below, union_threshold(config, knobs.pooled))
        h, s, a = config.horizon, config.n_states, config.n_actions
        self.q = np.full((len(self.seeds), h, s, a), float(h))
        self.caps = (
            (h - np.arange(h, dtype=float)) if self.knobs.clip_remaining else np.full(h, float(h))
        )
        self.support = np.empty((0, 0, 0), dtype=bool)  # empty: no support declared
        self.factor = np.empty((0, 0))  # empty: one threshold for every (s, a)

    def restrict(self, support: np.ndarray | None, factor: np.ndarray | None) -> None:
        """Public arrays the planner uses from now on: the transition support (S, A, S) P~ is
        restricted to, and each (s, a)'s factor (S, A) of the threshold (None: none)."""
        if support is not None:
            self.support = np.require(support, np.bool_, ["C", "W"])
        if factor is not None:
            self.factor = dense(factor)

    def flags(self, private: bool) -> np.ndarray:
        """The kernels' flags [private, clip_previous, variance_terms]."""
        return np.array([private, self.knobs.clip_previous, self.knobs.variance_terms])

    def plan(
        self,
        release: Stats,
        radius: float,
        count_std: float,
        episode: int,
        private: bool,
    ) -> np.ndarray:
        """Optimistic value iteration from the billboard; returns the greedy policy (R, H, S),
        ties broken at random from the learner's seeded stream (`tie_keys`).

        `count_std` is the public std of the released N(s,a) error (0 without noise).
        """
        kernels = accel.load()
        q_new = np.empty_like(self.q)
        actions = np.empty(self.q.shape[:3], dtype=np.int64)
        tied = np.empty(self.q.shape[0], dtype=np.bool_)
        sums = (dense(release["sas"]), dense(release["sa"]), dense(release["r"]))
        kernels.plan_replicas(sums, float(radius), float(self.unknown_below * count_std),
                              self.constants(radius), self.caps, self.flags(private), self.q,
                              q_new, actions, tied, self.model(kernels, release["sa"].shape),
                              TIE_TOL)
        self.q = q_new
        for i in np.flatnonzero(tied):
            kernels.break_ties(self.q[i], self.tie_keys(i, episode, 1)[0], TIE_TOL, actions[i])
        return actions

    def model(self, kernels: Any, shape: tuple[int, ...]) -> tuple:
        """A fresh kernel model for a release of N(s,a) shape (R, Hs, S, A), with the public
        support and threshold factors."""
        return (*kernels.new_model(*shape)[:6], self.support, self.factor)

    def tie_keys(self, replica: int, first: int, count: int,
                 out: np.ndarray | None = None) -> np.ndarray:
        """Replica's tie-break draws (count, H, S) for episodes first .. first + count - 1
        (into `out`, C-contiguous, when given)."""
        _, h, s, _ = self.q.shape
        rows = episode_rows(self.seeds[replica], TIEBREAK, first, count, h * s, out)
        return rows.reshape(count, h, s)

    def schedule(self, radii: list[float], count_stds: list[float]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The planner's inputs over a block of episodes: each one's radius, threshold (B,) and
        constants (B, 7), as `plan` derives them from the radius and the count std."""
        threshold = self.unknown_below * np.asarray(count_stds, dtype=float)
        return np.asarray(radii, dtype=float), threshold, self.constants_block(radii)

    def constants(self, radius: float) -> np.ndarray:
        """The planner's scalars for this radius: [iota, c_b, c_p, term 3's factor, c1,
        c2 + c3, variance coefficient]."""
        return self.constants_block([float(radius)])[0]

    def constants_block(self, radii: list[float]) -> np.ndarray:
        """`constants` of each radius (B, 7)."""
        cfg, k = self.config, self.knobs
        h_, s_, a_, io = cfg.horizon, cfg.n_states, cfg.n_actions, self.iota
        lead = 1000.0**2 * s_**4 * a_**2 * io**4
        radius = np.asarray(radii, dtype=float)
        out = np.empty((len(radii), 7))
        out[:, :3] = (io, k.bonus_scale, k.privacy_scale)
        out[:, 3] = 20.0 * h_ * s_ * radius * io
        out[:, 4] = 1000.0**2 * h_**3 * s_ * a_ * io**2
        out[:, 5] = lead * (h_**4 * radius**2 + h_**6)
        out[:, 6] = k.bonus_scale if k.variance_terms else 0.0
        return out
