"""The zCDP cost of a sum of discrete Gaussian shares (Kairouz, Liu & Steinke, ICML 2021, "The
distributed discrete Gaussian mechanism"; TF-Privacy's `DistributedDiscreteGaussianQuery`).

The sum of n i.i.d. discrete Gaussians N_Z(0, s^2) is not a discrete Gaussian, but it is close:
for a query of l2 sensitivity D2 on d integer coordinates, adding it is (eps^2 / 2)-zCDP with

    eps = min( sqrt(D2^2 / (n s^2) + tau d / 2),  D2 / (sqrt(n) s) + tau sqrt(d) ),
    tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 s^2 k / (k + 1))

(their Theorem 1 / Proposition 14, for s >= 1/2). The first term is the central Gaussian's
D2^2 / (2 n s^2); tau is negligible once s is a few units (exp(-2 pi^2 s^2 / 2) < 1e-17 at
s = 2). Extra shares (more survivors than n) are independent noise: post-processing.
`exact_renyi` cross-checks the bound on small cases by computing the sum's law exactly.
"""

from __future__ import annotations

import math

import numpy as np

MIN_SHARE_SIGMA = 0.5  # the theorem's range


def tau(shares: int, share_sigma: float) -> float:
    """tau of `shares` discrete Gaussian shares of parameter `share_sigma` (grid units)."""
    if share_sigma < MIN_SHARE_SIGMA:
        raise ValueError(f"a share's sigma must be >= {MIN_SHARE_SIGMA} (grid units)")
    s2 = share_sigma**2
    return 10.0 * math.fsum(math.exp(-2.0 * math.pi**2 * s2 * k / (k + 1))
                            for k in range(1, shares))


def rho(l2: float, shares: int, share_sigma: float, dim: int) -> float:
    """The zCDP rho of adding the sum of `shares` i.i.d. N_Z(0, share_sigma^2) to each of `dim`
    integer coordinates of a query of l2 sensitivity `l2` (grid units)."""
    if l2 == 0.0:
        return 0.0
    var = shares * share_sigma**2
    t = tau(shares, share_sigma)
    eps = min(math.sqrt(l2**2 / var + t * dim / 2.0), l2 / math.sqrt(var) + t * math.sqrt(dim))
    return eps**2 / 2.0


def discrete_gaussian_pmf(sigma: float, support: int) -> np.ndarray:
    """N_Z(0, sigma^2) on -support .. support (normalised there; the cut tail is below 1e-300
    for support >= 40 sigma)."""
    x = np.arange(-support, support + 1, dtype=np.float64)
    w = np.exp(-(x**2) / (2.0 * sigma**2))
    return w / w.sum()


def exact_renyi(shares: int, share_sigma: float, shift: int, alpha: float) -> float:
    """The Renyi divergence of order `alpha` between the sum of `shares` N_Z(0, share_sigma^2)
    and the same shifted by the integer `shift`, computed exactly on its lattice (one
    coordinate): what the zCDP bound above must dominate, as alpha * rho."""
    support = int(math.ceil(40 * share_sigma)) + 1
    one = discrete_gaussian_pmf(share_sigma, support)
    law = one
    for _ in range(shares - 1):
        law = np.convolve(law, one)
    law = np.pad(law, abs(shift))
    moved = np.roll(law, shift)
    keep = (law > 1e-300) & (moved > 1e-300)
    p, q = law[keep], moved[keep]
    log_terms = alpha * np.log(p) + (1.0 - alpha) * np.log(q)
    top = log_terms.max()
    return float((top + math.log(np.exp(log_terms - top).sum())) / (alpha - 1.0))
