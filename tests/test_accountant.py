"""Tests for privrl.privacy.accountant: zCDP conversions (vs dp_accounting) and the Ledger."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from privrl.privacy.accountant import (
    Charge,
    Ledger,
    Totals,
    epsilon_to_rho,
    epsilon_to_rho_classical,
    pure_to_rho,
    rho_to_epsilon,
    rho_to_epsilon_classical,
)
from privrl.privacy.mechanisms import Gaussian, Laplace

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.rdp import RdpAccountant  # noqa: E402

RHOS = [1e-5, 1e-3, 0.0208199, 0.1, 1.0, 5.0, 20.0]
DELTAS = [1e-3, 1e-5, 1e-6, 1e-9]
# A fine order grid: alpha - 1 log-spaced over [1e-2, 1e5]; dp_accounting ignores alpha <= 1.01.
FINE_ORDERS = 1.0 + np.geomspace(1e-2, 1e5, 20_000)


def _dp_accounting_epsilon(rho: float, delta: float, orders: np.ndarray | None) -> float:
    """epsilon of one Gaussian mechanism with rho = 1 / (2 nm^2), from dp_accounting's RDP."""
    noise_multiplier = 1.0 / math.sqrt(2.0 * rho)
    acc = RdpAccountant() if orders is None else RdpAccountant(orders=list(orders))
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier))
    return float(acc.get_epsilon(delta))


# ---------------------------------------------------------------------------------------------
# rho -> epsilon
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("rho", RHOS)
def test_rho_to_epsilon_matches_dp_accounting(rho: float, delta: float) -> None:
    """Tight conversion: <= classical, <= dp_accounting (coarse), ~= dp_accounting (fine grid)."""
    ours = rho_to_epsilon(rho, delta)
    classical = rho_to_epsilon_classical(rho, delta)
    coarse = _dp_accounting_epsilon(rho, delta, None)
    fine = _dp_accounting_epsilon(rho, delta, FINE_ORDERS)
    assert ours <= classical
    assert ours < classical  # strictly tighter for every rho > 0 in this range
    # dp_accounting minimises the same bound over a finite order set, so it can only be larger.
    assert ours <= coarse + 1e-12
    assert ours <= fine + 1e-12
    # The default (coarse) grid is within ~10 % (worst at tiny rho, where the optimal order is
    # beyond its 1024 cap); the fine grid agrees to 1e-5 relative (measured: < 1e-7).
    assert ours >= coarse * 0.85
    assert ours == pytest.approx(fine, rel=1e-5)


@pytest.mark.parametrize("delta", [1e-5, 1e-8])
@pytest.mark.parametrize("rho", [0.01, 0.5, 3.0])
def test_rho_to_epsilon_matches_zcdp_event(rho: float, delta: float) -> None:
    """The same value through dp_accounting's ZCDpEvent (RDP rho * alpha at every order)."""
    acc = RdpAccountant(orders=list(FINE_ORDERS))
    acc.compose(dp_accounting.ZCDpEvent(rho))
    assert rho_to_epsilon(rho, delta) == pytest.approx(acc.get_epsilon(delta), rel=1e-5)


def test_rho_to_epsilon_composition_of_gaussians() -> None:
    """Ten Gaussian releases compose to the sum of their rhos, as in dp_accounting."""
    sigmas = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    acc = RdpAccountant(orders=list(FINE_ORDERS))
    ledger = Ledger()
    for s in sigmas:
        acc.compose(dp_accounting.GaussianDpEvent(s))  # sensitivity 1, std s
        mech = Gaussian(sigma=s)
        ledger.charge("gaussian", rho=mech.rho(1.0), sensitivity=1.0, scale=s)
    delta = 1e-6
    assert ledger.totals(delta).epsilon == pytest.approx(acc.get_epsilon(delta), rel=1e-5)


def test_rho_to_epsilon_near_the_true_infimum() -> None:
    """A dense order grid around the optimum cannot beat our minimiser (to 1e-10)."""
    for rho, delta in [(0.02, 1e-5), (1.0, 1e-6), (50.0, 1e-3), (1e-6, 1e-9)]:
        opt = 1.0 + math.sqrt(math.log(1.0 / delta) / rho)
        orders = np.linspace(1.0 + (opt - 1.0) * 0.2, 1.0 + (opt - 1.0) * 3.0, 200_001)
        orders = orders[orders > 1.011]
        log_inv_delta = math.log(1.0 / delta)
        values = (
            rho * orders
            + np.log1p(-1.0 / orders)
            + (log_inv_delta - np.log(orders)) / (orders - 1.0)
        )
        assert rho_to_epsilon(rho, delta) <= values.min() + 1e-10


