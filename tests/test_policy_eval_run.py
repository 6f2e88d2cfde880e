"""DP-LSW / DP-LSL as plug-ins: the release through `privrl.run.Run`, its ledger, what is (never)
released, the noise law on fixed data, restarts, and a privacy audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.policy_eval import estimators
from privrl.algorithms.policy_eval.estimators import LSL, LSW, smoothing_constants
from privrl.algorithms.policy_eval.features import feature_matrix
from privrl.privacy.tree import StoredNoiseError
from privrl.protocol import LedgerView
from privrl.run import Run
from privrl.seeding import generator
from privrl.worlds.chain import ChainMRP
from privrl.worlds.first_visit import FirstVisits
from support.policy_eval import (
    GOLDEN_KNOBS,
    clopper_pearson_upper,
    golden_data,
    hockey_stick,
    neighbours,
    pe_config,
    random_data,
    sums,
)

ALGOS = ("dp-lsw", "dp-lsl")


def feed(run: Run, data: FirstVisits) -> None:
    """Every replica receives the same m users, one report at a time."""
    replicas = len(run.seeds)
    message = run.message()
    for i in range(data.visited.shape[0]):
        row = FirstVisits(np.repeat(data.visited[i : i + 1], replicas, axis=0),
                          np.repeat(data.returns[i : i + 1], replicas, axis=0))
        run.ingest_trajectories(row, message)


def standard_normal(seed: int, d: int) -> np.ndarray:
    """The draws behind replica `seed`'s noise (a test may know a simulation seed)."""
    return generator(seed, "policy-eval", "theta").standard_normal(d)


@pytest.mark.parametrize(("algo", "knobs", "theta", "sigma"), [
    ("dp-lsw", {}, [1.629, 1.38, 1.0], 207.607427),
    ("dp-lsl", {"lam": 6.0}, [0.40725, 0.552, 0.25], 116.945122),
])
def test_golden_release_through_the_run(algo, knobs, theta, sigma) -> None:
    """Worked example end to end: theta_hat = theta + sigma z, z the seed's standard normals (float
    noise); with the default integer noise theta is rounded to the public grid 2^-30 and gets
    discrete Gaussian noise of the same sigma: the release lies on the grid."""
    run = Run(pe_config(algo, "jdp", 2, 3, epsilon=1.0, delta=0.1, noise="float",
                        **GOLDEN_KNOBS, **knobs), [11, 12])
    feed(run, golden_data())
    released = run.billboard()
    expected = np.array(theta)[None] + sigma * np.stack([standard_normal(s, 3) for s in (11, 12)])
    np.testing.assert_allclose(released["theta"], expected, rtol=1e-6)
    np.testing.assert_allclose(released["value"], released["theta"])  # Phi = I
    run = Run(pe_config(algo, "jdp", 2, 3, epsilon=1.0, delta=0.1, **GOLDEN_KNOBS, **knobs),
              [11, 12])
    feed(run, golden_data())
    units = run.billboard()["theta"] * 2.0**30
    assert np.array_equal(units, np.rint(units))
    assert np.all(np.abs(run.billboard()["theta"] - np.array(theta)[None]) < 6 * sigma)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("epsilon", [math.inf, 1e12])
