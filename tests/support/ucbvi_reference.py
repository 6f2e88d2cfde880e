"""A plain numpy DP-UCBVI planner (Qiao & Wang, Alg. 1 and Lemma 5.4): the reference the
compiled planner (`privrl.accel.kernels.plan_replicas`) is compared with, to a tolerance. BLAS
is welcome here."""

from __future__ import annotations

import math

import numpy as np
from privrl.algorithms.ucbvi.learner import DPUCBVI
from privrl.stats import Stats

from support.projection import project_counts


def private_model(release: Stats, radius: float, private: bool) -> tuple[np.ndarray, ...]:
    """N~(s,a), P~ and r~ (eq. 1); cells with N~ = 0 get a uniform P~ and r~ = 0."""
    if private:
        proj = project_counts(release["sas"], release["sa"], radius)
        n_sas, n_sa = proj.sas, proj.sa
    else:
        n_sas, n_sa = release["sas"], release["sa"]
    visited = n_sa > 0
    safe = np.where(visited, n_sa, 1.0)
    p = np.where(visited[..., None], n_sas / safe[..., None], 1.0 / n_sas.shape[-1])
    r = np.where(visited, np.clip(release["r"] / safe, 0.0, 1.0), 0.0)
    return n_sa, p, r


def static_bonus(planner: DPUCBVI, n_sa: np.ndarray, p: np.ndarray, radius: float
                 ) -> np.ndarray:
    """Bonus terms 2, 3 and 4 (value-independent), scaled; +inf where N~ = 0."""
    k, h_ = planner.knobs, planner.config.horizon
    io, _, _, c3, c1, c23, _ = planner.constants(radius)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_n = np.where(n_sa > 0, 1.0 / n_sa, np.inf)
        bonus = k.bonus_scale * np.sqrt(2.0 * io * inv_n)
        if radius > 0:
            bonus = bonus + k.privacy_scale * c3 * inv_n
        if k.variance_terms and h_ > 1:
            n_next = n_sa.sum(axis=-1)  # (R, Hs, S)
            g = np.where(n_next > 0, np.minimum(c1 / n_next + c23 / n_next**2, h_**2), h_**2)
            if n_sa.shape[1] == 1:  # pooled over h: the same next-step counts
                w = np.einsum("rjsat,rjt->rjsa", p, g)
                w = np.broadcast_to(w, (w.shape[0], h_, *w.shape[2:])).copy()
            else:
                w = np.einsum("rjsat,rjt->rjsa", p[:, :-1], g[:, 1:])
                w = np.concatenate([w, np.zeros_like(w[:, :1])], axis=1)
            w[:, -1] = 0.0  # term 4 is 0 at h = H (E5)
            bonus = bonus + k.bonus_scale * 4.0 * math.sqrt(io) * np.sqrt(w * inv_n)
    return np.where(n_sa > 0, bonus, np.inf)


def plan_q(planner: DPUCBVI, release: Stats, radius: float, threshold: float, private: bool
           ) -> np.ndarray:
    """Q~ (R, H, S, A) of optimistic value iteration from `release`, clipped by planner.q."""
    n_sa, p, r = private_model(release, radius, private)
    if threshold > 0:
        n_sa = np.where(n_sa >= threshold, n_sa, 0.0)
    visited = n_sa > 0
    base = np.where(visited, r + static_bonus(planner, n_sa, p, radius), np.inf)
    cb = planner.knobs.bonus_scale if planner.knobs.variance_terms else 0.0
    with np.errstate(divide="ignore"):
        var_coef = np.where(visited, 2.0 * cb * np.sqrt(planner.iota / n_sa), 0.0)
    caps = np.broadcast_to(planner.caps[None, :, None, None], planner.q.shape)
    ceiling = np.minimum(caps, planner.q) if planner.knobs.clip_previous else caps
    n_rep, horizon, n_states, _ = planner.q.shape
    q_new = np.empty_like(planner.q)
    v = np.zeros((n_rep, n_states))
    for h in range(horizon - 1, -1, -1):
        j = 0 if n_sa.shape[1] == 1 else h
        pv = np.einsum("rsat,rt->rsa", p[:, j], v)
        q = base[:, j] + pv
        if cb > 0:
            pv2 = np.einsum("rsat,rt->rsa", p[:, j], v * v)
            q = q + var_coef[:, j] * np.sqrt(np.maximum(pv2 - pv * pv, 0.0))
        q_new[:, h] = np.minimum(q, ceiling[:, h])
        v = q_new[:, h].max(axis=-1)
    return q_new
