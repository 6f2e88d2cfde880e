"""A continual counter's plan: which counter, how many releases, its sensitivity and variance.

One place answers, for any counter (`tree`: the papers' binary tree; `smoothed`: the tree with
Honaker's smoothing; `matrix`: the square-root factorization, optionally banded) and any release
schedule, the questions a calibration and a learner ask:

* T = schedule.releases(K) items (one per release: the sum of the episodes since the last);
* the counter's sensitivity, its largest encoder column norm (tree: sqrt(levels));
* the Gaussian that spends exactly rho over all T releases (`noise`; the matrix counter's is
  in its encoder units, 2^16 per grid unit);
* the release variance, at t and at worst, in squared grid units (what bonuses should use).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from privrl.privacy.matrix_counter import (
    ENCODER_BITS,
    MatrixCounter,
    encoder_coefficients,
    encoder_column_norm,
    matrix_release_variance,
    tree_column_norm,
)
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.noise import INTEGER_NOISE, NoiseBackend
from privrl.privacy.schedules import Schedule
from privrl.privacy.tree import NoiseSampler, TreeCounter, release_variance

COUNTERS = ("tree", "smoothed", "matrix")

__all__ = ["COUNTERS", "CounterPlan"]


@dataclass(frozen=True)
class CounterPlan:
    """A counter of `kind` over `releases` items (`bands` only for the matrix counter)."""

    kind: str
    releases: int
    bands: int | None = None

    def __post_init__(self) -> None:
        """Known kinds only; bands only where they mean something."""
        if self.kind not in COUNTERS:
            raise ValueError(f"unknown counter {self.kind!r}: use one of {', '.join(COUNTERS)}")
        if self.bands is not None and self.kind != "matrix":
            raise ValueError("only the matrix counter has bands")
        if self.releases < 1:
            raise ValueError("a counter needs at least one release")

    @classmethod
    def for_run(cls, kind: str, schedule: Schedule, episodes: int,
                bands: int | None = None) -> CounterPlan:
        """The plan of a run of K episodes: T = the schedule's releases over them."""
        return cls(kind, schedule.releases(episodes), bands)

    @property
    def unit(self) -> float:
        """Noise units per grid unit (2^16 for the matrix counter's encoder, else 1)."""
        return float(2**ENCODER_BITS) if self.kind == "matrix" else 1.0

    def column_norm(self) -> float:
        """The largest encoder column norm, in grid units: the counter's l2 sensitivity per unit
        of one item's l2 sensitivity (what the ledger charges)."""
        if self.kind == "matrix":
            return encoder_column_norm(self.releases, self.bands) / self.unit
        return tree_column_norm(self.releases)

    def noise(self, rho: float, l2_sensitivity: float,
              backend: NoiseBackend = INTEGER_NOISE) -> Gaussian:
        """The Gaussian (in the counter's noise units) whose T releases spend exactly rho when
        one user changes one item by `l2_sensitivity` grid units."""
        mech = Gaussian.calibrate(rho, l2_sensitivity * self.column_norm() * self.unit)
        return dataclasses.replace(mech, backend=backend)

    def release_variance(self, t: int) -> float:
        """Each entry's release variance after t items, in units of the noise's variance
        converted to grid units (sigma^2 / unit^2)."""
        if self.kind == "matrix":
            return matrix_release_variance(t, self.releases, self.bands) * self.unit**2
        return release_variance(t, self.kind == "smoothed")

    def max_release_factor(self, items: int | None = None) -> float:
        """max over t <= items (default: T) of `release_variance(t)`: the matrix counter's grows
        with t; a tree's peaks at t = 2^m - 1 <= items, which sums its m lowest (noisiest)
        levels."""
        items = self.releases if items is None else items
        if self.kind == "matrix":  # sum_{k<t} d_k^2
            return self.release_variance(items)
        return release_variance(2 ** ((items + 1).bit_length() - 1) - 1, self.kind == "smoothed")

    def max_release_variance(self, rho: float, l2_sensitivity: float) -> float:
        """The largest release variance over t <= T, in squared grid units, at rho (Gaussian
        sigma; the discrete Gaussian's is at most that)."""
        sigma = self.noise(rho, l2_sensitivity).sigma / self.unit
        return sigma**2 * self.max_release_factor()

    def release_weights(self) -> list[float]:
        """What release t = 1..T adds to the worst-case user's spend, in units of one node's
        cost (l2^2 / 2 sigma^2 in grid units): the squared encoder entry E_{t-1} / unit
        (a tree: 1 at each t = 2^j, when level j first releases, else 0). They sum to
        `column_norm()`^2."""
        if self.kind == "matrix":
            enc = encoder_coefficients(self.releases, self.bands).astype(float) / self.unit
            return [float(e) ** 2 for e in enc]
        return [1.0 if t & (t - 1) == 0 else 0.0 for t in range(1, self.releases + 1)]

    def build(self, shape: tuple[int, ...], noise: NoiseSampler, seeds: Sequence[int],
              family: str, integer: bool | None = None) -> TreeCounter | MatrixCounter:
        """The counter itself, over this plan's T items (`integer`: a tree's items and noise in
        grid units; default: whether `noise` draws integers)."""
        if self.kind == "matrix":
            return MatrixCounter(shape, noise, seeds, family, self.releases, self.bands)
        return TreeCounter(shape, noise, seeds, family, self.releases,
                           smooth=self.kind == "smoothed", integer=integer)

