"""LSW / LSL and their smoothed sensitivities (Balle et al. 2016) and their properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from privrl.algorithms.policy_eval.estimators import LSL, LSW, smoothing_constants
from privrl.algorithms.policy_eval.features import feature_matrix
from privrl.seeding import generator
from privrl.worlds.chain import ChainMRP
from support.policy_eval import golden_data, neighbours, random_data, sums, visit_probabilities

REL = 1e-6  # the reference values are given to 1e-6 relative accuracy


def test_constants_of_lemma_1() -> None:
    alpha, beta = smoothing_constants(1.0, 0.1, 3)
    assert alpha == pytest.approx(12.238734, rel=REL) and beta == pytest.approx(0.041696, rel=1e-5)
    alpha, beta = smoothing_constants(0.1, 0.1, 40)
    assert alpha == pytest.approx(122.387342, rel=REL)
    assert beta == pytest.approx(5.814531e-4, rel=REL)
    assert smoothing_constants(0.1, 0.1, 20)[1] == pytest.approx(1.087158e-3, rel=REL)
    assert smoothing_constants(math.inf, 0.1, 3) == (0.0, math.inf)


def test_appendix_constants_are_more_conservative_and_checked() -> None:
    nrs = smoothing_constants(1.0, 0.1, 40)
    app = smoothing_constants(1.0, 0.1, 40, "appendix")
    assert app[0] == pytest.approx(15 * math.sqrt(2 * math.log(40)), rel=1e-12)
    assert app[0] > nrs[0] and app[1] < nrs[1]
    with pytest.raises(ValueError, match="eps <= 5"):
        smoothing_constants(6.0, 0.1, 40, "appendix")
    for bad in ((0.0, 0.1), (1.0, 0.0), (1.0, 1.0), (-1.0, 0.5)):
        with pytest.raises(ValueError):
            smoothing_constants(*bad, 3)
    with pytest.warns(UserWarning, match="eps = 6 > 5"):
        smoothing_constants(6.0, 0.1, 3)


def test_golden_values_of_the_worked_example() -> None:
    """The worked example: returns, (n, g), theta, phi_k, psi and sigma of both algorithms."""
    n, g = sums(golden_data())
    np.testing.assert_allclose(n, [1, 2, 1])
    np.testing.assert_allclose(g, [1.629, 2.76, 1.0], rtol=REL)
    beta = smoothing_constants(1.0, 0.1, 3)[1]
    lsw = LSW(np.eye(3))
    np.testing.assert_allclose(lsw.theta(n, g), [1.629, 1.38, 1.0], rtol=REL)
    phi_k = [(1.0 / np.maximum(n - k, 1) ** 2).sum() for k in range(3)]
    np.testing.assert_allclose(phi_k, [2.25, 3, 3])
    np.testing.assert_allclose(np.exp(-beta * np.arange(3)) * phi_k,
                               [2.25, 2.877483, 2.759970], rtol=REL)
    assert lsw.smooth_bound(n, beta) == pytest.approx(2.877483, rel=REL)
    assert lsw.lipschitz == pytest.approx(1.0)
    assert lsw.sigma(n, 1.0, 0.1, 10.0) == pytest.approx(207.607427, rel=REL)
    lsl = LSL(np.eye(3), 6.0)
    np.testing.assert_allclose(lsl.theta(n, g), [0.40725, 0.552, 0.25], rtol=REL)
    assert lsl.phi_norm == pytest.approx(1.0)
    assert lsl.smooth_bound(2, n, beta) == pytest.approx(5.706519, rel=REL)
    assert lsl.sigma(2, n, 1.0, 0.1, 10.0) == pytest.approx(116.945122, rel=REL)


def test_expected_magnitudes_of_section_5_7() -> None:
    """sigma at the expected counts m p_s of the chain reproduces the expected table (F_max = 1)."""
    p = visit_probabilities(ChainMRP())
    table = {10**3: (579, 318, 208, 2.34), 10**4: (192, 99, 96, 0.234),
             10**5: (58, 21.5, 50, 0.0234), 10**6: (0.071, 0.0043, 26.7, 0.0023),
             10**7: (6.1e-4, 4.3e-4, 14.6, 2.3e-4)}
    tab, pairs = feature_matrix("tabular", 40), feature_matrix("agg2", 40)
    for m, expected in table.items():
        n = np.round(m * p)
        got = (LSW(tab).sigma(n, 0.1, 0.1, 1.0), LSW(pairs).sigma(n, 0.1, 0.1, 1.0),
               LSL(tab, math.sqrt(m)).sigma(m, n, 0.1, 0.1, 1.0),
               LSL(tab, float(m)).sigma(m, n, 0.1, 0.1, 1.0))
        np.testing.assert_allclose(got, expected, rtol=0.04, err_msg=f"m = {m}")


def test_closed_forms_tabular() -> None:
    rng = generator(1, "closed")
    n = rng.integers(0, 9, size=6).astype(float)
    g = n * rng.random(6)
    fbar = np.divide(g, n, out=np.zeros(6), where=n > 0)
    np.testing.assert_allclose(LSW(np.eye(6), rng.random(6) + 0.1).theta(n, g), fbar,
                               atol=1e-12)
    rho = rng.random(6)
    np.testing.assert_allclose(LSL(np.eye(6), 5.0, rho).theta(n, g),
                               rho * g / (rho * n + 2.5), rtol=1e-12)


def test_gradients_vanish_and_raw_trajectories_give_the_same_estimate() -> None:
    """General Phi: grad J^w = 0 and grad J^lambda = 0, J^lambda computed from the raw
    per-trajectory returns (eq. 10), and eq. 11's Gamma_X form equals the m-scaled one."""
    rng = generator(2, "grad")
    data = random_data(rng, 30, 7, 1.0)
    n, g = sums(data)
    phi = rng.normal(size=(7, 3))
    w, rho, lam, m = rng.random(7) + 0.05, rng.random(7), 4.0, 30
    theta = LSW(phi, w).theta(n, g)
    fbar = np.divide(g, n, out=np.zeros(7), where=n > 0)
    np.testing.assert_allclose(phi.T @ (w * (fbar - phi @ theta)), 0, atol=1e-10)
    theta_l = LSL(phi, lam, rho).theta(n, g)
    resid = np.where(data.visited, data.returns - (phi @ theta_l)[None, :], 0.0)
    grad = -(2 / m) * ((rho * resid) @ phi).sum(axis=0) + (lam / m) * theta_l
    np.testing.assert_allclose(grad, 0, atol=1e-10)
    gamma_x = np.diag(rho * n / m)
    eq11 = np.linalg.solve(phi.T @ gamma_x @ phi + lam / (2 * m) * np.eye(3),
                           phi.T @ gamma_x @ fbar)
    np.testing.assert_allclose(theta_l, eq11, rtol=1e-10)


