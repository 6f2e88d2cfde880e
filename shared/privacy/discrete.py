"""Discrete Laplace and discrete Gaussian noise on the integers, vectorized over numpy draws.

Canonne, Kamath & Steinke 2020 ("The discrete Gaussian for differential privacy"):

* discrete Laplace with scale t: P(x) proportional to exp(-|x| / t), drawn as the difference of
  two geometric variables with success probability 1 - exp(-1/t) (their Lemma / Algorithm 2);
  a query with integer values and l1 sensitivity D is D / t-DP, as with the continuous one;
* discrete Gaussian with parameter sigma: P(x) proportional to exp(-x^2 / (2 sigma^2)); a query
  with l2 sensitivity D is D^2 / (2 sigma^2)-zCDP (their Theorem 4), as with the continuous one.
  For sigma <= TABLE_CAP it is drawn by inverse CDF from a table with integer thresholds; above,
  by rejection from the discrete Laplace with t = floor(sigma) + 1 (their Algorithm 3).

The draws are integers, so a release `value + noise` on an integer grid carries nothing about
`value` in its low bits (Mironov 2012). Neither path is exact; each draw is within a total
variation of order 1e-15 of its law, and n draws add at most n times that to delta (far below any
delta used here). OpenDP's samplers (`privrl.privacy.noise.OpenDPNoise`) are exact.

* Rejection (discrete Laplace, and the Gaussian above the cap): numpy's exponential and uniform
  draws are floating-point algorithms, so each probability they realise is off by a relative
  error of order 2^-52 and the tails are cut: numpy's ziggurat exponential is at most
  r - log(2^-53) = 7.697 + 36.737 = 44.434 (its tail draw r - log(1 - U), U <= 1 - 2^-53), so
  a magnitude floor(t E) never exceeds floor(44.434 t); what is cut has probability
  exp(-44.434) = 5e-20 per draw.
* Table (`gaussian_table`): the support is |x| <= M, M the smallest integer with
  P(|X| > M) < 2^-64 (M = 9.15 sigma at the cap). The weights exp(-a), a = x^2 / 2 sigma^2, are
  float64, each off by a relative (2a + 4) 2^-53 at most (two roundings in a, exp within 2
  ulps); they are normalised in integer arithmetic and rounded to the nearest integers q_x, the
  remainder to x = 0 so that they sum to exactly 2^64 (the outermost atoms round to 0 and are
  dropped: a smaller table, the same law); one uniform 64-bit integer u is mapped to the x
  whose cumulative interval holds u, so P(x) is exactly q_x / 2^64. The total variation to the
  exact law is at most the cut tail (< 2^-64), plus the float weights' L1 error
  (<= 2 (2 E[a] + 4) 2^-53 <= 10 * 2^-53, as E[a] <= 1/2), plus half the rounding's L1 error
  (<= 2M 2^-64 with the remainder): below 2^-49 + (M + 1) 2^-64, i.e. 2e-15 for sigma <= 100
  and 4e-15 at the cap, the same order as the rejection path's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

Shape = int | tuple[int, ...]

__all__ = ["TABLE_CAP", "GaussianTable", "discrete_gaussian", "discrete_gaussian_variance",
           "discrete_laplace", "discrete_laplace_variance", "gaussian_table",
           "rejection_gaussian"]

TABLE_CAP = 2.0**12
"""The largest sigma drawn from a table: M = 37,500 there (69,335 atoms kept), thresholds of
0.55 MB and a guide of 2.1 MB built in 50-90 ms (16 tables cached), each draw still about twice
as fast as rejection (scripts/discrete_sampler_cost.py); above, rejection, whose cost does not
grow with sigma."""

_TOTAL = 1 << 64
_TAIL = 2.0**-64


def _size(shape: Shape) -> int:
    """The number of entries of `shape`."""
    return int(shape) if isinstance(shape, (int, np.integer)) else int(math.prod(shape))


def _laplace_candidates(rng: np.random.Generator, scale: float, count: int) -> np.ndarray:
    """About `count` discrete Laplace draws of scale t (int64): a geometric magnitude and a fair
    sign, "-0" rejected (CKS Algorithm 2), so slightly fewer than `count` come back. The
    magnitude floor(t E), E ~ Exp(1), is geometric: P(floor(t E) >= k) = exp(-k / t)."""
    magnitude = np.floor(scale * rng.standard_exponential(count)).astype(np.int64)
    negative = rng.integers(0, 2, count, dtype=np.uint8).view(np.bool_)
    keep = ~(negative & (magnitude == 0))
    return np.where(negative, -magnitude, magnitude)[keep]


def _fill(n: int, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """n values from rounds of `draw(batch)`, each returning some accepted values, in order."""
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        want = n - filled
        kept = draw(want + want // 2 + 8)[:want]
        out[filled:filled + kept.size] = kept
        filled += kept.size
    return out


def discrete_laplace(rng: np.random.Generator, scale: float, shape: Shape) -> np.ndarray:
    """iid discrete Laplace draws of scale t = `scale` (int64); all zeros when t = 0."""
    if scale == 0.0:
        return np.zeros(shape, dtype=np.int64)
    return _fill(_size(shape), lambda m: _laplace_candidates(rng, scale, m)).reshape(shape)


class GaussianTable(NamedTuple):
    """The inverse-CDF table of one discrete Gaussian on |x| <= r = `radius` (M less the
    outermost atoms, which round to 0): `thresholds` (uint64, 2r entries) are the cumulative
    integer masses q_{-r} + ... + q_x for x < r, the last one (2^64) implicit; `guide[b]`
    (int32) is the index of the atom holding b 2^(64 - bits) for b < 2^bits, and 2r for
    b = 2^bits, so a u in bucket u >> (64 - bits) = b is in atom guide[b] if guide[b + 1] is."""

    radius: int
    thresholds: np.ndarray
    bits: int
    guide: np.ndarray

    def masses(self) -> list[int]:
        """q_x for x = -radius..radius as Python integers; they sum to exactly 2^64."""
        cum = [0, *(int(c) for c in self.thresholds), _TOTAL]
        return [b - a for a, b in zip(cum, cum[1:], strict=False)]

    def locate(self, u: np.ndarray) -> np.ndarray:
        """The x (int64) whose interval [q_{-r} + ... + q_{x-1}, ... + q_x) holds each uint64 u:
        the guide's atom, or a binary search where u's bucket holds a threshold; the same as
        `searchsorted(thresholds, u, side="right") - radius`."""
        bucket = (u >> np.uint64(64 - self.bits)).astype(np.intp)
        lo = self.guide[bucket]
        index = lo.astype(np.int64)
        split = np.flatnonzero(lo != self.guide[bucket + 1])
        index[split] = np.searchsorted(self.thresholds, u[split], side="right")
        return index - self.radius

    def draw(self, rng: np.random.Generator, shape: Shape) -> np.ndarray:
        """iid draws (int64): x with probability exactly q_x / 2^64, one uniform 64-bit integer
        each."""
        u = rng.integers(0, _TOTAL - 1, _size(shape), dtype=np.uint64, endpoint=True)
        return self.locate(u).reshape(shape)


@functools.lru_cache(maxsize=16)
def gaussian_table(sigma: float) -> GaussianTable:
    """The table of the discrete Gaussian of parameter 0 < sigma <= TABLE_CAP (cached)."""
    if not 0.0 < sigma <= TABLE_CAP:
        raise ValueError(f"a table needs 0 < sigma <= {TABLE_CAP}")
    wide = int(11.0 * sigma) + 12  # the mass beyond is below 1e-26 of the total
    x = np.arange(wide + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2.0 * sigma * sigma))
    half = math.fsum(w[1:])
    total = w[0] + 2.0 * half
    beyond = 2.0 * np.cumsum(w[::-1])[::-1] / total  # beyond[m] = P(|X| >= m)
    radius = int(np.argmax(beyond < _TAIL)) - 1  # beyond[radius + 1] = P(|X| > radius)
    exact = [int(v) for v in (w[:radius + 1] * 2.0**200).tolist()]  # each float, exactly
    z = exact[0] + 2 * sum(exact[1:])
    side = [(v * _TOTAL * 2 + z) // (2 * z) for v in exact[1:]]  # nearest to 2^64 w_x / z
    drop = next((i for i, v in enumerate(reversed(side)) if v), len(side))  # 0s: never drawn
    side, radius = side[:len(side) - drop], radius - drop
    q = [*side[::-1], _TOTAL - 2 * sum(side), *side]
    if not 0 < q[radius] <= _TOTAL:
        raise ArithmeticError("the table's remainder does not fit the central atom")
    cum = np.cumsum(np.array(q[:-1], dtype=np.uint64))  # < 2^64: no overflow
    bits = (2 * radius).bit_length() + 2  # about four buckets per atom
    starts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(64 - bits)
    guide = np.append(np.searchsorted(cum, starts, side="right"), 2 * radius).astype(np.int32)
    cum.flags.writeable = guide.flags.writeable = False
    return GaussianTable(radius, cum, bits, guide)


def discrete_gaussian(rng: np.random.Generator, sigma: float, shape: Shape) -> np.ndarray:
    """iid discrete Gaussian draws of parameter `sigma` (int64); all zeros when sigma = 0.

    For sigma <= TABLE_CAP, inverse CDF from `gaussian_table(sigma)`; above, `rejection_gaussian`.
    """
    if sigma == 0.0:
        return np.zeros(shape, dtype=np.int64)
    if sigma <= TABLE_CAP:
        return gaussian_table(float(sigma)).draw(rng, shape)
    return rejection_gaussian(rng, sigma, shape)


def rejection_gaussian(rng: np.random.Generator, sigma: float, shape: Shape) -> np.ndarray:
    """iid discrete Gaussian draws of parameter sigma > 0 (int64) by rejection from the discrete
    Laplace with t = floor(sigma) + 1 (CKS Algorithm 3), in rounds over the entries still
    missing: a candidate y is kept with probability exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)),
    about 0.6 or more, i.e. when a standard exponential draw exceeds
    (|y| - sigma^2/t)^2 / (2 sigma^2) (no exp to evaluate). `discrete_gaussian` uses it above
    TABLE_CAP, where its cost does not grow with sigma."""
    t = math.floor(sigma) + 1.0
    tau, two_var = sigma * sigma / t, 2.0 * sigma * sigma

    def accepted(m: int) -> np.ndarray:
        y = _laplace_candidates(rng, t, m)
        return y[rng.standard_exponential(y.size) * two_var > np.square(np.abs(y) - tau)]

    return _fill(_size(shape), accepted).reshape(shape)


def discrete_laplace_variance(scale: float) -> float:
    """Variance of one discrete Laplace draw of scale t: 2 e^{-1/t} / (1 - e^{-1/t})^2 (< 2t^2)."""
    if scale == 0.0:
        return 0.0
    q = math.exp(-1.0 / scale)
    return 2.0 * q / (1.0 - q) ** 2


def discrete_gaussian_variance(sigma: float) -> float:
    """Variance of one discrete Gaussian draw (at most sigma^2, CKS Corollary 9): summed over
    |x| <= 12 sigma + 12 for sigma <= 8; above, it equals sigma^2 to a relative 1e-100."""
    if sigma == 0.0:
        return 0.0
    if sigma > 8.0:
        return sigma * sigma
    top = int(12 * sigma) + 12
    x = np.arange(-top, top + 1, dtype=np.float64)
    w = np.exp(-x * x / (2.0 * sigma * sigma))
    return float((w * x * x).sum() / w.sum())
