"""Luyo et al.'s calibration of private UCRL-VTR (Luyo et al. 2021).

Pure functions of public numbers, reproducing the reference values exactly (natural logs).
The Gaussian mechanism here is the paper's (F.3): sigma = Delta sqrt(2 ln(2/delta)) / eps with
`ln(2/delta)` (not the textbook 1.25), composed with advanced composition (F.6); the ledger
never trusts this chain: it charges what the resulting sigma spends under zCDP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privrl.privacy.psd import chi_norm_tail, wigner_norm_tail

if TYPE_CHECKING:
    from privrl.trust.base import TrustBoundary


def gauss_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """The paper's Gaussian mechanism: Delta sqrt(2 ln(2/delta)) / eps (0 when eps = inf)."""
    if math.isinf(eps):
        return 0.0
    return sensitivity * math.sqrt(2.0 * math.log(2.0 / delta)) / eps


def adv(eps: float, delta: float, k: int) -> tuple[float, float]:
    """Advanced composition in calibration form (F.6): k mechanisms at this level compose to
    (eps, delta): (eps / sqrt(8 k ln(2/delta)), delta / (2k))."""
    return eps / math.sqrt(8.0 * k * math.log(2.0 / delta)), delta / (2.0 * k)


def tree_depth(episodes: int) -> int:
    """K0 = ceil(log2(K) + 1): the paper's bound on the nodes of one prefix."""
    return math.ceil(math.log2(episodes) + 1.0)


def hoeffding_term(horizon: int, episodes: int, d: int, p: float) -> float:
    """sqrt(2 H^2 ln(3 H (1+KH)^{d/2} / p)), the log split to avoid overflow."""
    log = math.log(3.0 * horizon / p) + 0.5 * d * math.log1p(episodes * horizon)
    return math.sqrt(2.0 * horizon**2 * log)


def paper_sigma(boundary: TrustBoundary, horizon: int, episodes: int, eps: float, delta: float,
                sensitivity: float | None = None, streams: int = 2) -> float:
    """sigma_B of Cor. 5 (JDP: the tree's node noise) or Cor. 6 (LDP: each user's noise), the
    budget split evenly over `streams` statistics (2 in Alg. 1; 4 in Alg. 3: Cor. 10 / 11's
    sigma_B,1 and sigma_B,2 at sensitivities 2d and 2H^4).

    `sensitivity` defaults to the paper's 2 H^2 (||X|| <= H)."""
    sens = 2.0 * horizon**2 if sensitivity is None else sensitivity
    if not boundary.private:
        return 0.0
    if boundary.counters:  # the tree's node noise (JDP)
        e1, d1 = adv(eps / streams, delta / streams, horizon)
        e0, d0 = adv(e1, d1, tree_depth(episodes))
        return gauss_sigma(sens, e0, d0)
    if boundary.local_noise:  # each user's own noise (LDP)
        return gauss_sigma(sens, eps / (streams * horizon), delta / (streams * horizon))
    raise ValueError(f"Luyo et al. give no noise scale for the {boundary.label} boundary")


@dataclass(frozen=True)
class NoiseBounds:
    """High-probability bounds on the summed noise of one release (Thm. 7's inputs)."""

    ups: float  # ||matrix noise|| <= ups: the shift is 2 ups, eigenvalues then in [ups, 3 ups]
    c: float  # ||vector noise|| <= c


def noise_bounds(std_matrix: float, std_vector: float, d: int, horizon: int, episodes: int,
                 p: float, split: int = 6) -> NoiseBounds:
    """Ups and C for noise with these per-entry stds, each (k, h) failing w.p. p / (split K H)
    (6 in Alg. 1, 24 in Alg. 3)."""
    alpha = p / (split * episodes * horizon)
    return NoiseBounds(std_matrix * wigner_norm_tail(d, alpha),
                       std_vector * chi_norm_tail(d, alpha))


def beta_corollary(lam: float, ups: float, c_w: float, hoeffding: float) -> float:
    """Cor. 5/6's radius 3 (C_w + 1) sqrt(lambda + Ups) + Hoeffding term."""
    return 3.0 * (c_w + 1.0) * math.sqrt(lam + ups) + hoeffding


def beta_thm7(lam: float, ups_low: float, ups_high: float, c: float, c_w: float,
              hoeffding: float) -> float:
    """Thm. 7: ((lambda + Ups_high) C_w + C) / sqrt(lambda + Ups_low) + Hoeffding term."""
    return ((lam + ups_high) * c_w + c) / math.sqrt(lam + ups_low) + hoeffding


def bernstein_terms(d: int, horizon: int, episodes: int, k: int, lam: float, p: float
                    ) -> tuple[float, float, float]:
    """The concentration terms of Alg. 3's radii (Thm. 9, eq. 5) at episode k: (hat, check,
    tilde) = (8 sqrt(d l1 l) + 4 sqrt(d) l, 8 d sqrt(l1 l) + 4 sqrt(d) l,
    8 sqrt(d H^4 l2 l) + 4 H^2 l) with l = ln(24 k^2 H / p), l1 = ln(1 + K / lambda),
    l2 = ln(1 + K H^4 / (d lambda))."""
    log = math.log(24.0 * k * k * horizon / p)
    l1 = math.log1p(episodes / lam)
    l2 = math.log1p(episodes * horizon**4 / (d * lam))
    tail = 4.0 * math.sqrt(d) * log
    return (8.0 * math.sqrt(d * l1 * log) + tail, 8.0 * d * math.sqrt(l1 * log) + tail,
            8.0 * math.sqrt(d * horizon**4 * l2 * log) + 4.0 * horizon**2 * log)
