"""Public integer grids for released statistics (docs/explanation/architecture.md, contract 7).

With an integer noise backend every released family lives on a public grid of step g (1 for
counts; 2^-b for feature statistics): a release is (integer + integer noise) * g, so its low bits
say nothing about the clean value (Mironov 2012).

* Counts, and rewards once users report Bernoulli(r) instead of r (unbiased: E = r), are
  integers already; `exact_units` checks and converts them.
* Other statistics (Gram matrices, targets, returns) are randomized-rounded to the grid
  (`randomized_round`: floor or ceiling, unbiased), each entry moving by less than g. Replacing
  one user then moves the rounded statistic by at most the clean sensitivity plus
  `rounding_slack`: 2 n g in l1 and 2 sqrt(n) g in l2 over the n released coordinates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from privrl.privacy.psd import mirror_upper
from privrl.worlds.rollout import Trajectories

FEATURE_GRID_BITS = 16
FEATURE_GRID = 2.0**-FEATURE_GRID_BITS  # the public grid of feature statistics

__all__ = ["FEATURE_GRID", "FEATURE_GRID_BITS", "bernoulli_rewards", "exact_units",
           "first_off_grid", "randomized_round", "released_coordinates", "rounding_slack"]


def first_off_grid(values: np.ndarray, grid: float) -> int | None:
    """The flat index of the first value that is not an integer multiple of `grid`, or None."""
    scaled = np.asarray(values, dtype=np.float64).ravel() / grid
    off = np.flatnonzero(scaled != np.rint(scaled))
    return int(off[0]) if off.size else None


def exact_units(values: np.ndarray, grid: float) -> np.ndarray:
    """`values` / `grid` as int64, refusing (ValueError) any value off the grid."""
    if first_off_grid(values, grid) is not None:
        raise ValueError(f"a value lies off the public grid of step {grid!r} (integer multiples"
                         " only)")
    return np.rint(np.asarray(values, dtype=np.float64) / grid).astype(np.int64)


def randomized_round(values: np.ndarray, grid: float, rng: np.random.Generator,
                     symmetric: bool = False) -> np.ndarray:
    """`values` / `grid` rounded down or up at random (int64), unbiased: up with probability the
    fractional part. Symmetric matrices (last two axes) are rounded on the upper triangle and
    mirrored, so they stay symmetric."""
    scaled = np.asarray(values, dtype=np.float64) / grid
    low = np.floor(scaled)
    units = low.astype(np.int64) + (rng.random(scaled.shape) < scaled - low)
    return mirror_upper(units) if symmetric else units


def released_coordinates(shape: tuple[int, ...], symmetric: bool) -> int:
    """How many coordinates a family releases: the upper triangles of symmetric matrices."""
    if not symmetric:
        return math.prod(shape)
    d = shape[-1]
    return math.prod(shape[:-2]) * d * (d + 1) // 2


def rounding_slack(shape: tuple[int, ...], grid: float, symmetric: bool) -> tuple[float, float]:
    """(l1, l2) that randomized rounding can add to a replace-one sensitivity: each of the two
    users' n released coordinates moves by less than `grid`."""
    n = released_coordinates(shape, symmetric)
    return 2.0 * n * grid, 2.0 * math.sqrt(n) * grid


def bernoulli_rewards(trajectories: Trajectories, rngs: Sequence[np.random.Generator]
                      ) -> Trajectories:
    """Each realised reward r in [0, 1] replaced by Bernoulli(r), user r drawing from `rngs[r]`
    (H uniforms): unbiased, and on the integer grid."""
    rewards = trajectories.rewards
    uniforms = np.stack([rng.random(rewards.shape[1]) for rng in rngs])
    return dataclasses.replace(trajectories, rewards=(uniforms < rewards).astype(np.float64))