def test_infinite_epsilon_equals_the_non_private_estimate_on_the_same_batch(algo, epsilon):
    chain = ChainMRP()
    data = chain.first_visits([generator(3, "user", k) for k in range(300)])
    plain = Run(pe_config(algo, "none", 300, 40), [1])
    with pytest.warns(UserWarning, match="> 5") if epsilon == 1e12 else _nothing():
        private = Run(pe_config(algo, "jdp", 300, 40, epsilon=epsilon), [1])
        feed(private, data)
    feed(plain, data)
    np.testing.assert_allclose(private.billboard()["theta"], plain.billboard()["theta"],
                               atol=1e-6, rtol=0)
    if math.isinf(epsilon):
        np.testing.assert_array_equal(private.billboard()["theta"], plain.billboard()["theta"])
    assert len(plain.ledger) == 0


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("algo", ALGOS)
def test_ledger_records_the_release_at_its_true_cost_once(algo: str) -> None:
    run = Run(pe_config(algo, "jdp", 5, 6, epsilon=0.3, delta=0.05), [4])
    data = random_data(generator(1), 5, 6, 1.0)
    feed(run, FirstVisits(data.visited[:4], data.returns[:4]))
    assert len(run.ledger) == 0 and run.billboard() == {}
    feed(run, FirstVisits(data.visited[4:], data.returns[4:]))
    (charge,) = run.ledger.entries
    assert (charge.mechanism, charge.epsilon, charge.delta, charge.rho) == (
        "smoothed-gaussian:theta", 0.3, 0.05, 0.0)
    assert charge.scale == 0.0 and charge.at == 5  # the data-dependent scale is not published
    totals = run.ledger.totals(run.config.accounting_delta)
    assert (totals.epsilon, totals.delta) == (0.3, 0.05)
    view = LedgerView.of("x", run.ledger, run.config.accounting_delta)
    assert view.epsilon == 0.3 and view.delta == 0.05
    first = run.billboard()
    for _ in range(3):  # reading again never draws or charges again
        again = run.billboard()
        np.testing.assert_array_equal(again["theta"], first["theta"])
    assert len(run.ledger) == 1
    with pytest.raises(RuntimeError, match="all 5 episodes"):
        feed(run, FirstVisits(data.visited[:1], data.returns[:1]))


@pytest.mark.parametrize("privacy", ["none", "jdp"])
def test_only_theta_and_its_value_are_released(privacy: str) -> None:
    """Never n, g, Fbar, psi or sigma; nothing before the m-th report."""
    run = Run(pe_config("dp-lsw", privacy, 3, 4), [1])
    data = random_data(generator(2), 3, 4, 1.0)
    feed(run, FirstVisits(data.visited[:2], data.returns[:2]))
    assert run.billboard() == {}
    feed(run, FirstVisits(data.visited[2:], data.returns[2:]))
    board = run.billboard()
    assert set(board) == {"theta", "value"}
    assert board["theta"].shape == (1, 4) and board["value"].shape == (1, 4)
    sigma = bind(pe_config("dp-lsw", "jdp", 3, 4)).noise_scale(3, sums(data)[0][None])
    assert f"{float(sigma[0]):.6g}"[:6] not in repr(run.ledger.to_dict())


@pytest.mark.slow  # statistical: 10^4 replicas of two estimators, chi-square bounds
def test_noise_law_on_fixed_data_matches_the_formula() -> None:
    """The noise law through the deployed release: 10^4 replicas, one fixed data set. The sample
    mean is theta_X, each coordinate's sample variance is sigma_X^2 (chi-square bounds), the
    mean squared norm is d sigma^2, and the mean excess risks match Lemmas 22 and 29."""
    replicas = 10_000
    data = random_data(generator(5, "law"), 8, 4, 1.0, p_visit=0.6)
    n, g = sums(data)
    for algo, knobs in (("dp-lsw", {}), ("dp-lsl", {"lam": 5.0})):
        run = Run(pe_config(algo, "jdp", 8, 4, epsilon=2.0, delta=0.1, features="agg2",
                            **knobs), list(range(replicas)))
        feed(run, data)
        theta_hat = run.billboard()["theta"]
        theta = run.algorithm.estimate(8, n, g)
        sigma = float(run.algorithm.noise_scale(8, n[None])[0])
        eta = theta_hat - theta
        d = eta.shape[1]
        assert (np.abs(eta.mean(axis=0)) < 5 * sigma / math.sqrt(replicas)).all()
        var = eta.var(axis=0, ddof=1) / sigma**2  # each ~ chi2_{R-1} / (R-1)
        assert (np.abs(var - 1) < 5 * math.sqrt(2 / (replicas - 1))).all()
        sq = (eta**2).sum(axis=1) / (d * sigma**2)
        assert abs(sq.mean() - 1) < 5 * math.sqrt(2 / (d * replicas))
        phi = feature_matrix("agg2", 4)
        if algo == "dp-lsw":
            excess = LSW(phi).excess_risk(eta)
            expected = sigma**2 * np.trace(phi.T @ phi)
        else:
            excess = LSL(phi, 5.0).excess_risk(eta, np.broadcast_to(n, (replicas, 4)), 8)
            expected = sigma**2 * (np.trace(phi.T @ np.diag(n / 8) @ phi) + 5.0 * d / 16)
        assert abs(excess.mean() / expected - 1) < 5 * excess.std() / expected / math.sqrt(
            replicas)


