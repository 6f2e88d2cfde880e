"""Exact values of tabular MDPs by backward induction: V*, V^pi, expected regret.

The evaluator uses these on the true world and the public policy log; nothing here is random.
Policies are deterministic int arrays `pi[..., h, s] -> a` with any leading batch dims, or
stochastic ones `probs[..., h, s, a]` (the `*_stochastic` functions).
"""

from __future__ import annotations

import weakref

import numpy as np
from privrl import accel
from privrl.worlds.tabular import TabularMDP

# optimal (Q*, V*) per MDP object; MDP arrays are read-only, so the cache can never go stale
_OPTIMAL_CACHE: weakref.WeakKeyDictionary[TabularMDP, tuple[np.ndarray, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def _expect(p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """sum_t p[..., t] v[..., t] (broadcast)."""
    return (p * v).sum(-1)


def _optimal(mdp: TabularMDP) -> tuple[np.ndarray, np.ndarray]:
    """Cached read-only (Q*, V*) of `mdp`, computed once per MDP object."""
    cached = _OPTIMAL_CACHE.get(mdp)
    if cached is not None:
        return cached
    H, S, A = mdp.H, mdp.S, mdp.A
    Q = np.empty((H, S, A))
    V = np.zeros((H + 1, S))
    for h in range(H - 1, -1, -1):
        Q[h] = mdp.R[h] + _expect(mdp.P[h], V[h + 1])
        V[h] = Q[h].max(axis=-1)
    Q.setflags(write=False)
    V.setflags(write=False)
    _OPTIMAL_CACHE[mdp] = (Q, V)
    return Q, V


def optimal_q(mdp: TabularMDP) -> tuple[np.ndarray, np.ndarray]:
    """Q* (H, S, A) and V* (H+1, S) with V*_{H+1} = 0 (fresh writable copies)."""
    Q, V = _optimal(mdp)
    return Q.copy(), V.copy()


def _check_policies(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """Validate deterministic policies (..., H, S) with actions in [0, A); return them as intp."""
    pol = np.asarray(policies)
    if not np.issubdtype(pol.dtype, np.integer):
        raise ValueError(f"policies must be an integer array of actions, got dtype {pol.dtype}")
    if pol.ndim < 2 or pol.shape[-2:] != (mdp.H, mdp.S):
        raise ValueError(
            f"policies must have shape (..., H, S) = (..., {mdp.H}, {mdp.S}), got {pol.shape}"
        )
    if pol.size and (pol.min() < 0 or pol.max() >= mdp.A):
        raise ValueError(
            f"policies contain actions outside [0, {mdp.A}): min {pol.min()}, max {pol.max()}"
        )
    return pol.astype(np.intp, copy=False)


def _values_and_returns(mdp: TabularMDP, policies: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """(V^pi (..., H+1, S), d1 · V^pi_1 (...)) of deterministic policies (..., H, S): the
    compiled backward induction, policy by policy (the same in any batch)."""
    pol = _check_policies(mdp, policies)
    batch = pol.shape[:-2]
    flat = np.ascontiguousarray(pol.reshape(-1, mdp.H, mdp.S), dtype=np.int64)
    values, returns = np.empty((flat.shape[0], mdp.H + 1, mdp.S)), np.empty(flat.shape[0])
    accel.load().policy_values(mdp.P, mdp.R, mdp.d1, flat, values, returns)
    return values.reshape(*batch, mdp.H + 1, mdp.S), returns.reshape(batch)


def policy_values(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """V^pi (..., H+1, S) of deterministic policies (..., H, S), vectorized over the batch
    dims."""
    return _values_and_returns(mdp, policies)[0]


def expected_return(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """Expected episode return d1 · V^pi_1 for each policy in the batch, shape (...) (the
    kernel DP-UCBVI's episode loop also reports each played policy's return with)."""
    return _values_and_returns(mdp, policies)[1]


def optimal_return(mdp: TabularMDP) -> float:
    """Optimal expected episode return d1 · V*_1."""
    return float(_expect(mdp.d1, _optimal(mdp)[1][0]))


def episode_regret(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """Exact expected per-episode regret d1 · (V*_1 - V^pi_1), shape (...), >= 0 up to fp."""
    return optimal_return(mdp) - expected_return(mdp, policies)


def uniform_random_return(mdp: TabularMDP) -> float:
    """Expected return of the uniformly random (stochastic) policy, a no-learning baseline."""
    V = np.zeros(mdp.S)
    for h in range(mdp.H - 1, -1, -1):
        V = (mdp.R[h] + _expect(mdp.P[h], V)).mean(axis=-1)
    return float(_expect(mdp.d1, V))


def stochastic_policy_values(mdp: TabularMDP, probs: np.ndarray) -> np.ndarray:
    """V^pi (..., H+1, S) of stochastic policies probs (..., H, S, A), vectorized."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim < 3 or p.shape[-3:] != (mdp.H, mdp.S, mdp.A):
        raise ValueError(f"probs must have shape (..., H, S, A) = (..., {mdp.H}, {mdp.S}, "
                         f"{mdp.A}), got {p.shape}")
    V = np.zeros((*p.shape[:-3], mdp.H + 1, mdp.S))
    for h in range(mdp.H - 1, -1, -1):
        q = mdp.R[h] + _expect(mdp.P[h], V[..., h + 1, None, None, :])
        V[..., h, :] = (p[..., h, :, :] * q).sum(axis=-1)
    return V


def episode_regret_stochastic(mdp: TabularMDP, probs: np.ndarray) -> np.ndarray:
    """Exact expected per-episode regret d1 · (V*_1 - V^pi_1) of stochastic policies."""
    return optimal_return(mdp) - _expect(stochastic_policy_values(mdp, probs)[..., 0, :], mdp.d1)
