"""Additive noise mechanisms that carry their own privacy map (OpenDP style).

Each mechanism is a frozen value object holding its noise scale. It knows how to draw its noise
from a `numpy.random.Generator` that the caller passes in (never global `np.random`), and it maps
a sensitivity to the privacy it buys:

* `Laplace(scale=b)` is pure DP: a query with l1 sensitivity `D1` released with `Lap(b)` noise
  per coordinate is `D1 / b`-DP.
* `Gaussian(sigma=s)` is zCDP: a query with l2 sensitivity `D2` released with `N(0, s^2)` noise
  per coordinate is `D2^2 / (2 s^2)`-zCDP (Bun & Steinke 2016, Lemma 2.4).

Sensitivities passed to these maps are **replace-one-user** sensitivities: the largest l1 (or l2)
distance between the query's values on two datasets that differ by replacing one user's data
with another user's data. The caller computes them (this is where the factor 2 of replacement
over add/remove lives: Qiao & Wang 2022 state their counts' sensitivity under add/remove);
these classes never rescale them.

Degenerate scales are allowed and meaningful: scale 0 means no noise (privacy loss `inf` for any
positive sensitivity, 0 for sensitivity 0); scale `inf` is what calibrating to a zero budget
gives (privacy loss 0) and cannot be sampled. With the default numpy backend, sampling always
consumes the same standard draws whatever the scale, so runs that differ only in the budget see
common random numbers.

Each mechanism also holds its noise backend (`privrl.privacy.noise`): `sample` hands the scale
to the backend, which draws discrete Laplace / Gaussian integers from a seeded numpy generator
(the default), from OpenDP's exact samplers on the OS CSPRNG, or (simulation only) continuous
floats. The backend never changes the scale or the privacy map: the discrete Laplace of scale t
is D1 / t-DP and the discrete Gaussian D2^2 / (2 sigma^2)-zCDP on integer-valued queries, the
continuous maps (Canonne, Kamath & Steinke 2020). For the integer backends the scale is in units
of the release's grid (`privrl.privacy.grid`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from privrl.privacy.noise import INTEGER_NOISE, NoiseBackend, Shape

__all__ = ["Gaussian", "Laplace", "Mechanism", "Shape"]


def check_nonneg(name: str, value: float) -> float:
    """Return `value` as a float, refusing NaN and negatives (inf is allowed)."""
    value = float(value)
    if math.isnan(value) or value < 0.0:
        raise ValueError(f"{name} must be a non-negative number (inf allowed), got {value!r}")
    return value


def _check_delta(delta: float) -> float:
    """Return `delta` as a float, refusing values outside (0, 1]."""
    delta = float(delta)
    if not 0.0 < delta <= 1.0:
        raise ValueError(f"delta must lie in (0, 1], got {delta!r}")
    return delta


def _check_count(m: int) -> int:
    """Return `m` as an int, refusing negatives and non-integers."""
    if isinstance(m, bool) or int(m) != m or m < 0:
        raise ValueError(f"m (number of summed draws) must be a non-negative integer, got {m!r}")
    return int(m)


def _check_probability(p: float) -> float:
    """Return `p` as a float, refusing values outside (0, 1)."""
    p = float(p)
    if not 0.0 < p < 1.0:
        raise ValueError(f"a tail probability must lie in (0, 1), got {p!r}")
    return p


@functools.lru_cache(maxsize=1024)
def _erfc_inverse(q: float) -> float:
    """x >= 0 with erfc(x) = q for q in (0, 1] (bisection: erfc is decreasing; no scipy).

    Cached: a server checks every LDP report against the same few public tails, and the 200
    steps cost tens of microseconds a report."""
    lo, hi = 0.0, 30.0  # erfc(30) ~ 1e-393 underflows: below any q we are asked about
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.erfc(mid) > q:
            lo = mid
        else:
            hi = mid
    return hi


def _ratio(numerator: float, denominator: float) -> float:
    """Return numerator / denominator with 0/0 = 0, x/0 = inf and anything/inf = 0."""
    if numerator == 0.0 or math.isinf(denominator):
        return 0.0
    if denominator == 0.0:
        return math.inf
    return numerator / denominator


class _Additive:
    """What Laplace and Gaussian share: iid draws of one width from the noise backend."""

    backend: NoiseBackend
    family: ClassVar[str]  # the backend's draw: "laplace" or "gaussian"
    width: ClassVar[str]  # the field holding the width: "scale" or "sigma"

    @property
    def reproducible(self) -> bool:
        """Whether the draws are a function of the generator passed in (seeded backends)."""
        return self.backend.reproducible

    @property
    def integer(self) -> bool:
        """Whether the draws are integers (discrete Laplace / Gaussian, grid units)."""
        return self.backend.integer

    def _finite_width(self) -> float:
        """The width, refused when infinite (a zero budget has nothing to draw)."""
        value = getattr(self, self.width)
        if math.isinf(value):
            raise ValueError(f"cannot sample {self.family.capitalize()} noise of infinite"
                             f" {self.width} (zero budget)")
        return value

    def sample(self, rng: np.random.Generator | None, shape: Shape) -> np.ndarray:
        """Draw iid noise of `shape` from the backend (`rng`: the seeded stream)."""
        return getattr(self.backend, self.family)(rng, self._finite_width(), shape)

    def add(self, rng: np.random.Generator | None, values: np.ndarray) -> np.ndarray:
        """`values` plus the noise, applied by the backend (OpenDP noises the values itself)."""
        return self.backend.add(self.family, rng, self._finite_width(), values)


@dataclass(frozen=True)
class Laplace(_Additive):
    """The Laplace mechanism with scale `b` per coordinate; pure DP with privacy map D1 / b."""

    scale: float
    backend: NoiseBackend = INTEGER_NOISE
    kind: ClassVar[str] = "pure"
    family: ClassVar[str] = "laplace"
    width: ClassVar[str] = "scale"

    def __post_init__(self) -> None:
        """Validate and normalise the scale to a Python float."""
        object.__setattr__(self, "scale", check_nonneg("Laplace scale", self.scale))

    def epsilon(self, l1_sensitivity: float) -> float:
        """Privacy map: the pure epsilon of releasing a query of this l1 sensitivity, D1 / b."""
        return _ratio(check_nonneg("l1_sensitivity", l1_sensitivity), self.scale)

    def std(self) -> float:
        """Standard deviation of one noise coordinate, sqrt(2) b."""
        return math.sqrt(2.0) * self.scale

    @classmethod
    def calibrate(cls, epsilon: float, l1_sensitivity: float) -> Laplace:
        """The mechanism spending exactly `epsilon` on l1 sensitivity D1: b = D1 / epsilon."""
        epsilon = check_nonneg("epsilon", epsilon)
        l1_sensitivity = check_nonneg("l1_sensitivity", l1_sensitivity)
        if math.isinf(l1_sensitivity) and math.isinf(epsilon):
            raise ValueError("cannot calibrate infinite sensitivity to an infinite budget")
        return cls(scale=_ratio(l1_sensitivity, epsilon))

    def tail_bound(self, m: int, delta: float) -> float:
        """Bound on |sum of m iid draws| holding w.p. >= 1 - delta (Chernoff)."""
        m, delta = _check_count(m), _check_delta(delta)
        if m == 0 or self.scale == 0.0:
            return 0.0
        lam = math.log(2.0 / delta)
        return self.scale * math.sqrt(8.0 * lam) * max(math.sqrt(m), math.sqrt(lam))

    def max_abs_bound(self, n: int, p: float) -> float:
        """t with P(max of n iid |Lap(b)| draws > t) <= p (union bound): b ln(n / p)."""
        n, p = _check_count(n), _check_probability(p)
        if n == 0 or self.scale == 0.0:
            return 0.0
        return self.scale * max(0.0, math.log(n / p))


@dataclass(frozen=True)
class Gaussian(_Additive):
    """The Gaussian mechanism with std `sigma` per coordinate; zCDP with map D2^2 / (2 sigma^2)."""

    sigma: float
    backend: NoiseBackend = INTEGER_NOISE
    kind: ClassVar[str] = "zcdp"
    family: ClassVar[str] = "gaussian"
    width: ClassVar[str] = "sigma"

    def __post_init__(self) -> None:
        """Validate and normalise sigma to a Python float."""
        object.__setattr__(self, "sigma", check_nonneg("Gaussian sigma", self.sigma))

    def rho(self, l2_sensitivity: float) -> float:
        """Privacy map: the zCDP rho of releasing a query of this l2 sensitivity."""
        l2_sensitivity = check_nonneg("l2_sensitivity", l2_sensitivity)
        if l2_sensitivity == 0.0 or math.isinf(self.sigma):
            return 0.0
        if self.sigma == 0.0:
            return math.inf
        return l2_sensitivity**2 / (2.0 * self.sigma**2)

    def std(self) -> float:
        """Standard deviation of one noise coordinate, sigma."""
        return self.sigma

    @classmethod
    def calibrate(cls, rho: float, l2_sensitivity: float) -> Gaussian:
        """The mechanism spending exactly `rho` on l2 sensitivity D2: sigma = D2 / sqrt(2 rho)."""
        rho = check_nonneg("rho", rho)
        l2_sensitivity = check_nonneg("l2_sensitivity", l2_sensitivity)
        if math.isinf(l2_sensitivity) and math.isinf(rho):
            raise ValueError("cannot calibrate infinite sensitivity to an infinite budget")
        return cls(sigma=_ratio(l2_sensitivity, math.sqrt(2.0 * rho)))

    def tail_bound(self, m: int, delta: float) -> float:
        """Bound on |sum of m iid draws| holding w.p. >= 1 - delta: sigma sqrt(2 m ln(2/delta))."""
        m, delta = _check_count(m), _check_delta(delta)
        if m == 0 or self.sigma == 0.0:
            return 0.0
        return self.sigma * math.sqrt(m) * math.sqrt(2.0 * math.log(2.0 / delta))

    def max_abs_bound(self, n: int, p: float) -> float:
        """t with P(max of n iid |N(0, s^2)| draws > t) <= p (union bound):
        s sqrt(2) erfc^-1(p / n)."""
        n, p = _check_count(n), _check_probability(p)
        if n == 0 or self.sigma == 0.0:
            return 0.0
        return self.sigma * math.sqrt(2.0) * _erfc_inverse(p / n)


Mechanism = Laplace | Gaussian
