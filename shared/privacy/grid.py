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
from privrl.seeding import STREAM_EPISODES, episode_rows
from privrl.worlds.rollout import Trajectories

FEATURE_GRID_BITS = 16
FEATURE_GRID = 2.0**-FEATURE_GRID_BITS  # the public grid of feature statistics
ROUNDING_CHUNK = 2**16  # rounding uniforms a replica draws at once (`EpisodeRounding`)

__all__ = ["FEATURE_GRID", "FEATURE_GRID_BITS", "EpisodeRounding", "bernoulli_rewards",
           "exact_units", "first_off_grid", "randomized_round", "released_coordinates",
           "round_by", "rounding_slack"]


def _scaled(values: np.ndarray, grid: float) -> tuple[np.ndarray, np.ndarray]:
    """(values / grid, its nearest integers), both float64."""
    scaled = np.asarray(values, dtype=np.float64) / grid
    return scaled, np.rint(scaled)


def first_off_grid(values: np.ndarray, grid: float) -> int | None:
    """The flat index of the first value that is not an integer multiple of `grid`, or None."""
    scaled, units = _scaled(values, grid)
    off = np.flatnonzero(scaled.ravel() != units.ravel())
    return int(off[0]) if off.size else None


def exact_units(values: np.ndarray, grid: float) -> np.ndarray:
    """`values` / `grid` as int64, refusing (ValueError) any value off the grid (NaN too)."""
    scaled, units = _scaled(values, grid)
    if not np.array_equal(scaled, units):
        raise ValueError(f"a value lies off the public grid of step {grid!r} (integer multiples"
                         " only)")
    return units.astype(np.int64)


def randomized_round(values: np.ndarray, grid: float, rng: np.random.Generator,
                     symmetric: bool = False) -> np.ndarray:
    """`values` / `grid` rounded down or up at random (int64), unbiased: up with probability the
    fractional part. Symmetric matrices (last two axes) are rounded on the upper triangle and
    mirrored, so they stay symmetric."""
    return round_by(values, grid, rng.random(np.shape(values)), symmetric)


def round_by(values: np.ndarray, grid: float, uniforms: np.ndarray,
             symmetric: bool = False) -> np.ndarray:
    """`randomized_round` with its uniforms given (one per entry, same shape as `values`)."""
    scaled = np.asarray(values, dtype=np.float64) / grid
    low = np.floor(scaled)
    units = low.astype(np.int64) + (uniforms < scaled - low)
    return mirror_upper(units) if symmetric else units


class EpisodeRounding:
    """Randomized rounding of one family's item per episode, every replica at once: replica r's
    item of episode k uses row k of `episode_rows(seeds[r], ("grid", family), ...)`, so it
    depends only on (seed, family, k), however the episodes are ingested or the process restarts.
    The rows are drawn ahead in chunks of episodes (up to ROUNDING_CHUNK uniforms a replica)."""

    def __init__(self, seeds: Sequence[int], family: str, shape: tuple[int, ...],
                 grid: float, symmetric: bool) -> None:
        self.seeds, self.family = [int(s) for s in seeds], family
        self.shape, self.grid, self.symmetric = tuple(shape), grid, symmetric
        self.width = math.prod(self.shape)
        self._first = 0  # the first episode of the drawn chunk
        self._rows = np.empty((len(self.seeds), 0, self.width))  # (R, chunk episodes, width)

    def units(self, values: np.ndarray, episode: int) -> np.ndarray:
        """Episode `episode`'s items (R, *shape) in grid units (int64), `values` likewise."""
        i = episode - self._first
        if not 0 <= i < self._rows.shape[1]:
            self._draw(episode)
            i = 0
        uniforms = self._rows[:, i].reshape(len(self.seeds), *self.shape)
        return round_by(values, self.grid, uniforms, self.symmetric)

    def _draw(self, episode: int) -> None:
        """Draw the rows of `episode` and the next ones, up to the end of its block's stream."""
        count = min(max(1, ROUNDING_CHUNK // max(1, self.width)),
                    STREAM_EPISODES - episode % STREAM_EPISODES)
        self._first = episode
        self._rows = np.stack([episode_rows(seed, ("grid", self.family), episode, count,
                                            self.width) for seed in self.seeds])


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