def test_unseeded_noise_is_journalled_and_replayed_never_redrawn() -> None:
    pytest.importorskip("opendp")
    config = pe_config("dp-lsw", "jdp", 3, 4, epsilon=1.0).model_copy(update={"noise": "opendp"})
    data = random_data(generator(6), 3, 4, 1.0)
    first = Run(config, [0])
    first.privatizer.journal_noise()
    feed(first, data)
    drawn = first.privatizer.take_drawn()
    assert len(drawn) == 1 and drawn[0].family == "theta"
    again = Run(config, [0])
    again.privatizer.begin_replay(drawn)
    feed(again, data)
    again.privatizer.end_replay()
    np.testing.assert_array_equal(again.billboard()["theta"], first.billboard()["theta"])
    missing = Run(config, [0])
    missing.privatizer.begin_replay([])
    with pytest.raises(StoredNoiseError, match="never re-drawn"):
        feed(missing, data)
    unused = Run(config, [0])
    unused.privatizer.begin_replay(drawn)
    with pytest.raises(StoredNoiseError, match="never used"):
        unused.privatizer.end_replay()


def test_returns_are_clipped_to_the_public_bound_and_impossible_ones_refused() -> None:
    algo = bind(pe_config("dp-lsw", "jdp", 3, 3, f_max=1.0, gamma=0.5))  # ceiling 2
    visits = FirstVisits(np.array([[True, True, False]]), np.array([[1.5, 0.25, 0.0]]))
    stats = algo.user_statistics(visits, {})
    np.testing.assert_array_equal(stats["returns"], [[1.0, 0.25, 0.0]])
    np.testing.assert_array_equal(stats["visits"], [[1.0, 1.0, 0.0]])
    for bad in (2.5, -0.1, math.nan):
        row = FirstVisits(np.array([[True, False, False]]), np.array([[bad, 0.0, 0.0]]))
        with pytest.raises(ValueError):
            algo.user_statistics(row, {})


@pytest.mark.parametrize(("changes", "match"), [
    ({"mechanism": "laplace", "delta": 0.0}, "mechanism='gaussian'"),
    ({"knobs": {"lam": 1.0}}, "lambda >"),
    ({"knobs": {"features": "pairs"}}, "features: String should match pattern"),
    ({"knobs": {"weights": [1.0, 1.0]}}, "one weight per state"),
    ({"knobs": {"constants": "appendix"}, "epsilon": 6.0}, "eps <= 5"),
])
def test_uncalibratable_runs_are_refused(changes, match) -> None:
    base = pe_config("dp-lsl", "jdp", 10, 4).model_dump()
    with pytest.raises(ValueError, match=match):  # at validation, or when the algorithm binds
        bind(type(pe_config("dp-lsl", "jdp", 10, 4)).model_validate({**base, **changes}))


# -- privacy audit ---------------------------------------------------------------------------------


def test_white_box_hockey_stick_matches_the_gaussian_closed_form() -> None:
    """Sanity of the audit's own quadrature: equal variances have a closed form."""
    from scipy.stats import norm

    d, dist, sigma, eps = 5, 0.8, 1.3, 0.4
    mu_q = np.zeros(d)
    mu_p = np.r_[dist, np.zeros(d - 1)]
    a = dist / sigma
    exact = norm.cdf(a / 2 - eps / a) - math.exp(eps) * norm.cdf(-a / 2 - eps / a)
    assert hockey_stick(eps, mu_p, sigma, mu_q, sigma) == pytest.approx(exact, abs=1e-7)


