"""Tests for privrl.privacy.mechanisms: noise scales, privacy maps, calibration and tail bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.privacy.mechanisms import Gaussian, Laplace, Mechanism
from privrl.privacy.noise import FLOAT_NOISE as FLOAT
from privrl.seeding import generator

N_DRAWS = 100_000


def _rng(*path: int | str) -> np.random.Generator:
    """A fixed-seed generator for one test."""
    return generator(20240601, "test_mechanisms", *path)


# ---------------------------------------------------------------------------------------------
# Noise has the declared scale
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [0.5, 3.0, 40.0])
def test_laplace_noise_has_declared_scale(b: float) -> None:
    """Laplace(b) draws (float backend): mean 0, mean |x| = b, variance 2 b^2."""
    mech = Laplace(scale=b, backend=FLOAT)
    x = mech.sample(_rng("lap", str(b)), N_DRAWS)
    assert x.shape == (N_DRAWS,)
    assert x.dtype == np.float64
    # std of the sample mean is sqrt(2) b / sqrt(N) ~ 0.0045 b; allow ~4.5 standard errors.
    assert abs(x.mean()) < 0.02 * b
    assert np.mean(np.abs(x)) == pytest.approx(b, rel=0.02)
    assert x.var() == pytest.approx(2.0 * b * b, rel=0.03)
    assert mech.std() == pytest.approx(math.sqrt(2.0) * b)
    assert x.std() == pytest.approx(mech.std(), rel=0.02)


@pytest.mark.parametrize("sigma", [0.5, 3.0, 40.0])
def test_gaussian_noise_has_declared_scale(sigma: float) -> None:
    """Gaussian(sigma) draws (float): mean 0, variance sigma^2, mean |x| = sigma sqrt(2/pi)."""
    mech = Gaussian(sigma=sigma, backend=FLOAT)
    x = mech.sample(_rng("gauss", str(sigma)), N_DRAWS)
    assert x.shape == (N_DRAWS,)
    assert abs(x.mean()) < 0.02 * sigma
    assert x.var() == pytest.approx(sigma * sigma, rel=0.03)
    assert np.mean(np.abs(x)) == pytest.approx(sigma * math.sqrt(2.0 / math.pi), rel=0.02)
    assert mech.std() == sigma


def test_sample_shapes_and_scalar() -> None:
    """Sampling accepts int and tuple shapes, including the scalar shape ()."""
    for mech in (Laplace(scale=1.0, backend=FLOAT), Gaussian(sigma=1.0, backend=FLOAT)):
        assert mech.sample(_rng("shape"), (2, 3, 4)).shape == (2, 3, 4)
        assert mech.sample(_rng("shape"), 5).shape == (5,)
        scalar = mech.sample(_rng("shape"), ())
        assert isinstance(scalar, np.ndarray) and scalar.shape == ()


def test_same_generator_state_same_numbers() -> None:
    """Same seed path, same noise; and noise is the scale times the same standard draws."""
    a = Laplace(scale=2.0, backend=FLOAT).sample(_rng("same"), 10)
    b = Laplace(scale=2.0, backend=FLOAT).sample(_rng("same"), 10)
    c = Laplace(scale=5.0, backend=FLOAT).sample(_rng("same"), 10)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(c, a * 2.5, rtol=1e-12)
    g1 = Gaussian(sigma=1.0, backend=FLOAT).sample(_rng("same-g"), 10)
    g3 = Gaussian(sigma=3.0, backend=FLOAT).sample(_rng("same-g"), 10)
    np.testing.assert_allclose(g3, 3.0 * g1, rtol=1e-12)


def test_zero_scale_means_no_noise_and_consumes_same_draws() -> None:
    """Scale 0 gives exact zeros and leaves the generator where a noisy draw would."""
    pairs = ((Laplace(0.0, FLOAT), Laplace(1.0, FLOAT)),
             (Gaussian(0.0, FLOAT), Gaussian(1.0, FLOAT)))
    for zero, noisy in pairs:
        r0, r1 = _rng("zero"), _rng("zero")
        assert np.all(zero.sample(r0, 7) == 0.0)
        noisy.sample(r1, 7)
        assert r0.random() == r1.random()


def test_infinite_scale_cannot_be_sampled() -> None:
    """A zero-budget calibration (infinite scale) refuses to sample instead of returning NaN."""
    with pytest.raises(ValueError, match="infinite"):
        Laplace.calibrate(0.0, 1.0).sample(_rng("inf"), 3)
    with pytest.raises(ValueError, match="infinite"):
        Gaussian.calibrate(0.0, 1.0).sample(_rng("inf"), 3)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_invalid_scales_rejected(bad: float) -> None:
    """Negative or NaN scales are a clear error."""
    with pytest.raises(ValueError):
        Laplace(scale=bad, backend=FLOAT)
    with pytest.raises(ValueError):
        Gaussian(sigma=bad, backend=FLOAT)


def test_kinds_and_union() -> None:
    """Each mechanism declares its privacy notion; Mechanism is their union."""
    assert Laplace.kind == "pure" and Laplace(1.0, FLOAT).kind == "pure"
    assert Gaussian.kind == "zcdp"
    assert isinstance(Laplace(1.0, FLOAT), Mechanism)
    assert isinstance(Gaussian(1.0, FLOAT), Mechanism)
    with pytest.raises(AttributeError):
        Laplace(1.0, FLOAT).scale = 2.0  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Privacy maps and calibration
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 7.0])
@pytest.mark.parametrize("sens", [1.0, 2.0, 40.0])
def test_laplace_calibrate_round_trip(eps: float, sens: float) -> None:
    """calibrate(eps, D1) has scale D1/eps and its privacy map gives eps back."""
    mech = Laplace.calibrate(eps, sens)
    assert mech.scale == pytest.approx(sens / eps, rel=1e-15)
    assert mech.epsilon(sens) == pytest.approx(eps, rel=1e-14)
    assert mech.epsilon(2.0 * sens) == pytest.approx(2.0 * eps, rel=1e-14)
    assert Laplace(scale=4.0, backend=FLOAT).epsilon(2.0) == 0.5


@pytest.mark.parametrize("rho", [1e-4, 0.0208199, 0.5, 1.0, 30.0])
@pytest.mark.parametrize("sens", [1.0, math.sqrt(2.0), 12.0])
def test_gaussian_calibrate_round_trip(rho: float, sens: float) -> None:
    """calibrate(rho, D2) has sigma = D2/sqrt(2 rho) and its privacy map gives rho back."""
    mech = Gaussian.calibrate(rho, sens)
    assert mech.sigma == pytest.approx(sens / math.sqrt(2.0 * rho), rel=1e-15)
    assert mech.rho(sens) == pytest.approx(rho, rel=1e-13)
    assert mech.rho(2.0 * sens) == pytest.approx(4.0 * rho, rel=1e-13)
    assert Gaussian(sigma=2.0, backend=FLOAT).rho(2.0) == 0.5


def test_infinite_budget_means_zero_noise() -> None:
    """eps = inf (rho = inf) calibrates to no noise, whose privacy map is inf again."""
    lap = Laplace.calibrate(math.inf, 3.0)
    gau = Gaussian.calibrate(math.inf, 3.0)
    assert lap.scale == 0.0 and gau.sigma == 0.0
    assert np.all(lap.sample(_rng("inf-eps"), 100) == 0.0)
    assert np.all(gau.sample(_rng("inf-rho"), 100) == 0.0)
    assert lap.epsilon(3.0) == math.inf and gau.rho(3.0) == math.inf
    assert lap.std() == 0.0 and gau.std() == 0.0


def test_degenerate_privacy_maps() -> None:
    """Zero sensitivity costs nothing; infinite scale costs nothing; zero budget -> inf scale."""
    assert Laplace(0.0, FLOAT).epsilon(0.0) == 0.0
    assert Gaussian(0.0, FLOAT).rho(0.0) == 0.0
    assert Laplace.calibrate(0.0, 1.0).scale == math.inf
    assert Laplace.calibrate(0.0, 1.0).epsilon(1.0) == 0.0
    assert Gaussian.calibrate(0.0, 1.0).sigma == math.inf
    assert Gaussian.calibrate(0.0, 1.0).rho(1.0) == 0.0
    assert Laplace.calibrate(1.0, 0.0).scale == 0.0
    assert Gaussian.calibrate(1.0, 0.0).sigma == 0.0
    with pytest.raises(ValueError):
        Laplace.calibrate(-1.0, 1.0)
    with pytest.raises(ValueError):
        Gaussian.calibrate(1.0, float("nan"))
    with pytest.raises(ValueError):
        Laplace(1.0, FLOAT).epsilon(-2.0)


@pytest.mark.parametrize("delta_l1", [1.0, 2.0, 6.0])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_laplace_exact_privacy_loss_from_densities(delta_l1: float, eps: float) -> None:
    """Max log density ratio of outputs on l1-neighbouring inputs equals D1/b exactly."""
    mech = Laplace.calibrate(eps, delta_l1)
    b = mech.scale
    # Two neighbouring query values in R^2 at l1 distance delta_l1 (split unevenly over coords).
    x = np.array([0.0, 0.0])
    x_prime = np.array([0.3 * delta_l1, -0.7 * delta_l1])
    assert np.abs(x - x_prime).sum() == pytest.approx(delta_l1)
    lo, hi = -3.0 * delta_l1 - 5.0 * b, 3.0 * delta_l1 + 5.0 * b
    g = np.linspace(lo, hi, 401)
    y = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)  # grid of outputs, shape (n, n, 2)

    def log_density(center: np.ndarray) -> np.ndarray:
        """Log density of center + iid Lap(b) noise at every grid point."""
        return np.sum(-np.abs(y - center) / b - math.log(2.0 * b), axis=-1)

    log_ratio = log_density(x) - log_density(x_prime)
    assert log_ratio.max() == pytest.approx(mech.epsilon(delta_l1), rel=1e-12)
    assert log_ratio.min() == pytest.approx(-mech.epsilon(delta_l1), rel=1e-12)
    assert mech.epsilon(delta_l1) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 5.0])
def test_gaussian_renyi_divergence_matches_rho(alpha: float) -> None:
    """Numerical Renyi divergence of order alpha between shifted Gaussians is alpha * rho."""
    sens, rho = 1.3, 0.4
    mech = Gaussian.calibrate(rho, sens)
    s = mech.sigma
    y = np.linspace(-40.0 * s, 40.0 * s + sens, 400_001)
    dy = y[1] - y[0]
    log_p = -0.5 * (y / s) ** 2 - math.log(s * math.sqrt(2.0 * math.pi))
    log_q = -0.5 * ((y - sens) / s) ** 2 - math.log(s * math.sqrt(2.0 * math.pi))
    z = alpha * log_p + (1.0 - alpha) * log_q
    m = z.max()
    d_alpha = (m + math.log(np.exp(z - m).sum() * dy)) / (alpha - 1.0)
    assert d_alpha == pytest.approx(alpha * mech.rho(sens), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# Tail bounds
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("delta", [0.05, 0.2])
def test_laplace_tail_bound_holds_empirically(m: int, delta: float) -> None:
    """Fraction of |sum of m Laplace draws| above the bound is at most delta."""
    mech = Laplace(scale=2.5, backend=FLOAT)
    draws = mech.sample(_rng("lap-tail", m, str(delta)), (N_DRAWS, m)).sum(axis=1)
    bound = mech.tail_bound(m, delta)
    lam = math.log(2.0 / delta)
    assert bound == pytest.approx(2.5 * math.sqrt(8.0 * lam) * max(math.sqrt(m), math.sqrt(lam)))
    assert np.mean(np.abs(draws) > bound) <= delta


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("delta", [0.05, 0.2])
def test_gaussian_tail_bound_holds_empirically(m: int, delta: float) -> None:
    """Fraction of |sum of m Gaussian draws| above the bound is at most delta (and not tiny)."""
    mech = Gaussian(sigma=1.7, backend=FLOAT)
    draws = mech.sample(_rng("gauss-tail", m, str(delta)), (N_DRAWS, m)).sum(axis=1)
    bound = mech.tail_bound(m, delta)
    assert bound == pytest.approx(1.7 * math.sqrt(m) * math.sqrt(2.0 * math.log(2.0 / delta)))
    frac = np.mean(np.abs(draws) > bound)
    assert frac <= delta
    assert frac >= delta / 20.0  # the Chernoff bound is loose but not absurdly so


def test_tail_bound_edge_cases() -> None:
    """m = 0 or zero noise gives bound 0; invalid m or delta is an error."""
    assert Laplace(3.0, FLOAT).tail_bound(0, 0.1) == 0.0
    assert Gaussian(3.0, FLOAT).tail_bound(0, 0.1) == 0.0
    assert Laplace(0.0, FLOAT).tail_bound(10, 0.1) == 0.0
    assert Gaussian(0.0, FLOAT).tail_bound(10, 0.1) == 0.0
    for bad_delta in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            Laplace(1.0, FLOAT).tail_bound(1, bad_delta)
        with pytest.raises(ValueError):
            Gaussian(1.0, FLOAT).tail_bound(1, bad_delta)
    with pytest.raises(ValueError):
        Laplace(1.0, FLOAT).tail_bound(-1, 0.1)
    with pytest.raises(ValueError):
        Gaussian(1.0, FLOAT).tail_bound(2.5, 0.1)  # type: ignore[arg-type]


def test_laplace_tail_bound_switches_regime() -> None:
    """For small m the ln(2/delta) term dominates; for large m the sqrt(m) term does."""
    mech = Laplace(scale=1.0, backend=FLOAT)
    delta = 1e-6
    lam = math.log(2.0 / delta)
    assert mech.tail_bound(1, delta) == pytest.approx(math.sqrt(8.0) * lam)
    big = 10_000
    assert mech.tail_bound(big, delta) == pytest.approx(math.sqrt(8.0 * lam * big))
