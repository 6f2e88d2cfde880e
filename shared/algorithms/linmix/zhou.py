"""Zhou's calibration of Private-LinOpt-VI / -PO (Zhou 2022).

Pure functions of public numbers, reproducing Zhou's reference numbers. Noise scales come
from Zhou's zCDP argument with add/remove sensitivities; the ledger recomputes what they
actually spend with this run's replace-one sensitivities (erratum 6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privrl.privacy.psd import wigner_norm_tail_zhou

from ...privacy.psd import variance_norms

if TYPE_CHECKING:
    from privrl.trust.base import TrustBoundary


def tree_levels(episodes: int) -> int:
    """m = max(1, ceil(log2 K)) (erratum 5)."""
    return max(1, math.ceil(math.log2(episodes))) if episodes > 1 else 1


def paper_sigma(sensitivity: float, horizon: int, eps: float, delta: float, m: int) -> float:
    """sigma = (H Delta / eps) sqrt(32 m ln(4H/delta)) (Zhou 2022, Thm. 6.4; m = 1 for LDP)."""
    if math.isinf(eps):
        return 0.0
    return horizon * sensitivity / eps * math.sqrt(32.0 * m * math.log(4.0 * horizon / delta))


@dataclass(frozen=True)
class Part:
    """One regression (transition 'p' or reward 'r'): its noise bound, shift and radius."""

    sigma_matrix: float  # per-entry std of one node / one report of the Gram stream
    sigma_vector: float  # of the moment stream
    big_sigma: float  # ||N|| <= Sigma: the shift is 2 Sigma
    lam_min: float
    lam_max: float
    nu: float
    beta: float


def part(kind: str, dim: int, std_matrix: float, std_vector: float, horizon: int, episodes: int,
         alpha: float, ridge: float, shift_scale: float = 1.0, norms: str = "tail") -> Part:
    """Sigma, lambda_min/max, nu and beta of one regression, for summed-noise stds `std_*`
    (sqrt(m) sigma in the paper; sqrt(K) sigma in LDP) plus a ridge `ridge` (0 in the paper's
    private case, lambda in the non-private one); the shift is 2 shift_scale Sigma.

    `norms`: Sigma and chi from Lemmas B.4/B.5's tails at alpha / (4 K H) ('tail', the paper's)
    or from the noise's variance, 2 sqrt(d) std_matrix and sqrt(d) std_vector ('variance')."""
    k, h = episodes, horizon
    if norms == "variance":
        big, chi = variance_norms(std_matrix, std_vector, dim)
    else:
        big = std_matrix * wigner_norm_tail_zhou(dim, alpha / (4.0 * k * h))
        chi = std_vector * (math.sqrt(dim) + math.sqrt(2.0 * math.log(4.0 * k * h / alpha)))
    lam_min = max(2.0 * shift_scale - 1.0, 0.0) * big + ridge
    lam_max = (2.0 * shift_scale + 1.0) * big + ridge
    nu = chi / math.sqrt(lam_min) if chi else 0.0
    log_h = 2.0 * math.log(h / alpha)
    if kind == "p":
        beta = (h / 2.0) * math.sqrt(log_h + dim * math.log1p(k * h**2 / lam_min))
    else:
        beta = 0.5 * math.sqrt(log_h + dim * math.log1p(k / (dim * lam_min)))
    beta += math.sqrt(dim * lam_max) + nu
    return Part(std_matrix, std_vector, big, lam_min, lam_max, nu, beta)


def eta(n_actions: int, horizon: int, episodes: int) -> float:
    """The mirror-descent step sqrt(2 ln|A| / (H^2 K)) (Zhou 2022, Alg. 2)."""
    return math.sqrt(2.0 * math.log(n_actions) / (horizon**2 * episodes))


@dataclass(frozen=True)
class Golden:
    """Zhou's constants for one configuration (the reference numbers the tests check)."""

    m: int
    sigma_p1: float
    sigma_p2: float
    sigma_r: float
    p: Part
    r: Part
    eta: float


def constants(boundary: TrustBoundary, episodes: int, horizon: int, d1: int, d2: int,
              n_actions: int, eps: float, delta: float, alpha: float, ridge: float = 1.0) -> Golden:
    """Every constant of the JDP algorithm (Zhou 2022), its LDP extension or the non-private one."""
    m = tree_levels(episodes)
    if not boundary.private:
        zero_p = part("p", d1, 0.0, 0.0, horizon, episodes, alpha, ridge)
        zero_r = part("r", d2, 0.0, 0.0, horizon, episodes, alpha, ridge)
        return Golden(m, 0.0, 0.0, 0.0, zero_p, zero_r, eta(n_actions, horizon, episodes))
    levels = m if boundary.counters else 1  # nodes an episode enters / reports a user sends
    summed = m if boundary.counters else episodes  # noise terms in one release (bound)
    s_p1 = paper_sigma(d1 * horizon**2, horizon, eps, delta, levels)
    s_p2 = paper_sigma(math.sqrt(d1) * horizon**2, horizon, eps, delta, levels)
    s_r = paper_sigma(1.0, horizon, eps, delta, levels)
    root = math.sqrt(summed)
    p = part("p", d1, s_p1 * root, s_p2 * root, horizon, episodes, alpha, 0.0)
    r = part("r", d2, s_r * root, s_r * root, horizon, episodes, alpha, 0.0)
    return Golden(m, s_p1, s_p2, s_r, p, r, eta(n_actions, horizon, episodes))
