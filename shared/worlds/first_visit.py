"""First-visit discounted returns (Balle et al. 2016): what a policy-evaluation user
computes from its own trajectory.

For a trajectory x = ((s_1, r_1), ..., (s_T, r_T)) and a state s it visits first at step i,
F_{x,s} = sum_{t >= i} gamma^(t - i) r_t (the first-visit step's reward included); unvisited
states have F = 0. `FirstVisits` holds one row per user: which states were visited and their
returns. It is the "trajectory" of the policy-evaluation algorithms: the in-process runner, the
users and the server's report check all pass this one type to `Algorithm.user_statistics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FirstVisits:
    """First-visit returns of R users: `visited` (R, N) bool, `returns` (R, N), 0 if unvisited."""

    visited: np.ndarray
    returns: np.ndarray

    def __post_init__(self) -> None:
        """Check shapes and that unvisited states carry no return."""
        if self.visited.shape != self.returns.shape or self.visited.ndim != 2:
            raise ValueError(
                f"visited {self.visited.shape} and returns {self.returns.shape} must both be"
                " (R, N)"
            )
        if np.any(self.returns[~self.visited] != 0):
            raise ValueError("an unvisited state must have first-visit return 0")

    @property
    def n_states(self) -> int:
        """N, the number of states."""
        return int(self.visited.shape[1])

    def pairs(self, row: int = 0) -> list[tuple[int, float]]:
        """User `row`'s sparse report: [(s, F_{x,s})] for the visited states, in state order."""
        states = np.flatnonzero(self.visited[row])
        return [(int(s), float(self.returns[row, s])) for s in states]

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[int, float]], n_states: int) -> FirstVisits:
        """One user's row from sparse (state, return) pairs (states distinct, in [0, N))."""
        visited = np.zeros((1, n_states), dtype=bool)
        returns = np.zeros((1, n_states))
        for s, f in pairs:
            if visited[0, s]:
                raise ValueError(f"state {s} is listed twice")
            visited[0, s] = True
            returns[0, s] = f
        return cls(visited, returns)

    @classmethod
    def stack(cls, rows: Sequence[FirstVisits]) -> FirstVisits:
        """Several users' rows as one batch."""
        return cls(
            np.concatenate([r.visited for r in rows]), np.concatenate([r.returns for r in rows])
        )