@pytest.mark.parametrize(("eps", "delta", "d"), [(0.1, 0.1, 40), (1.0, 1e-5, 40), (1.0, 0.1, 3)])
def test_white_box_audit_at_the_worst_case_lemma_1_allows(eps, delta, d) -> None:
    """sigma = alpha ||Delta|| on the smaller side and a variance ratio e^{+-beta}: the exact
    hockey-stick divergence is at most delta both ways (the mechanism is conservative)."""
    alpha, beta = smoothing_constants(eps, delta, d)
    for log_ratio in (-beta, 0.0, beta):
        s1, s2 = 1.0, math.exp(log_ratio / 2)
        dist = min(s1, s2) / alpha
        mu1, mu2 = np.zeros(d), np.r_[dist, np.zeros(d - 1)]
        assert hockey_stick(eps, mu1, s1, mu2, s2) <= delta
        assert hockey_stick(eps, mu2, s2, mu1, s1) <= delta
    # the same audit flags a broken calibration (alpha / 50): meta-test (iii)
    dist = 50 / alpha
    broken = hockey_stick(eps, np.zeros(d), 1.0, np.r_[dist, np.zeros(d - 1)], 1.0)
    assert broken > delta


def test_the_smoothed_gaussian_is_conservative_at_lemma_1s_worst_case() -> None:
    """Computed: at (eps, delta, d) = (1, 1e-5, 40) the tight epsilon of the worst
    case Lemma 1 allows is about 0.13-0.17; at (0.1, 0.1, 40) the divergence is about 0."""
    alpha, beta = smoothing_constants(1.0, 1e-5, 40)
    tight = max(
        tight_epsilon(np.zeros(40), 1.0, np.r_[min(1.0, s) / alpha, np.zeros(39)], s, 1e-5)
        for s in (math.exp(-beta / 2), 1.0, math.exp(beta / 2))
    )
    assert 0.12 < tight < 0.18
    alpha, beta = smoothing_constants(0.1, 0.1, 40)
    mu = np.r_[1.0 / alpha, np.zeros(39)]
    assert hockey_stick(0.1, np.zeros(40), 1.0, mu, math.exp(beta / 2)) < 1e-9


def tight_epsilon(mu1: np.ndarray, s1: float, mu2: np.ndarray, s2: float, delta: float) -> float:
    """The smallest eps with both hockey-stick divergences <= delta (bisection)."""
    lo, hi = 0.0, 50.0
    for _ in range(40):
        mid = (lo + hi) / 2
        ok = max(hockey_stick(mid, mu1, s1, mu2, s2, 4001),
                 hockey_stick(mid, mu2, s2, mu1, s1, 4001)) <= delta
        lo, hi = (lo, mid) if ok else (mid, hi)
    return hi


@pytest.mark.parametrize("algo", ALGOS)
def test_white_box_audit_on_adversarial_neighbours(algo: str) -> None:
    """Every adversarial neighbouring pair (support.policy_eval), through the plug-in's own
    estimate and noise scale:
    the exact divergence is <= delta both ways, and the tight epsilon is below the budget."""
    eps, delta, f_max, m = 1.0, 1e-5, 1.0, 6
    config = pe_config(algo, "jdp", m, 5, epsilon=eps, delta=delta, f_max=f_max)
    algorithm = bind(config)
    worst = 0.0
    for seed in range(4):
        data = random_data(generator(7, "audit", seed), m, 5, f_max, p_visit=0.4)
        for _, x, y in neighbours(data, f_max):
            (nx, gx), (ny, gy) = sums(x), sums(y)
            mx, my = algorithm.estimate(m, nx, gx), algorithm.estimate(m, ny, gy)
            sx = float(algorithm.noise_scale(m, nx[None])[0])
            sy = float(algorithm.noise_scale(m, ny[None])[0])
            assert hockey_stick(eps, mx, sx, my, sy) <= delta
            assert hockey_stick(eps, my, sy, mx, sx) <= delta
            worst = max(worst, tight_epsilon(mx, sx, my, sy, delta) if seed == 0 else 0.0)
    assert 0.0 < worst < eps


