"""Exact regret of a deterministic policy, compiled: `privrl.worlds.evaluation.episode_regret`
for one policy, with the same rounded products summed in numpy's order (so the same number)."""

from __future__ import annotations

import numba
import numpy as np

from .arrays import START
from .planning import pairwise_sum, row_dot


@numba.njit(cache=True, nogil=True, error_model="numpy")
def policy_regret(p: np.ndarray, r: np.ndarray, d1: np.ndarray, optimal: float,
                  policy: np.ndarray, scratch: np.ndarray) -> float:
    """optimal - d1 . V^pi_1 for policy (H, S) in the world (P (H, S, A, S), R (H, S, A), d1);
    scratch holds 3 S floats."""
    horizon, n_states = policy.shape
    v = scratch[:n_states]
    v_new = scratch[n_states : 2 * n_states]
    terms = scratch[2 * n_states :]
    for t in range(n_states):
        v[t] = 0.0
    for h in range(horizon - 1, -1, -1):
        for s in range(n_states):
            a = policy[h, s]
            if n_states < 8:  # numpy's order below 8 terms, inline: a call per row costs 4x
                pv = 0.0
                for t in range(n_states):
                    pv += p[h, s, a, t] * v[t]
            else:
                pv = row_dot(p, h, s, a, v, terms)
            v_new[s] = r[h, s, a] + pv
        for t in range(n_states):
            v[t] = v_new[t]
    for t in range(n_states):
        terms[t] = v[t] * d1[t]
    return optimal - pairwise_sum(terms, START, n_states)