def brute_lsw(n: np.ndarray, w: np.ndarray, beta: float, extra: int = 100) -> float:
    ks = np.arange(int(n.max()) + extra + 1)
    phik = (w / np.maximum(n[None, :] - ks[:, None], 1) ** 2).sum(axis=1)
    return float((np.exp(-beta * ks) * phik).max())


def brute_lsl(est: LSL, m: int, n: np.ndarray, beta: float, extra: int = 100) -> float:
    ks = np.arange(m + extra + 1)
    c = est.phi_norm * est.rho.max() / math.sqrt(2 * est.lam)
    mass = (est.rho * np.minimum(n[None, :] + ks[:, None], m)).sum(axis=1)
    phik = (c * np.sqrt(mass) + np.linalg.norm(est.rho)) ** 2
    return float((np.exp(-beta * ks) * phik).max())


@pytest.mark.parametrize("beta", [0.3, 0.04, 1e-3, 5.8e-4])
def test_smooth_bounds_equal_brute_force_maxima(beta: float) -> None:
    """The exact early stop never cuts the supremum (also when it sits at a large k)."""
    rng = generator(3, "brute", int(beta * 1e6))
    for m in (1, 7, 60, 3000):
        n = rng.integers(0, m + 1, size=(5, 6)).astype(float)
        w = rng.random(6) * (rng.random(6) > 0.2) + 1e-3
        phi = np.eye(6)
        got = LSW(phi, w).smooth_bound(n, beta)
        want = [brute_lsw(row, w, beta) for row in n]
        np.testing.assert_allclose(got, want, rtol=1e-12)
        lsl = LSL(phi, 3.0, rng.random(6))
        got = lsl.smooth_bound(m, n, beta)
        want = [brute_lsl(lsl, m, row, beta) for row in n]
        np.testing.assert_allclose(got, want, rtol=1e-12)
        phi0 = (w / np.maximum(n, 1) ** 2).sum(axis=1)
        assert (LSW(phi, w).smooth_bound(n, beta) >= phi0 - 1e-15).all()


@pytest.mark.parametrize("beta", [0.7, 0.0417])
def test_smooth_bounds_are_beta_smooth_over_every_neighbouring_signature(beta: float) -> None:
    """Smoothness: |ln psi(v) - ln psi(v')| <= beta for every v' with ||v - v'||_inf <= 1,
    coordinates clipped to [0, m]."""
    rng = generator(4, "smooth")
    m, n_states = 6, 4
    lsw = LSW(rng.normal(size=(n_states, 2)), rng.random(n_states) + 0.1)
    lsl = LSL(rng.normal(size=(n_states, 2)), 40.0, rng.random(n_states))
    steps = np.array(list(itertools.product((-1, 0, 1), repeat=n_states)), dtype=float)
    for _ in range(15):
        v = rng.integers(0, m + 1, size=n_states).astype(float)
        near = np.unique(np.clip(v + steps, 0, m), axis=0)
        for psi_v, psi_near in ((lsw.smooth_bound(v, beta), lsw.smooth_bound(near, beta)),
                                (lsl.smooth_bound(m, v, beta), lsl.smooth_bound(m, near, beta))):
            assert np.abs(np.log(psi_near) - np.log(psi_v)).max() <= beta + 1e-12


