"""Discrete Laplace and discrete Gaussian noise on the integers, vectorized over numpy draws.

Canonne, Kamath & Steinke 2020 ("The discrete Gaussian for differential privacy"):

* discrete Laplace with scale t: P(x) proportional to exp(-|x| / t), drawn as the difference of
  two geometric variables with success probability 1 - exp(-1/t) (their Lemma / Algorithm 2);
  a query with integer values and l1 sensitivity D is D / t-DP, as with the continuous one;
* discrete Gaussian with parameter sigma: P(x) proportional to exp(-x^2 / (2 sigma^2)), drawn by
  rejection from the discrete Laplace with t = floor(sigma) + 1 (their Algorithm 3); a query with
  l2 sensitivity D is D^2 / (2 sigma^2)-zCDP (their Theorem 4), as with the continuous one.

The draws are integers, so a release `value + noise` on an integer grid carries nothing about
`value` in its low bits (Mironov 2012). numpy's exponential and uniform draws are floating-point
algorithms: each probability they realise is off by a relative error of order 2^-52 and the
tails are cut beyond about 37 t, a deviation of order 1e-16 per draw, far below any delta used
here. OpenDP's samplers (`privrl.privacy.noise.OpenDPNoise`) are exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Shape = int | tuple[int, ...]

__all__ = ["discrete_gaussian", "discrete_gaussian_variance", "discrete_laplace",
           "discrete_laplace_variance"]


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


def discrete_gaussian(rng: np.random.Generator, sigma: float, shape: Shape) -> np.ndarray:
    """iid discrete Gaussian draws of parameter `sigma` (int64); all zeros when sigma = 0.

    Rejection from the discrete Laplace with t = floor(sigma) + 1 (CKS Algorithm 3), in rounds
    over the entries still missing: a candidate y is kept with probability
    exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)), about 0.6 or more, i.e. when a standard exponential
    draw exceeds (|y| - sigma^2/t)^2 / (2 sigma^2) (no exp to evaluate).
    """
    if sigma == 0.0:
        return np.zeros(shape, dtype=np.int64)
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
