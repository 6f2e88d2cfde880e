"""Least-squares value iteration with UCB bonuses over a finite world with public features.

What both private LSVI-UCB algorithms share (Jin et al. 2020, clipped at the value cap of each
step, H - h + 1, where the papers clip at H: the targets' sensitivity shrinks with it):

    Q_h(s,a) = Pi_[0,H-h+1]( <phi(s,a), w_h> + beta ||phi(s,a)||_{G_h^{-1}} ),
    V_h(s) = max_a Q_h(s,a)
    w_h      = G_h^{-1} ( sum_i phi_{i,h} (r_{i,h} + V_{h+1}(s_{i,h+1})) + noise_h )

where G_h is the released (shifted, noisy) Gram matrix. The targets are re-evaluated with the
newest V at every release; over a finite state space the sum splits into
`sum_i phi_i r_i + sum_s' (sum_{i: s'_i = s'} phi_i) V(s')`, so the trusted store keeps those two
sums (`History`) and a release costs O(H (S A d^2 + d^3 + d S)) whatever the number of stored
episodes: episode k's cost does not grow with k.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...privacy.psd import cholesky_solve, inverse_norms
from ...ties import best_action


def optimistic_scores(features: np.ndarray, w: np.ndarray, inv_chol: np.ndarray, beta: float
                      ) -> np.ndarray:
    """<phi, w> + beta ||phi||_{G^{-1}} for every replica, state and action: (R, S, A), from
    w (R, d) and the inverse Cholesky factor of G (R, d, d)."""
    n_rep = w.shape[0]
    n_s, n_a, d = features.shape
    flat = features.reshape(n_s * n_a, d)
    mean = np.einsum("nd,rd->rn", flat, w)
    bonus = inverse_norms(inv_chol, np.broadcast_to(flat, (n_rep, n_s * n_a, d)))
    return (mean + beta * bonus).reshape(n_rep, n_s, n_a)


def inverse_cholesky(grams: np.ndarray) -> np.ndarray:
    """L^{-1} for positive definite G = L L^T (batched)."""
    return np.linalg.inv(np.linalg.cholesky(grams))


def greedy_actions(features: np.ndarray, grams: np.ndarray, w: np.ndarray, beta: float,
                   priority: np.ndarray | None = None) -> np.ndarray:
    """The greedy table (R, H, S) of the released (G_h, w_h): the argmax of the unclipped score
    (it attains the clipped Q's maximum); ties to the lowest action index (Luyo erratum 17) or
    to the highest `priority` (R, H, S, A)."""
    inv = inverse_cholesky(grams)  # (R, H, d, d)
    horizon = w.shape[1]
    table = [best_action(optimistic_scores(features, w[:, h], inv[:, h], beta),
                         None if priority is None else priority[:, h])
             for h in range(horizon)]
    return np.stack(table, axis=1).astype(np.int64)


class History:
    """The trusted store of raw history, as the two sums LSVI re-reads (never released):
    sum phi_{i,h} r_{i,h} (R, H, d) and sum phi_{i,h} 1[s'_{i,h} = s'] (R, H, d, S)."""

    def __init__(self, replicas: int, horizon: int, d: int, n_states: int) -> None:
        self.phi_reward = np.zeros((replicas, horizon, d))
        self.phi_next = np.zeros((replicas, horizon, d, n_states))
        self.n_states = n_states

    def add(self, phi: np.ndarray, reward: np.ndarray, next_state: np.ndarray) -> None:
        """One episode per replica: phi (R, H, d), reward (R, H), next_state (R, H) ints."""
        self.phi_reward += phi * reward[..., None]
        onehot = np.eye(self.n_states)[next_state]  # (R, H, S)
        self.phi_next += np.einsum("rhd,rhs->rhds", phi, onehot)

    def targets(self, h: int, v_next: np.ndarray) -> np.ndarray:
        """sum_i phi_{i,h} (r_{i,h} + V_{h+1}(s'_{i,h})) for value tables v_next (R, S)."""
        return self.phi_reward[:, h] + np.einsum("rds,rs->rd", self.phi_next[:, h], v_next)


def backward_pass(features: np.ndarray, history: History, grams: np.ndarray, beta: float,
                  release: Callable[[int, np.ndarray], np.ndarray] | None = None
                  ) -> np.ndarray:
    """w (R, H, d) by LSVI from h = H down to 1 against the released Grams (R, H, d, d), each
    step's targets (R, d) passed through `release(h, targets)` (the central privatizer's noisy
    release of them) when given; V_h is clipped to [0, H - h + 1] (1-based h), which bounds the
    targets' sensitivity (`constants.target_sensitivity2`)."""
    n_rep, horizon, d = grams.shape[0], grams.shape[1], features.shape[-1]
    v_next = np.zeros((n_rep, features.shape[0]))
    w = np.zeros((n_rep, horizon, d))
    for h in range(horizon - 1, -1, -1):
        target = history.targets(h, v_next)
        if release is not None:
            target = release(h, target)
        w[:, h], inv = cholesky_solve(grams[:, h], target)
        scores = optimistic_scores(features, w[:, h], inv, beta)
        v_next = np.clip(scores.max(axis=-1), 0.0, float(horizon - h))  # V_h <= H - h + 1
    return w
