"""Skellam noise shares (Agarwal, Kairouz & Liu, NeurIPS 2021, "The Skellam mechanism for
differentially private federated learning").

Sk(v) = Poisson(v / 2) - Poisson(v / 2) has variance v, and a sum of independent Skellams is
Skellam: n_min honest shares Sk(v / n_min) sum to exactly Sk(v) (more shares: Sk(> v), whose
extra noise is post-processing). A cohort sum therefore costs one Skellam mechanism of variance
v, whatever n_min is: no per-share correction, no term growing with the released coordinates.

Their multi-dimensional bound (stated for Sk(mu, mu) = Poisson(mu) - Poisson(mu), variance
2 mu, and for integer orders alpha > 1 only; written here with v = 2 mu), for integer shifts of
l1 norm D1 and l2 norm D2:

    D_alpha <= alpha D2^2 / (2 v) + min( ((2 alpha - 1) D2^2 + 6 D1) / (4 v^2),  3 D1 / (2 v) ).

It is not claimed at fractional orders, so it does not make the mechanism zCDP (which needs
every real alpha > 1): the run charges its Renyi curve at the integer orders `ORDERS` and
converts it to (epsilon, delta) at the run's delta over those orders
(`privrl.privacy.accountant.rdp_to_epsilon`), the way the paper's own accounting does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from privrl.privacy.accountant import rdp_to_epsilon
from privrl.privacy.noise import noise_backend

Shape = int | tuple[int, ...]


# the Renyi orders a Skellam release is charged at: the integers the paper's bound holds for
# (2 .. 256, then powers of 2 to 2^20: the best order for (epsilon, delta) is near
# 1 + sqrt(ln(1 / delta) / rho), 2^20 covers rho down to about 2e-11 at delta = 1e-10)
ORDERS = tuple(range(2, 257)) + tuple(2**k for k in range(9, 21))
_ORDERS_ARRAY = np.asarray(ORDERS, dtype=float)  # `rdp_curve`'s default, converted once


def rdp(alpha: int, l1: float, l2: float, variance: float) -> float:
    """The paper's bound on the Renyi divergence of integer order `alpha` >= 2 between
    Sk(variance)^d and its shift by an integer vector of l1 norm `l1` and l2 norm `l2` (grid
    units); fractional orders are refused (the paper does not prove them)."""
    return float(rdp_curve(l1, l2, variance, (alpha,))[0])


def rdp_curve(l1: float, l2: float, variance: float,
              orders: Sequence[int] = ORDERS) -> np.ndarray:
    """`rdp` at each of `orders` (integers >= 2): what one Skellam release of sensitivities
    `l1`, `l2` (grid units) at `variance` spends, order by order."""
    a = _ORDERS_ARRAY if orders is ORDERS else np.asarray(orders, dtype=float)
    if orders is not ORDERS and (np.any(a < 2.0) or np.any(a != np.floor(a))):
        raise ValueError("the Skellam Renyi bound holds at integer orders >= 2 only")
    if variance <= 0.0:
        raise ValueError("a Skellam mechanism needs a positive variance")
    v = variance
    return a * l2**2 / (2.0 * v) + np.minimum(((2.0 * a - 1.0) * l2**2 + 6.0 * l1) / (4.0 * v**2),
                                              3.0 * l1 / (2.0 * v))


def epsilon(curve: np.ndarray, delta: float) -> float:
    """The epsilon at `delta` of a Renyi curve over `ORDERS` (the sum of a user's releases'
    `rdp_curve`s): the best order's conversion."""
    return rdp_to_epsilon(ORDERS, curve, delta)


def tail(variance: float, draws: int, probability: float) -> float:
    """An x with P(max of `draws` |Sk(variance)| draws > x) <= `probability` (Chernoff: the
    Skellam's moment generating function is exp(variance (cosh t - 1)))."""
    target = math.log(2.0 * draws / probability)

    def rate(x: float) -> float:  # sup_t t x - v (cosh t - 1)
        return x * math.asinh(x / variance) - math.hypot(x, variance) + variance

    low, high = 0.0, 1.0
    while rate(high) < target:
        low, high = high, 2.0 * high
    for _ in range(100):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if rate(mid) < target else (low, mid)
    return high


# the largest Poisson mean drawn (numpy refuses about 9.2e18, and its sampler's variance is off by
# 3% at 1e15 and 40% at 1e16): a share beyond twice this is refused at calibration (`boundary.py`)
POISSON_LAM_MAX = 1e13


@dataclass(frozen=True)
class Skellam:
    """A noise sampler (`privrl.privacy.noise.RowSampler`) of Sk(`variance`) integers, drawn
    from the generator it is given (a user's own noise stream)."""

    variance: float
    backend = noise_backend("numpy")  # integer draws, reproducible from the generator
    reproducible = True

    def sample(self, rng: np.random.Generator | None, shape: Shape) -> np.ndarray:
        """Poisson(variance / 2) - Poisson(variance / 2) of `shape` (int64)."""
        if rng is None:
            raise ValueError("Skellam shares are drawn from the user's own seeded generator")
        lam = self.variance / 2.0
        return rng.poisson(lam, shape).astype(np.int64) - rng.poisson(lam, shape).astype(np.int64)

    def add(self, rng: np.random.Generator | None, values: np.ndarray) -> np.ndarray:
        """`values` plus noise of their shape."""
        return values + self.sample(rng, values.shape)

    def std(self) -> float:
        """Standard deviation of one draw (grid units)."""
        return math.sqrt(self.variance)