FEATURE_CASES = {
    "tabular": lambda rng: np.eye(6),
    "agg2": lambda rng: feature_matrix("agg2", 6),
    "dense": lambda rng: rng.normal(size=(6, 3)),
}


@pytest.mark.parametrize("features", sorted(FEATURE_CASES))
def test_sensitivity_is_covered_by_the_noise_scale(features: str) -> None:
    """Lemma 1 (a) and (b) on random data sets and the adversarial replacements:
    ||theta_X - theta_X'|| <= sigma/alpha on both sides; log-variance ratio <= beta."""
    rng = generator(5, "sens", features)
    eps, delta, f_max = 1.0, 0.1, 2.0
    checked = 0
    for _ in range(12):
        phi = FEATURE_CASES[features](rng)
        m = int(rng.integers(1, 12))
        data = random_data(rng, m, 6, f_max, p_visit=float(rng.uniform(0.1, 0.9)))
        lsw = LSW(phi, rng.random(6) + 0.05)
        lsl = LSL(phi, 1.5 * np.linalg.norm(phi, 2) ** 2 + rng.random() * 10, rng.random(6))
        alpha, beta = smoothing_constants(eps, delta, phi.shape[1])
        for _, x, y in neighbours(data, f_max):
            (nx, gx), (ny, gy) = sums(x), sums(y)
            for est, sx, sy in (
                (lsw, lsw.sigma(nx, eps, delta, f_max), lsw.sigma(ny, eps, delta, f_max)),
                (lsl, lsl.sigma(m, nx, eps, delta, f_max), lsl.sigma(m, ny, eps, delta, f_max)),
            ):
                gap = np.linalg.norm(est.theta(nx, gx) - est.theta(ny, gy))
                assert gap <= sx / alpha * (1 + 1e-9) and gap <= sy / alpha * (1 + 1e-9)
                assert abs(math.log(sx**2) - math.log(sy**2)) <= beta + 1e-12
                checked += 1
    assert checked == 12 * 5 * 2


def test_limits_and_monotonicity() -> None:
    """The smoothed bound dominates the local sensitivity."""
    rng = generator(6, "limits")
    n = rng.integers(0, 50, size=8).astype(float)
    lsw, lsl = LSW(np.eye(8)), LSL(np.eye(8), 10.0)
    assert lsw.sigma(n, math.inf, 0.1, 1.0) == 0.0 and lsl.sigma(50, n, math.inf, 0.1, 1.0) == 0
    for sig in (lambda e, d: lsw.sigma(n, e, d, 1.0), lambda e, d: lsl.sigma(50, n, e, d, 1.0)):
        assert sig(0.5, 0.1) < sig(0.2, 0.1) and sig(0.5, 0.2) < sig(0.5, 0.01)
    more = n.copy()
    for s in range(8):
        more[s] += 3
        assert lsw.sigma(more, 0.5, 0.1, 1.0) <= lsw.sigma(n, 0.5, 0.1, 1.0) + 1e-15
        assert lsl.sigma(60, more, 0.5, 0.1, 1.0) >= lsl.sigma(60, n, 0.5, 0.1, 1.0) - 1e-15
    assert LSL(np.eye(8), 20.0).sigma(50, n, 0.5, 0.1, 1.0) < lsl.sigma(50, n, 0.5, 0.1, 1.0)
    with pytest.raises(ValueError, match="lambda > "):
        LSL(feature_matrix("agg2", 8), 2.0).sigma(50, n, 0.5, 0.1, 1.0)  # ||Phi||^2 = 2


def test_invalid_tasks_are_refused() -> None:
    with pytest.raises(ValueError, match="singular"):
        LSW(np.eye(3), [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="weights"):
        LSW(np.eye(3), [1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="rho"):
        LSL(np.eye(3), 2.0, [1.5, 1.0, 1.0])
    with pytest.raises(ValueError, match="lambda"):
        LSL(np.eye(3), 0.0)
    with pytest.raises(ValueError, match="unknown features"):
        feature_matrix("pairs", 40)
    np.testing.assert_array_equal(feature_matrix("agg8", 40).sum(axis=0), np.full(5, 8))
    assert np.linalg.norm(feature_matrix("agg2", 40), 2) == pytest.approx(math.sqrt(2))
    assert LSW(feature_matrix("agg2", 40)).lipschitz == pytest.approx(1 / math.sqrt(2))