def test_rho_to_epsilon_special_values() -> None:
    """rho = 0 -> 0, rho = inf -> inf, tiny rho -> 0 by the KL (total variation) bound."""
    assert rho_to_epsilon(0.0, 1e-5) == 0.0
    assert rho_to_epsilon(math.inf, 1e-5) == math.inf
    assert rho_to_epsilon(1e-12, 1e-5) == 0.0  # 1 - e^-rho <= delta^2: (0, delta)-DP
    assert rho_to_epsilon(1e-6, 1e-5) > 0.0
    assert math.isfinite(rho_to_epsilon(1e12, 1e-5))
    assert rho_to_epsilon(1e12, 1e-5) == pytest.approx(1e12, rel=1e-4)
    assert rho_to_epsilon(0.2, 0.5) == 0.0  # 1 - e^-0.2 = 0.18 <= 0.25
    assert rho_to_epsilon(0.5, 0.5) > 0.0


@pytest.mark.parametrize("bad", [(-1.0, 1e-5), (float("nan"), 1e-5), (1.0, 0.0), (1.0, 1.0)])
def test_rho_to_epsilon_rejects_bad_input(bad: tuple[float, float]) -> None:
    """Negative/NaN rho and delta outside (0, 1) are errors."""
    with pytest.raises(ValueError):
        rho_to_epsilon(*bad)


def test_classical_conversion_golden_values() -> None:
    """Reference values (Ngo et al. 2022's setting) for the classical conversion and its inverse."""
    assert epsilon_to_rho_classical(1.0, 1e-5) == pytest.approx(0.020819938, rel=1e-7)
    assert rho_to_epsilon_classical(1.0, 1e-5) == pytest.approx(7.78614, rel=1e-6)
    for eps in [0.1, 1.0, 10.0]:
        rho = epsilon_to_rho_classical(eps, 1e-5)
        assert rho_to_epsilon_classical(rho, 1e-5) == pytest.approx(eps, rel=1e-12)


def test_rho_to_epsilon_monotone() -> None:
    """epsilon is non-decreasing in rho and non-increasing in delta."""
    rhos = np.geomspace(1e-9, 1e4, 400)
    for delta in [1e-3, 1e-6, 1e-10]:
        eps = np.array([rho_to_epsilon(r, delta) for r in rhos])
        assert np.all(np.diff(eps) >= -1e-12 * eps[1:])
    deltas = np.geomspace(1e-12, 0.5, 100)
    eps = np.array([rho_to_epsilon(0.3, d) for d in deltas])
    assert np.all(np.diff(eps) <= 1e-12 * eps[:-1])


# ---------------------------------------------------------------------------------------------
# epsilon -> rho
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
@pytest.mark.parametrize("eps", [1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 100.0])
def test_epsilon_to_rho_inverts(eps: float, delta: float) -> None:
    """epsilon_to_rho gives the largest rho whose epsilon is <= eps (to ~1e-12 relative)."""
    rho = epsilon_to_rho(eps, delta)
    assert rho > 0.0
    back = rho_to_epsilon(rho, delta)
    assert back <= eps
    assert back == pytest.approx(eps, rel=1e-11)
    assert rho_to_epsilon(rho * (1.0 + 1e-9), delta) > eps
    # Tight conversion allows a larger rho (less noise) than the classical inverse.
    assert rho > epsilon_to_rho_classical(eps, delta)


def test_epsilon_to_rho_special_values_and_monotone() -> None:
    """eps = inf -> inf; eps = 0 -> the (tiny) KL-region rho; increasing in eps."""
    assert epsilon_to_rho(math.inf, 1e-5) == math.inf
    r0 = epsilon_to_rho(0.0, 1e-5)
    assert 0.0 <= r0 < 1e-9
    assert rho_to_epsilon(r0, 1e-5) == 0.0
    rhos = [epsilon_to_rho(e, 1e-6) for e in np.geomspace(1e-4, 1e3, 60)]
    assert all(a < b for a, b in zip(rhos, rhos[1:], strict=False))
    with pytest.raises(ValueError):
        epsilon_to_rho(-1.0, 1e-5)


def test_epsilon_to_rho_gaussian_calibration_against_dp_accounting() -> None:
    """Calibrate a Gaussian to (eps, delta) via rho; dp_accounting confirms (eps, delta)."""
    eps, delta, sens = 1.0, 1e-5, 2.0
    mech = Gaussian.calibrate(epsilon_to_rho(eps, delta), sens)
    acc = RdpAccountant(orders=list(FINE_ORDERS))
    acc.compose(dp_accounting.GaussianDpEvent(mech.sigma / sens))
    assert acc.get_epsilon(delta) == pytest.approx(eps, rel=1e-5)