def black_box_epsilon(samples_x: np.ndarray, samples_y: np.ndarray, mu_x: np.ndarray,
                      mu_y: np.ndarray, delta: float, confidence: float = 0.95) -> float:
    """A lower bound on epsilon from thresholding the projection on mu_y - mu_x (Clopper-Pearson
    upper bounds on FPR and FNR, Bonferroni over the thresholds)."""
    u = (mu_y - mu_x) / np.linalg.norm(mu_y - mu_x)
    tx, ty = (samples_x - mu_x) @ u, (samples_y - mu_x) @ u
    thresholds = np.quantile(np.r_[tx, ty], np.linspace(0.05, 0.95, 19))
    alpha = (1 - confidence) / (2 * thresholds.size)
    best = -math.inf
    for t in thresholds:
        for pos_x, pos_y in ((tx > t, ty > t), (tx <= t, ty <= t)):
            fpr = clopper_pearson_upper(int(pos_x.sum()), tx.size, alpha)
            fnr = clopper_pearson_upper(int((~pos_y).sum()), ty.size, alpha)
            if 1 - delta - fnr > 0:
                best = max(best, math.log((1 - delta - fnr) / fpr))
    return best


def released_samples(config, data: FirstVisits, replicas: int, offset: int) -> np.ndarray:
    run = Run(config, list(range(offset, offset + replicas)))
    feed(run, data)
    return run.billboard()["theta"]


@pytest.mark.slow  # statistical: a black-box audit of 10^5 releases per neighbour
@pytest.mark.parametrize(("algo", "divisor"), [("dp-lsw", 50), ("dp-lsl", 200)])
def test_black_box_audit_and_its_meta_test(algo: str, divisor: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """10^5 releases on X and on X' (the neighbour that replaces a user's zero returns by F_max
    everywhere): eps_lb <= eps. Meta-test: with alpha / divisor the exact (white-box) divergence
    of this very pair exceeds delta, and with the noise omitted the black-box bound exceeds eps.

    DP-LSL's bound (Cor. 8) is about 15 times this pair's actual distance, so alpha / 50 stays
    private on it: 200 breaks it (alpha / 50 is flagged at Lemma 1's worst case above)."""
    eps, delta, f_max, m, replicas = 1.0, 1e-5, 1.0, 4, 100_000
    config = pe_config(algo, "jdp", m, 3, epsilon=eps, delta=delta, f_max=f_max)
    data = random_data(generator(8, "black"), m, 3, f_max, p_visit=0.5)
    pairs = {name: (x, y) for name, x, y in neighbours(data, f_max)}
    x, y = pairs["all states F_max vs returns 0"]
    algorithm = bind(config)
    mu_x, mu_y = algorithm.estimate(m, *sums(x)), algorithm.estimate(m, *sums(y))
    honest = black_box_epsilon(released_samples(config, x, replicas, 0),
                               released_samples(config, y, replicas, replicas), mu_x, mu_y, delta)
    assert honest <= eps
    real = estimators.smoothing_constants

    def broken(epsilon, delta_, d, mode="nrs"):
        alpha, beta = real(epsilon, delta_, d, mode)
        return alpha / divisor, beta

    monkeypatch.setattr(estimators, "smoothing_constants", broken)
    sx = float(algorithm.noise_scale(m, sums(x)[0][None])[0])
    sy = float(algorithm.noise_scale(m, sums(y)[0][None])[0])
    assert max(hockey_stick(eps, mu_x, sx, mu_y, sy), hockey_stick(eps, mu_y, sy, mu_x, sx)) > delta
    monkeypatch.setattr(estimators, "smoothing_constants", lambda *a, **k: (0.0, math.inf))
    silent = black_box_epsilon(released_samples(config, x, 100, 0),
                               released_samples(config, y, 100, 100), mu_x, mu_y, delta)
    assert silent > eps
