"""DP-UCBVI (Qiao & Wang): optimistic value iteration on private counts, vectorized over replicas.

The learner is a function of the billboard only (noisy prefix sums + the public radius E): it
post-processes the noisy counts into valid private counts (Lemma 5.4), builds the Bernstein-type
private bonus and runs optimistic value iteration (Qiao & Wang, Alg. 1). Edge cases: errata E4, E5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ... import accel
from ...config import RunConfig
from ...privacy.postprocess import project_counts
from ...seeding import generator
from ...stats import Stats
from ...ties import TIE_TOL
from .knobs import UCBVIKnobs

# plan_replicas' kept-model arrays, empty: the learner rebuilds the model at every plan
NO_KEPT_MODEL = (np.empty((0, 1, 1, 1, 1)), np.empty((0, 1, 1, 1)), np.empty((0, 1, 1, 1)),
                 np.empty((0, 1, 1, 1, 1)), np.empty((0, 1, 1)), np.empty((0, 1, 1, 1), np.bool_))


def iota(config: RunConfig) -> float:
    """iota = log(30 H S A T / beta), T = H K."""
    h, s, a = config.horizon, config.n_states, config.n_actions
    return math.log(30.0 * h * s * a * h * config.episodes / config.beta)


def private_model(release: Stats, radius: float, private: bool) -> tuple[np.ndarray, ...]:
    """Private counts N~(s,a), transition estimates P~ and reward estimates r~ (eq. 1).

    Cells with N~ = 0 get a uniform P~ and r~ = 0; the planner treats them as unvisited.
    """
    if private:
        proj = project_counts(release["sas"], release["sa"], radius)
        n_sas, n_sa = proj.sas, proj.sa
    else:
        n_sas, n_sa = release["sas"], release["sa"]
    visited = n_sa > 0
    safe = np.where(visited, n_sa, 1.0)
    n_states = n_sas.shape[-1]
    p = np.where(visited[..., None], n_sas / safe[..., None], 1.0 / n_states)
    r = np.where(visited, np.clip(release["r"] / safe, 0.0, 1.0), 0.0)
    return n_sa, p, r


class DPUCBVI:
    """The learner of a DP-UCBVI run (one per run; R replicas planned at once)."""

    def __init__(self, config: RunConfig, knobs: UCBVIKnobs, seeds: Sequence[int]) -> None:
        self.config = config
        self.knobs = knobs
        self.seeds = [int(s) for s in seeds]
        self.iota = iota(config)
        h, s, a = config.horizon, config.n_states, config.n_actions
        self.q = np.full((len(self.seeds), h, s, a), float(h))
        self.caps = (
            (h - np.arange(h, dtype=float)) if self.knobs.clip_remaining else np.full(h, float(h))
        )

    def _static_bonus(self, n_sa: np.ndarray, p: np.ndarray, radius: float) -> np.ndarray:
        """Bonus terms 2, 3 and 4 (value-independent), scaled; +inf where N~ = 0."""
        k, h_ = self.knobs, self.config.horizon
        io, _, _, c3, c1, c23, _ = self.constants(radius)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv_n = np.where(n_sa > 0, 1.0 / n_sa, np.inf)
            term2 = np.sqrt(2.0 * io * inv_n)
            term3 = c3 * inv_n
            bonus = k.bonus_scale * term2 + (k.privacy_scale * term3 if radius > 0 else 0.0)
            if k.variance_terms and h_ > 1:
                # W_h(s,a) = sum_s' P~_h(s'|s,a) min{c1/N' + (c2 + c3)/N'^2, H^2}, N' = N~_{h+1}(s')
                n_next = n_sa.sum(axis=-1)  # (R, Hs, S)
                g = np.where(n_next > 0, np.minimum(c1 / n_next + c23 / n_next**2, h_**2), h_**2)
                # sums over s' as numpy's .sum does them (the compiled path sums alike)
                if n_sa.shape[1] == 1:  # pooled over h: the same next-step counts
                    w = (p * g[:, :, None, None, :]).sum(axis=-1)
                    w = np.broadcast_to(w, (w.shape[0], h_, *w.shape[2:])).copy()
                else:
                    w = (p[:, :-1] * g[:, 1:, None, None, :]).sum(axis=-1)
                    w = np.concatenate([w, np.zeros_like(w[:, :1])], axis=1)
                w[:, -1] = 0.0  # term 4 is 0 at h = H (E5)
                term4 = 4.0 * math.sqrt(io) * np.sqrt(w * inv_n)
                bonus = bonus + k.bonus_scale * np.where(n_sa > 0, term4, np.inf)
        return np.where(n_sa > 0, bonus, np.inf)

    def plan(
        self,
        release: Stats,
        radius: float,
        count_std: float,
        episode: int,
        private: bool,
    ) -> np.ndarray:
        """Optimistic value iteration from the billboard; returns the greedy policy (R, H, S).

        `count_std` is the public std of the released N(s,a) error (0 without noise). Compiled
        (`privrl.accel`) when enabled, else numpy; both give the same numbers.
        """
        threshold = self.knobs.unknown_below * count_std
        if accel.enabled():
            return self._plan_compiled(release, radius, threshold, episode, private)
        n_sa, p, r = private_model(release, radius, private)
        if threshold > 0:
            n_sa = np.where(n_sa >= threshold, n_sa, 0.0)
        visited = n_sa > 0
        # Value-independent parts for all h at once; unvisited cells are +inf (b = +inf, E4).
        base = np.where(visited, r + self._static_bonus(n_sa, p, radius), np.inf)
        cb = self._variance_coefficient()
        with np.errstate(divide="ignore"):
            var_coef = np.where(visited, 2.0 * cb * np.sqrt(self.iota / n_sa), 0.0)
        caps = np.broadcast_to(self.caps[None, :, None, None], self.q.shape)
        ceiling = np.minimum(caps, self.q) if self.knobs.clip_previous else caps
        n_rep, horizon, n_states = self.q.shape[:3]
        pooled = n_sa.shape[1] == 1
        q_new = np.empty_like(self.q)
        v = np.zeros((n_rep, 1, 1, n_states))  # V of the next step
        for h in range(horizon - 1, -1, -1):
            j = 0 if pooled else h
            # (P V) and (P V^2) summed over s' as numpy's .sum does (not BLAS: its order depends
            # on the CPU kernel), which is also the compiled path's order
            pv = (p[:, j] * v).sum(axis=-1)
            q = base[:, j] + pv
            if cb > 0:
                pv2 = (p[:, j] * (v * v)).sum(axis=-1)
                q += var_coef[:, j] * np.sqrt(np.maximum(pv2 - pv * pv, 0.0))
            np.minimum(q, ceiling[:, h], out=q)
            q_new[:, h] = q
            v = q.max(axis=-1)[:, None, None, :]
        self.q = q_new
        return self.greedy(episode)

    def _variance_coefficient(self) -> float:
        """c_b of the variance term (0 without variance terms)."""
        return self.knobs.bonus_scale if self.knobs.variance_terms else 0.0

    def constants(self, radius: float) -> np.ndarray:
        """The compiled planner's scalars for this radius, computed as `_static_bonus` does:
        [iota, c_b, c_p, term 3's factor, c1, c2 + c3, variance coefficient]."""
        return self.constants_block([float(radius)])[0]

    def constants_block(self, radii: list[float]) -> np.ndarray:
        """`constants` of each radius (B, 7), with the same float arithmetic per radius but one
        array for the block (the fused loop's per-episode Python was an array per episode)."""
        cfg, k = self.config, self.knobs
        h_, s_, a_, io = cfg.horizon, cfg.n_states, cfg.n_actions, self.iota
        lead = 1000.0**2 * s_**4 * a_**2 * io**4
        out = np.empty((len(radii), 7))
        out[:, :3] = (io, k.bonus_scale, k.privacy_scale)
        out[:, 3] = [20.0 * h_ * s_ * radius * io for radius in radii]
        out[:, 4] = 1000.0**2 * h_**3 * s_ * a_ * io**2
        out[:, 5] = [lead * (h_**4 * radius**2 + h_**6) for radius in radii]
        out[:, 6] = self._variance_coefficient()
        return out

    def _plan_compiled(
        self, release: Stats, radius: float, threshold: float, episode: int, private: bool
    ) -> np.ndarray:
        """`plan` in one compiled pass (`privrl.accel.planning`), same numbers as numpy."""
        from ...accel.planning import plan_replicas

        k = self.knobs
        q_new = np.empty_like(self.q)
        actions = np.empty(self.q.shape[:3], dtype=np.int64)
        tied = np.empty(self.q.shape[0], dtype=np.bool_)
        plan_replicas(
            np.ascontiguousarray(release["sas"], dtype=np.float64),
            np.ascontiguousarray(release["sa"], dtype=np.float64),
            np.ascontiguousarray(release["r"], dtype=np.float64),
            float(radius), bool(private), float(threshold), self.constants(radius), self.caps,
            self.q,
            bool(k.clip_previous), bool(radius > 0), bool(k.variance_terms), q_new, actions,
            tied, *NO_KEPT_MODEL,
        )
        self.q = q_new
        for i in np.flatnonzero(tied):
            actions[i] = self._break_ties(i, episode)
        return actions

    def greedy(self, episode: int) -> np.ndarray:
        """argmax_a Q~ with uniformly random tie-breaking from the learner's seeded stream.

        Only replicas with a tie draw (from `generator(seed, "tiebreak", episode)`), so the
        policy stays a pure function of (Q~, seed, episode).
        """
        best = self.q.max(axis=-1, keepdims=True)
        ties = self.q >= best - TIE_TOL
        actions = np.argmax(ties, axis=-1)
        for i in np.flatnonzero(ties.sum(axis=-1).max(axis=(1, 2)) > 1):
            actions[i] = self._break_ties(i, episode)
        return actions

    def _break_ties(self, i: int, episode: int) -> np.ndarray:
        """Replica i's greedy actions (H, S), ties broken by its seeded tie-break stream."""
        q = self.q[i]
        ties = q >= q.max(axis=-1, keepdims=True) - TIE_TOL
        keys = ties + generator(self.seeds[i], "tiebreak", episode).random(q.shape)
        return np.argmax(np.where(ties, keys, -1.0), axis=-1)