def test_pure_to_rho() -> None:
    """Pure eps-DP implies eps^2/2-zCDP."""
    assert pure_to_rho(0.0) == 0.0
    assert pure_to_rho(1.0) == 0.5
    assert pure_to_rho(3.0) == 4.5
    assert pure_to_rho(math.inf) == math.inf
    with pytest.raises(ValueError):
        pure_to_rho(-0.1)


# ---------------------------------------------------------------------------------------------
# Ledger
# ---------------------------------------------------------------------------------------------


def test_empty_ledger() -> None:
    """An empty ledger spends nothing and reports delta 0."""
    ledger = Ledger()
    assert len(ledger) == 0
    assert ledger.entries == ()
    assert ledger.epsilon_pure == 0.0 and ledger.rho == 0.0
    assert ledger.totals(1e-5) == Totals(epsilon=0.0, delta=0.0, epsilon_pure=0.0, rho=0.0)
    assert ledger.by_mechanism() == {}


def test_ledger_pure_only_adds_up() -> None:
    """Pure charges add (basic composition); delta stays 0."""
    ledger = Ledger()
    lap = Laplace.calibrate(0.25, 2.0)
    for k in range(4):
        ledger.charge("laplace", epsilon=lap.epsilon(2.0), sensitivity=2.0, scale=lap.scale, at=k)
    assert len(ledger) == 4
    assert ledger.epsilon_pure == pytest.approx(1.0)
    totals = ledger.totals(1e-5)
    assert totals.epsilon == pytest.approx(1.0) and totals.delta == 0.0 and totals.rho == 0.0
    assert [c.at for c in ledger.entries] == [0, 1, 2, 3]
    assert all(isinstance(c, Charge) for c in ledger.entries)


def test_ledger_mixed_pure_and_zcdp() -> None:
    """Mixed ledger: epsilon = pure sum + tight conversion of the rho sum, delta = delta."""
    ledger = Ledger()
    ledger.charge("laplace", epsilon=0.3, sensitivity=1.0, scale=1 / 0.3, note="counts")
    ledger.charge("laplace", epsilon=0.2, sensitivity=1.0, scale=5.0, note="rewards")
    for k in range(5):
        ledger.charge("gaussian-tree", rho=0.01, sensitivity=2.0, scale=14.1, at=k)
    ledger.charge("gaussian-target", rho=0.05, sensitivity=12.0, scale=40.0)
    assert ledger.epsilon_pure == pytest.approx(0.5)
    assert ledger.rho == pytest.approx(0.1)
    totals = ledger.totals(1e-6)
    assert totals.rho == pytest.approx(0.1)
    assert totals.epsilon_pure == pytest.approx(0.5)
    assert totals.delta == 1e-6
    assert totals.epsilon == pytest.approx(0.5 + rho_to_epsilon(0.1, 1e-6), rel=1e-12)
    by = ledger.by_mechanism()
    assert set(by) == {"laplace", "gaussian-tree", "gaussian-target"}
    assert by["laplace"] == {"epsilon": pytest.approx(0.5), "rho": 0.0, "delta": 0.0, "count": 2}
    assert by["gaussian-tree"]["rho"] == pytest.approx(0.05)
    assert by["gaussian-tree"]["count"] == 5
    assert by["gaussian-target"] == {"epsilon": 0.0, "rho": 0.05, "delta": 0.0, "count": 1}
    assert sum(v["count"] for v in by.values()) == len(ledger)


def test_ledger_entries_are_immutable_snapshot() -> None:
    """entries is a tuple snapshot of frozen charges."""
    ledger = Ledger()
    ledger.charge("laplace", epsilon=1.0, sensitivity=1.0, scale=1.0)
    snap = ledger.entries
    ledger.charge("laplace", epsilon=1.0, sensitivity=1.0, scale=1.0)
    assert len(snap) == 1 and len(ledger.entries) == 2
    with pytest.raises(AttributeError):
        snap[0].epsilon = 0.0  # type: ignore[misc]


