"""The smallest ε that learns, with a confidence interval over seeds (`privrl frontier`).

A case (algorithm, mode, preset) run at grid values ε₁ < … < ε_m, n seeds each, gives per seed
the *final fraction* f: the mean regret of the last 10% of episodes as a percentage of the
uniformly random policy's per-episode regret (0% optimal, 100% random). Per ε:

* the mean f̄ and a two-sided 95% Student t interval f̄ ± t₀.₉₇₅,ₙ₋₁ · s/√n over the seeds;
* the case *learns at ε* when f̄ ≤ 25% (`LEARNS_BELOW`).

The smallest ε that learns, ε*, is the smallest grid ε from which on the case learns at every
larger grid ε (so one lucky dip below a failing ε does not count). Its interval [ε_lo, ε_hi]
applies the same rule to the ends of the per-ε intervals: ε_lo from where the interval's lower
end is ≤ 25% (learning is not excluded), ε_hi from where its upper end is ≤ 25% (learning is
established). So ε_lo ≤ ε* ≤ ε_hi; None means "not on this grid" (beyond its largest ε).

A threshold is *decided* only at ε_hi: from there on every grid ε's interval lies at or below
25%. A case that learns at its grid's smallest ε sits *on the floor*: its threshold may lie
lower, and the study extends the grid below it (`privrl.studies.frontier`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..verdict import T975, t_quantile  # noqa: F401  (the studies' t table is the verdict's)

LEARNS_BELOW = 25.0  # percent of the uniform policy's regret
TAIL_FRACTION = 0.1  # the final fraction is measured on the last 10% of episodes
CONFIDENCE = 0.95
def tail_episodes(episodes: int) -> int:
    """How many final episodes the fraction averages: 10% of K, at least one."""
    return max(1, round(TAIL_FRACTION * episodes))


def final_fractions(regret: np.ndarray, random_regret: float) -> list[float]:
    """Per seed (rows of `regret`, (R, K)): the last 10%'s mean regret, % of the random policy's."""
    tail = tail_episodes(regret.shape[1])
    return [float(100.0 * x / random_regret) for x in regret[:, -tail:].mean(axis=1)]


@dataclass(frozen=True)
class Interval:
    """The mean of the seeds' fractions and its 95% t interval (the mean itself for one seed)."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Interval:
        """Mean ± t · s/√n of `values`."""
        x = np.asarray(values, dtype=np.float64)
        if x.size == 0:
            raise ValueError("no seeds")
        mean = float(x.mean())
        if x.size == 1:
            return cls(mean, mean, mean, 1)
        half = t_quantile(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
        return cls(mean, mean - half, mean + half, int(x.size))


@dataclass(frozen=True)
class Threshold:
    """The smallest grid ε that learns and its interval; None: not on the grid."""

    epsilon: float | None
    low: float | None
    high: float | None
    grid: tuple[float, ...]  # the ε that have results, ascending

    @property
    def decided(self) -> float | None:
        """The decided threshold: ε_hi, where learning is established (None: not on the grid)."""
        return self.high

    @property
    def on_floor(self) -> bool:
        """Whether the case learns (by its mean) at the grid's smallest ε already."""
        return bool(self.grid) and self.epsilon == self.grid[0]

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"epsilon": self.epsilon, "low": self.low, "high": self.high,
                "decided": self.decided, "on_floor": self.on_floor, "grid": list(self.grid)}


def _from_where(grid: Sequence[float], learns: Callable[[int], bool]) -> float | None:
    """The smallest grid[j] with learns(i) for every i ≥ j (None if not even the last)."""
    found = None
    for j in range(len(grid) - 1, -1, -1):
        if not learns(j):
            break
        found = grid[j]
    return found


def smallest_learning_epsilon(fractions: Mapping[float, Sequence[float]],
                              below: float = LEARNS_BELOW) -> Threshold:
    """ε*, ε_lo and ε_hi (module docstring) of the seeds' final fractions (%) at each ε."""
    grid = tuple(sorted(float(e) for e in fractions if len(fractions[e])))
    ci = [Interval.of(fractions[e]) for e in grid]
    return Threshold(
        epsilon=_from_where(grid, lambda i: ci[i].mean <= below),
        low=_from_where(grid, lambda i: ci[i].low <= below),
        high=_from_where(grid, lambda i: ci[i].high <= below),
        grid=grid,
    )
