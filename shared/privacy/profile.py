"""The exact privacy profile of the (continuous) Gaussian mechanism: mu-GDP -> (epsilon, delta).

Adding N(0, sigma^2 I) to a query of l2 sensitivity D is mu-GDP with mu = D / sigma, and mu_i-GDP
mechanisms compose (adaptively) to sqrt(sum mu_i^2)-GDP (Dong, Roth & Su 2022, Cor. 3.3), so a
run whose zCDP charges are all continuous Gaussian releases with total rho is exactly
sqrt(2 rho)-GDP. Its (epsilon, delta) curve (Balle & Wang 2018, Thm. 8) is

    delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2),

never above the zCDP conversion of the same rho. It does NOT hold for the discrete Gaussian:
its own curve (Canonne, Kamath & Steinke 2020, Thm. 7) exceeds this one (e.g. by 1.3e-4 at
epsilon = 0 for sigma = 5, D = 1), so integer noise keeps the zCDP conversion.

Numerics without scipy: with a = -epsilon/mu + mu/2 < 0 the curve is written through the Mills
ratio R(t) = Phi(-t) / phi(t) as phi(a) (R(-a) - R(-b)), b = a - mu, which has no e^epsilon
amplification of rounding (for a >= 0, Phi(a) - phi(a) R(-b)); R comes from erfc below t = 25
and from Laplace's continued fraction above.
"""

from __future__ import annotations

import math

__all__ = ["gaussian_delta", "gaussian_epsilon", "gaussian_log_delta", "mills_ratio"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
# gaussian_epsilon asks for delta(epsilon) <= delta (1 - 1e-9): far more than the ~1e-11 relative
# error of gaussian_log_delta (checked against 60-digit mpmath in the tests)
_LOG_MARGIN = 1e-9


def mills_ratio(t: float) -> float:
    """R(t) = Phi(-t) / phi(t) for t >= 0 (relative error ~1e-15)."""
    if t < 25.0:
        return 0.5 * math.erfc(t / math.sqrt(2.0)) * math.exp(0.5 * t * t + _LOG_SQRT_2PI)
    f = t
    for k in range(60, 0, -1):  # R(t) = 1 / (t + 1 / (t + 2 / (t + 3 / (t + ...))))
        f = t + k / f
    return 1.0 / f


def gaussian_log_delta(mu: float, epsilon: float) -> float:
    """ln delta(epsilon) of the mu-GDP profile (-inf where delta is 0)."""
    if mu <= 0.0:
        return -math.inf
    a = -epsilon / mu + 0.5 * mu
    b = a - mu
    # e^epsilon phi(b) = phi(a), so e^epsilon Phi(b) = phi(a) R(-b) (b < 0 as epsilon >= 0)
    if a >= 0.0:  # Phi(a) >= 1/2: the direct difference loses nothing that matters
        delta = 0.5 * math.erfc(-a / math.sqrt(2.0)) - math.exp(
            -0.5 * a * a - _LOG_SQRT_2PI) * mills_ratio(-b)
        return math.log(delta) if delta > 0.0 else -math.inf
    gap = mills_ratio(-a) - mills_ratio(-b)
    if gap <= 0.0:
        return -math.inf
    return -0.5 * a * a - _LOG_SQRT_2PI + math.log(gap)


def gaussian_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of the mu-GDP profile: the exact delta of the Gaussian mechanism."""
    return math.exp(gaussian_log_delta(mu, epsilon))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon >= 0 with delta(epsilon) <= `delta` on the mu-GDP profile (bisection
    to ~1e-13 relative, returning the upper end and keeping a margin against rounding)."""
    if mu <= 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    log_delta = math.log(delta) - _LOG_MARGIN
    if gaussian_log_delta(mu, 0.0) <= log_delta:
        return 0.0
    # the classical zCDP bound rho + 2 sqrt(rho ln(1/delta)) (rho = mu^2 / 2) is an upper end
    hi = 0.5 * mu * mu + 2.0 * mu * math.sqrt(-0.5 * log_delta)
    while gaussian_log_delta(mu, hi) > log_delta:
        hi *= 2.0
    lo = 0.0
    for _ in range(200):
        if hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi)
        if gaussian_log_delta(mu, mid) <= log_delta:
            hi = mid
        else:
            lo = mid
    return hi