def test_ledger_round_trip_with_inf() -> None:
    """to_dict is JSON-safe (inf -> "inf") and from_dict rebuilds the same ledger."""
    ledger = Ledger()
    ledger.charge("laplace", epsilon=0.5, sensitivity=1.0, scale=2.0, note="n", at=3)
    ledger.charge("no-noise", epsilon=math.inf, sensitivity=1.0, scale=0.0, note="eps=inf run")
    ledger.charge("gaussian", rho=0.125, sensitivity=1.0, scale=2.0)
    ledger.charge("off", rho=0.0, sensitivity=math.inf, scale=math.inf)
    d = ledger.to_dict()
    text = json.dumps(d, allow_nan=False)  # raises if any inf/nan leaked through as a float
    assert '"inf"' in text
    back = Ledger.from_dict(json.loads(text))
    assert back.entries == ledger.entries
    assert back.to_dict() == d
    assert back.epsilon_pure == math.inf
    assert back.totals(1e-5).epsilon == math.inf
    assert back.totals(1e-5).delta == 1e-5
    json.dumps(back.totals(1e-5).to_dict(), allow_nan=False)


def test_ledger_infinite_rho() -> None:
    """A no-noise Gaussian release (rho = inf) makes the total infinite."""
    ledger = Ledger()
    ledger.charge("gaussian", rho=math.inf, sensitivity=1.0, scale=0.0)
    assert ledger.totals(1e-5).epsilon == math.inf
    back = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict(), allow_nan=False)))
    assert back.rho == math.inf


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": -0.1, "sensitivity": 1.0, "scale": 1.0},
        {"rho": float("nan"), "sensitivity": 1.0, "scale": 1.0},
        {"epsilon": 1.0, "sensitivity": -1.0, "scale": 1.0},
        {"epsilon": 1.0, "sensitivity": 1.0, "scale": -2.0},
        {"epsilon": 1.0, "sensitivity": 1.0, "scale": 1.0, "at": -1},
    ],
)
def test_ledger_rejects_bad_charges_and_stays_unchanged(kwargs: dict) -> None:
    """Invalid charges raise and leave the ledger untouched."""
    ledger = Ledger()
    ledger.charge("ok", epsilon=1.0, sensitivity=1.0, scale=1.0)
    with pytest.raises(ValueError):
        ledger.charge("bad", **kwargs)
    assert len(ledger) == 1 and ledger.epsilon_pure == 1.0


def test_ledger_from_dict_rejects_nan() -> None:
    """A persisted NaN is refused on load."""
    d = {"entries": [{"mechanism": "x", "epsilon": "nan", "sensitivity": 1.0, "scale": 1.0}]}
    with pytest.raises(ValueError):
        Ledger.from_dict(d)


def test_ledger_sums_are_exact_and_match_entries() -> None:
    """Running sums equal math.fsum over the entries (ten charges of 0.1 total exactly 1.0)."""
    ledger = Ledger()
    for k in range(10):
        ledger.charge("a", epsilon=0.1, sensitivity=1.0, scale=10.0, at=k)
        ledger.charge("b", rho=0.1, sensitivity=1.0, scale=math.sqrt(5.0), at=k)
    assert sum([0.1] * 10) != 1.0  # naive float summation drifts ...
    assert ledger.epsilon_pure == 1.0  # ... the ledger does not
    assert ledger.rho == 1.0
    assert ledger.by_mechanism()["a"]["epsilon"] == 1.0
    rng = np.random.default_rng(7)
    values = rng.exponential(size=5000)
    big = Ledger()
    for v in values:
        big.charge("g", rho=float(v), sensitivity=1.0, scale=1.0)
    assert big.rho == math.fsum(values)
    assert Ledger.from_dict(big.to_dict()).rho == big.rho


def test_ledger_approximate_dp_charges_compose_by_basic_composition() -> None:
    """(eps, delta) charges add both numbers; they are not counted as pure epsilon."""
    ledger = Ledger()
    ledger.charge("smoothed", epsilon=0.1, delta=0.1, sensitivity=0.0, scale=0.0)
    assert ledger.epsilon_pure == 0.0 and ledger.approximate == (0.1, 0.1)
    assert ledger.totals(1e-5) == Totals(epsilon=0.1, delta=0.1, epsilon_pure=0.0, rho=0.0)
    ledger.charge("laplace", epsilon=0.5, sensitivity=1.0, scale=2.0)
    ledger.charge("gaussian", rho=0.01, sensitivity=1.0, scale=7.0)
    totals = ledger.totals(1e-6)
    assert totals.epsilon == pytest.approx(0.6 + rho_to_epsilon(0.01, 1e-6), rel=1e-12)
    assert totals.delta == pytest.approx(0.1 + 1e-6) and totals.epsilon_pure == 0.5
    assert ledger.by_mechanism()["smoothed"] == {"epsilon": 0.1, "rho": 0.0, "delta": 0.1,
                                                 "count": 1}
    back = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict(), allow_nan=False)))
    assert back.to_dict() == ledger.to_dict() and back.approximate == (0.1, 0.1)
    with pytest.raises(ValueError, match="delta"):
        Charge("x", epsilon=1.0, delta=1.0)
