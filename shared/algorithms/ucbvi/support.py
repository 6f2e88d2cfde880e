"""A world's public transition support as DP-UCBVI's knob: which (s, a, s') cells are released.

The knob (`UCBVIKnobs.support`) lists, for each pair (s, a) in the order s * A + a, the next
states the model class allows: a public fact of the world's structure (`TabularMDP.support`),
never of its secret probabilities. With it the N(s,a,s') family releases only those cells, each
noised as before: one user still moves at most one unit from one cell to another at each step
(a transition outside the support is not counted at all), so the family's sensitivity, its noise
and its privacy cost are unchanged; fewer noisy counts are released and summed into N(s,a).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

Support = tuple[tuple[int, ...], ...]
WORLD = "world"  # a study's `support` knob value: each world's own (`support_knob`)


def support_knob(world: Any) -> list[list[int]] | None:
    """The `support` knob of a tabular world: its declared support's next states per (s, a)
    (None when the world declares none, e.g. a Garnet MDP, whose successors are secret)."""
    declared = getattr(world, "support", None)
    if declared is None:
        return None
    s, a, _ = declared.shape
    return [np.flatnonzero(declared[i, j]).tolist() for i in range(s) for j in range(a)]


@dataclass(frozen=True)
class SupportCells:
    """The released cells of a `support` knob for S states and A actions."""

    knob: Support
    n_states: int
    n_actions: int

    def __post_init__(self) -> None:
        """Refuse (ValueError) a knob that is not one non-empty set of states per (s, a)."""
        s, a = self.n_states, self.n_actions
        if len(self.knob) != s * a:
            raise ValueError(f"knob support lists {len(self.knob)} pairs; the model has"
                             f" S * A = {s * a} (next states per (s, a), in order s * A + a)")
        for row in self.knob:
            if not row or any(not 0 <= t < s for t in row) or len(set(row)) != len(row):
                raise ValueError(f"knob support: each pair's next states are distinct states"
                                 f" 0..{s - 1}, at least one; got {list(row)}")

    @cached_property
    def mask(self) -> np.ndarray:
        """(S, A, S) bool: the possible cells."""
        out = np.zeros((self.n_states * self.n_actions, self.n_states), dtype=bool)
        for i, row in enumerate(self.knob):
            out[i, list(row)] = True
        out.flags.writeable = False
        return out.reshape(self.n_states, self.n_actions, self.n_states)

    @cached_property
    def flat(self) -> np.ndarray:
        """The released cells' indices into a flattened (S, A, S) array, in order."""
        return np.flatnonzero(self.mask)

    @property
    def cells(self) -> int:
        """How many (s, a, s') cells are released per step."""
        return int(self.flat.size)

    @cached_property
    def widths(self) -> np.ndarray:
        """(S, A): how many next states each pair's support holds."""
        return self.mask.sum(axis=-1)

    def pack(self, dense: np.ndarray) -> np.ndarray:
        """(..., S, A, S) -> (..., cells): the released cells only."""
        lead = dense.shape[:-3]
        return dense.reshape(*lead, -1)[..., self.flat]

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """(..., cells) -> (..., S, A, S), zero outside the support."""
        lead = packed.shape[:-1]
        out = np.zeros((*lead, self.n_states * self.n_actions * self.n_states))
        out[..., self.flat] = packed
        return out.reshape(*lead, self.n_states, self.n_actions, self.n_states)

    def outside(self, world: Any) -> bool:
        """Whether `world` moves with positive probability to a cell outside the support."""
        reach = np.asarray(world.P > 0).any(axis=0)  # (S, A, S) over the steps h
        return bool((reach & ~self.mask).any())


def as_support(rows: Sequence[Sequence[int]]) -> Support:
    """The knob's frozen form (tuples), from lists (JSON) or tuples."""
    return tuple(tuple(int(t) for t in row) for row in rows)
