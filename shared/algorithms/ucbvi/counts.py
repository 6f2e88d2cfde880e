"""DP-UCBVI's statistics: what one trajectory contributes as per-episode count increments.

Families (arrays per replica, leading axis R; Hs = 1 when pooled over h, else H):
  "sas": 1[(s_h, a_h, s_{h+1}) = (s, a, s')]   shape (Hs, S, A, S)
  "sa":  1[(s_h, a_h) = (s, a)]                  shape (Hs, S, A)
  "r":   1[(s_h, a_h) = (s, a)] * r_h            shape (Hs, S, A)
"""

from __future__ import annotations

import numpy as np
from privrl.stats import Stats
from privrl.worlds.rollout import Trajectories

FAMILIES = ("sas", "sa", "r")


def family_shapes(
    n_states: int, n_actions: int, horizon: int, pooled: bool
) -> dict[str, tuple[int, ...]]:
    """Shape of each statistic family for one replica."""
    hs = 1 if pooled else horizon
    return {
        "sas": (hs, n_states, n_actions, n_states),
        "sa": (hs, n_states, n_actions),
        "r": (hs, n_states, n_actions),
    }


def tabular_counts(
    traj: Trajectories, n_states: int, n_actions: int, pooled: bool = False
) -> Stats:
    """Dense one-hot increments of every family for each trajectory (R rows)."""
    n_rep, horizon = traj.actions.shape
    shapes = family_shapes(n_states, n_actions, horizon, pooled)
    rows = np.repeat(np.arange(n_rep), horizon)
    steps = (
        np.zeros(n_rep * horizon, dtype=np.int64) if pooled else np.tile(np.arange(horizon), n_rep)
    )
    s = traj.states[:, :-1].ravel()
    a = traj.actions.ravel()
    s_next = traj.states[:, 1:].ravel()
    out = {name: np.zeros((n_rep, *shape)) for name, shape in shapes.items()}
    np.add.at(out["sas"], (rows, steps, s, a, s_next), 1.0)
    np.add.at(out["sa"], (rows, steps, s, a), 1.0)
    np.add.at(out["r"], (rows, steps, s, a), traj.rewards.ravel())
    return out
