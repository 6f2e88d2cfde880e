"""Tests for privrl.privacy.profile (the exact Gaussian privacy profile) and its use by the ledger
and the calibration: closed form vs scipy, below CKS, against dp_accounting's PLD."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy.accountant import (
    Charge,
    Ledger,
    continuous_gaussian,
    epsilon_to_rho,
    rho_to_epsilon,
)
from privrl.privacy.noise import noise_label
from privrl.privacy.profile import gaussian_delta, gaussian_epsilon, gaussian_log_delta, mills_ratio

stats = pytest.importorskip("scipy.stats")
pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

MUS = [1e-3, 0.05, 0.3, 1.0, 3.0, 10.0, 40.0]
DELTAS = [1e-3, 1e-5, 1e-9]


def _scipy_log_delta(mu: float, eps: float) -> float:
    """ln of Balle & Wang's closed form through scipy's log-CDF (a second implementation)."""
    la = stats.norm.logcdf(-eps / mu + mu / 2)
    lb = eps + stats.norm.logcdf(-eps / mu - mu / 2)
    with np.errstate(divide="ignore"):
        return float(la + np.log1p(-np.exp(lb - la)))


@pytest.mark.parametrize("t", [0.0, 0.5, 3.0, 24.99, 25.0, 40.0, 1e3])
def test_mills_ratio_matches_scipy(t: float) -> None:
    """R(t) = Phi(-t) / phi(t) on both sides of the erfc / continued-fraction switch."""
    ref = math.exp(stats.norm.logsf(t) - stats.norm.logpdf(t))
    assert mills_ratio(t) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("mu", MUS)
def test_profile_matches_the_closed_form(mu: float) -> None:
    """ln delta(eps) agrees with scipy's evaluation of the same formula where that is stable."""
    for eps in [0.0, 0.1, 1.0, 0.5 * mu * mu, 3.0 * mu, 20.0]:
        ref = _scipy_log_delta(mu, eps)
        if ref < -600 or not math.isfinite(ref) or ref > math.log(0.99):
            continue
        assert gaussian_log_delta(mu, eps) == pytest.approx(ref, rel=1e-8, abs=1e-9)


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("delta", DELTAS)
def test_epsilon_inverts_the_profile_and_beats_cks(mu: float, delta: float) -> None:
    """eps(delta) is the smallest eps with delta(eps) <= delta, and never above CKS."""
    eps = gaussian_epsilon(mu, delta)
    rho = mu * mu / 2
    assert eps <= rho_to_epsilon(rho, delta) + 1e-12
    if eps > 0.0:
        assert gaussian_delta(mu, eps) <= delta
        assert gaussian_delta(mu, eps * (1 - 1e-7)) > delta
    else:
        assert gaussian_delta(mu, 0.0) <= delta


@pytest.mark.parametrize("rho", [0.01, 0.1, 1.0, pytest.param(10.0, marks=pytest.mark.slow)])
def test_exact_epsilon_matches_dp_accounting_pld(rho: float) -> None:
    """The exact eps is below dp_accounting's (pessimistic) PLD value and within its grid."""
    delta = 1e-5
    exact = rho_to_epsilon(rho, delta, continuous=True)
    mu = math.sqrt(2 * rho)
    dist = pld.from_gaussian_mechanism(standard_deviation=1.0 / mu, sensitivity=1.0,
                                       value_discretization_interval=1e-4)
    ref = dist.get_epsilon_for_delta(delta)
    assert exact <= ref + 1e-9
    assert exact == pytest.approx(ref, abs=2e-3)
    assert exact < rho_to_epsilon(rho, delta)  # strictly tighter than CKS


def test_discrete_gaussian_profile_exceeds_the_continuous_one() -> None:
    """Brute force (CKS 2020 Thm. 7 by summation): the discrete Gaussian's delta(eps) exceeds
    the continuous profile, which is why integer noise keeps the zCDP conversion."""
    sigma = 5.0
    y = np.arange(-200, 201)
    weights = np.exp(-(y**2) / (2 * sigma**2))
    p = weights / weights.sum()  # N_Z(0, sigma^2); N_Z(1, sigma^2) has the same normaliser
    q = np.exp(-((y - 1) ** 2) / (2 * sigma**2)) / weights.sum()
    discrete = float(np.maximum(p - q, 0.0).sum())  # eps = 0, sensitivity 1
    assert discrete > gaussian_delta(1.0 / sigma, 0.0) + 1e-5


def test_ledger_uses_the_exact_profile_only_for_continuous_charges() -> None:
    """All-float zCDP charges: exact profile; one integer-noise zCDP charge: CKS for all."""
    delta = 1e-5
    floating = noise_label("float")
    assert continuous_gaussian("float") and continuous_gaussian(floating)
    assert not continuous_gaussian("numpy") and not continuous_gaussian("opendp")
    ledger = Ledger()
    for _ in range(3):
        ledger.charge("tree:x", rho=0.1, sensitivity=1.0, scale=1.0, noise=floating)
    ledger.charge("eval", epsilon=0.2, delta=1e-7, sensitivity=1.0, scale=1.0)  # no rho
    assert ledger.totals(delta).epsilon == pytest.approx(
        0.2 + rho_to_epsilon(0.3, delta, continuous=True), rel=1e-12)
    mixed = [Charge("tree:y", rho=1e-9, sensitivity=1.0, scale=1.0, noise="numpy")]
    assert ledger.totals_with(mixed, delta).epsilon == pytest.approx(
        0.2 + rho_to_epsilon(0.3 + 1e-9, delta), rel=1e-12)
    ledger.charge_all(mixed)
    assert ledger.totals(delta).epsilon == pytest.approx(
        0.2 + rho_to_epsilon(0.3 + 1e-9, delta), rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0, 1e3])
def test_continuous_inverse_spends_exactly_the_budget(epsilon: float) -> None:
    """epsilon_to_rho(continuous) is the largest rho whose exact eps is within the budget."""
    delta = 1e-5
    rho = epsilon_to_rho(epsilon, delta, continuous=True)
    assert rho > epsilon_to_rho(epsilon, delta)
    assert rho_to_epsilon(rho, delta, continuous=True) <= epsilon
    assert rho_to_epsilon(rho, delta, continuous=True) == pytest.approx(epsilon, rel=1e-9)
    assert rho_to_epsilon(rho * (1 + 1e-9), delta, continuous=True) > epsilon * (1 - 1e-9)


def test_calibration_with_float_noise_uses_the_exact_profile() -> None:
    """Float noise gets a smaller sigma than integer noise for the same (eps, delta), and a
    ledger charging one release per level spends exactly the budget."""
    cals = {n: bind(RunConfig(n_states=6, n_actions=2, horizon=20, episodes=500,
                              privacy="jdp", epsilon=1.0, delta=1e-5, counter="smoothed",
                              schedule="every", mechanism="gaussian", noise=n)).calibration()
            for n in ("numpy", "float")}
    assert cals["float"].families[0].scale < cals["numpy"].families[0].scale
    ledger = Ledger()
    for level in range(cals["float"].levels):
        for fam in cals["float"].families:
            ledger.charge(f"tree:{fam.name}", rho=fam.cost, sensitivity=fam.l2, scale=fam.scale,
                          at=level, noise=noise_label("float"))
    assert ledger.totals(1e-5).epsilon == pytest.approx(1.0, rel=1e-9)
    assert ledger.totals(1e-5).epsilon <= 1.0 * (1 + 1e-9)
