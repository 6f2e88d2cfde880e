"""Integer noise on public grids: the samplers, randomized rounding, integer trees, and releases
that are integers times the grid step for every family (architecture, contract 7)."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from itertools import accumulate

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy import discrete, grid
from privrl.privacy.accountant import Ledger
from privrl.privacy.discrete import (
    TABLE_CAP,
    discrete_gaussian,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_variance,
    gaussian_table,
)
from privrl.privacy.grid import (
    FEATURE_GRID,
    EpisodeRounding,
    exact_units,
    randomized_round,
    released_coordinates,
    round_by,
    rounding_slack,
)
from privrl.privacy.mechanisms import Gaussian, Laplace
from privrl.privacy.noise import SIMULATION_ONLY, noise_label
from privrl.privacy.privatizers import Central, randomize_locally
from privrl.privacy.psd import SymmetricNoise
from privrl.privacy.tree import TreeCounter, improve_integer, smoothed_variance
from privrl.run import Run
from privrl.seeding import STREAM_EPISODES, episode_rows, generator
from privrl.worlds import riverswim
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.registry import make
from support.discrete import pmf_pvalue

N = 100_000


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.5, 40.0])
def test_discrete_laplace_follows_its_pmf(scale: float) -> None:
    x = discrete_laplace(generator(1, "dlap", str(scale)), scale, N)
    assert x.dtype == np.int64 and x.shape == (N,)
    assert pmf_pvalue(x, lambda k: np.exp(-np.abs(k) / scale)) > 1e-4
    assert x.var() == pytest.approx(discrete_laplace_variance(scale), rel=0.05)
    assert pmf_pvalue(x, lambda k: np.exp(-np.abs(k) / (1.3 * scale))) < 1e-6


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.5, 30.0])
def test_discrete_gaussian_follows_its_pmf(sigma: float) -> None:
    """10 N draws: at sigma = 0.3 the variance's standard error is then 1.1% (3.6% with N)."""
    x = discrete_gaussian(generator(2, "dgauss", str(sigma)), sigma, 10 * N)
    assert x.dtype == np.int64
    assert pmf_pvalue(x, lambda k: np.exp(-k * k / (2 * sigma**2))) > 1e-4
    assert x.var() == pytest.approx(discrete_gaussian_variance(sigma), rel=0.06)
    assert pmf_pvalue(x, lambda k: np.exp(-k * k / (2 * (1.25 * sigma) ** 2))) < 1e-6


def _closed_form(sigma: float, radius: int) -> tuple[np.ndarray, int]:
    """exp(-x^2 / 2 sigma^2) / Z for |x| <= radius, Z summed by fsum over |x| <= 12 sigma + 40;
    and M, the smallest integer with P(|X| > M) < 2^-64."""
    wide = int(12 * sigma) + 40
    k = np.arange(-wide, wide + 1, dtype=np.float64)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    z = math.fsum(w)
    beyond = 2.0 * np.cumsum(w[::-1])[::-1][wide + 1:] / z  # beyond[m] = P(|X| > m)
    m = int(np.flatnonzero(beyond < 2.0**-64)[0])
    return w[np.abs(k) <= radius] / z, m


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.3, 100.0, TABLE_CAP])
def test_gaussian_table_matches_the_closed_form(sigma: float) -> None:
    table = gaussian_table(sigma)
    q = table.masses()
    assert sum(q) == 2**64 and len(q) == 2 * table.radius + 1
    p, m = _closed_form(sigma, table.radius + 1)
    assert p[0] * 2**64 < 0.5 and q[0] > 0 and table.radius <= m  # only 0s cut
    p = p[1:-1]
    implied = np.array([float(Fraction(v, 2**64)) for v in q])
    assert np.all(np.abs(implied - p) <= 1e-12 * p + 2.0**-64)  # relative 1e-12, or the grid
    big = p > 1e-6  # where the grid 2^-64 is below a relative 1e-13
    assert np.allclose(implied[big], p[big], rtol=1e-12, atol=0.0)
    assert table.thresholds.dtype == np.uint64 and table.thresholds.size == 2 * table.radius


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.3, 100.0])
def test_gaussian_table_is_within_its_total_variation_bound(sigma: float) -> None:
    """The documented bound 2^-49 + (M + 1) 2^-64 holds against the law in 40-digit decimals."""
    table = gaussian_table(sigma)
    m = _closed_form(sigma, 0)[1]
    with localcontext() as ctx:
        ctx.prec = 40
        two_var = 2 * Decimal(sigma) ** 2
        wide = int(12 * sigma) + 40
        w = {x: (-Decimal(x * x) / two_var).exp() for x in range(-wide, wide + 1)}
        z = sum(w.values())
        one = Decimal(2) ** 64
        r = table.radius
        tv = sum(abs(Decimal(q) / one - w[x] / z)
                 for x, q in zip(range(-r, r + 1), table.masses(), strict=True))
        tv = (tv + sum(v for x, v in w.items() if abs(x) > r) / z) / 2
        assert tv <= Decimal(2) ** -49 + (m + 1) / one


@pytest.mark.parametrize("sigma", [0.05, 0.7, 5.0, 1500.0, TABLE_CAP])
def test_gaussian_table_maps_each_uniform_to_its_interval(sigma: float) -> None:
    """x is drawn when q_{-M} + ... + q_{x-1} <= u < q_{-M} + ... + q_x, at every interval's
    ends and for random u."""
    table = gaussian_table(sigma)
    ends = np.array(list(accumulate(table.masses()))[:-1], dtype=object)
    pick = np.random.default_rng(0).choice(len(ends), min(len(ends), 3000), replace=False)
    u = [0, 2**64 - 1, *(ends[pick] - 1), *ends[pick]]
    u += np.random.default_rng(1).integers(0, 2**64 - 1, 3000, np.uint64, True).tolist()
    got = table.locate(np.array(u, dtype=np.uint64))
    want = np.searchsorted(ends, np.array(u, dtype=object), side="right") - table.radius
    assert np.array_equal(got, want.astype(np.int64))


def _fourth_moment(sigma: float) -> float:
    """E[X^4] of the discrete Gaussian."""
    k = np.arange(-int(12 * sigma) - 40, int(12 * sigma) + 41, dtype=np.float64)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    return math.fsum(w * k**4) / math.fsum(w)


@pytest.mark.parametrize("sigma", [0.7, 5.0])
def test_discrete_gaussian_table_draws_pass_goodness_of_fit(sigma: float) -> None:
    n = 2_000_000
    x = discrete_gaussian(generator(8, "dgauss-table", str(sigma)), sigma, n)
    assert sigma <= TABLE_CAP and x.dtype == np.int64 and x.shape == (n,)
    assert pmf_pvalue(x, lambda k: np.exp(-k * k / (2 * sigma**2))) > 1e-4
    var = discrete_gaussian_variance(sigma)
    se = math.sqrt((_fourth_moment(sigma) - var**2) / n)
    assert abs(float(np.mean(x.astype(np.float64) ** 2)) - var) < 4 * se
    assert abs(x.mean()) < 4 * math.sqrt(var / n)


def test_discrete_gaussian_above_the_cap_uses_rejection(monkeypatch) -> None:
    def refuse(sigma: float) -> None:
        raise AssertionError("no table above the cap")

    monkeypatch.setattr(discrete, "gaussian_table", refuse)
    sigma, n = TABLE_CAP * 1.001, 200_000
    x = discrete_gaussian(generator(9, "dgauss-above"), sigma, (n // 2, 2))
    assert x.dtype == np.int64 and x.shape == (n // 2, 2)
    assert abs(x.mean()) < 4 * sigma / math.sqrt(n)
    assert abs(x.var() / sigma**2 - 1) < 4 * math.sqrt(2 / n)
    with pytest.raises(AssertionError, match="no table"):
        discrete_gaussian(generator(9, "dgauss-above"), TABLE_CAP, 3)


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1500.0, TABLE_CAP * 2])
def test_discrete_gaussian_is_seeded_and_keeps_its_shape(sigma: float) -> None:
    a = discrete_gaussian(generator(6, "dgauss-shape"), sigma, (3, 4, 5))
    b = discrete_gaussian(generator(6, "dgauss-shape"), sigma, (3, 4, 5))
    assert a.dtype == np.int64 and a.shape == (3, 4, 5) and np.array_equal(a, b)
    assert discrete_gaussian(generator(6, "dgauss-shape"), sigma, 7).shape == (7,)
    assert not np.array_equal(a, discrete_gaussian(generator(7, "dgauss-shape"), sigma,
                                                   (3, 4, 5)))
    zero = discrete_gaussian(generator(6, "dgauss-shape"), 0.0, (2, 3))
    assert zero.dtype == np.int64 and zero.shape == (2, 3) and not zero.any()


def test_discrete_variances_are_below_the_continuous_ones() -> None:
    for s in (0.5, 1.0, 3.0, 100.0):
        assert discrete_laplace_variance(s) < 2 * s * s
        assert discrete_gaussian_variance(s) <= s * s * (1 + 1e-12)
    assert discrete_gaussian_variance(20.0) == pytest.approx(400.0, rel=1e-12)


def test_integer_draws_are_seeded_and_zero_scale_is_zero() -> None:
    for mech in (Laplace(2.5), Gaussian(2.5)):
        assert mech.integer and mech.reproducible
        a, b = mech.sample(generator(5, "x"), (3, 4)), mech.sample(generator(5, "x"), (3, 4))
        assert a.dtype == np.int64 and np.array_equal(a, b)
    assert not Laplace(0.0).sample(generator(5, "x"), 7).any()
    assert not Gaussian(0.0).sample(generator(5, "x"), 7).any()


def test_randomized_rounding_is_unbiased_and_within_one_step() -> None:
    x = np.array([0.3, -1.7, 2.0, 1e-9, -0.5])
    rng = generator(3, "round")
    draws = np.stack([randomized_round(x, 0.25, rng) for _ in range(20_000)])
    assert draws.dtype == np.int64
    assert np.all(np.abs(draws * 0.25 - x) < 0.25)
    assert np.allclose(draws.mean(axis=0) * 0.25, x, atol=0.01)
    assert np.all(draws[:, 2] == 8)  # on the grid already: exact
    sym = np.array([[0.31, 0.77], [0.77, 0.05]])
    for _ in range(50):
        units = randomized_round(sym, 0.5, rng, symmetric=True)
        assert np.array_equal(units, units.T)


ROUND_SEEDS = [7, 2**70 + 3]
ROUND_EPISODES = STREAM_EPISODES + 6  # past the first block's stream


def _round_values(episode: int) -> np.ndarray:
    """Two replicas' clean items of one episode: a (2, 3, 3) symmetric family off the grid."""
    x = np.random.default_rng(episode).uniform(-2.0, 2.0, (len(ROUND_SEEDS), 2, 3, 3))
    return x + np.swapaxes(x, -1, -2)


def test_episode_rounding_depends_only_on_seed_family_and_episode(monkeypatch) -> None:
    """Replica r's item of episode k is rounded by row k of its ("grid", family) rows, whether
    the episodes come one after another, the process starts afresh at k (a restart), the rows
    are drawn in other chunks, or the replica runs alone."""
    g = 0.125
    along = EpisodeRounding(ROUND_SEEDS, "gram", (2, 3, 3), g, True)
    seq = np.stack([along.units(_round_values(k), k) for k in range(ROUND_EPISODES)])
    assert seq.dtype == np.int64 and np.array_equal(seq, np.swapaxes(seq, -1, -2))
    values = np.stack([_round_values(k) for k in range(ROUND_EPISODES)])
    assert np.all(np.abs(seq * g - values) < g)
    monkeypatch.setattr(grid, "ROUNDING_CHUNK", 5 * 18)  # five episodes a chunk
    chunked = EpisodeRounding(ROUND_SEEDS, "gram", (2, 3, 3), g, True)
    assert np.array_equal(seq, [chunked.units(_round_values(k), k)
                                for k in range(ROUND_EPISODES)])
    for k in (0, 1, 700, STREAM_EPISODES - 1, STREAM_EPISODES, ROUND_EPISODES - 1):
        fresh = EpisodeRounding(ROUND_SEEDS, "gram", (2, 3, 3), g, True)
        assert np.array_equal(fresh.units(_round_values(k), k), seq[k])
        for r, seed in enumerate(ROUND_SEEDS):
            alone = EpisodeRounding([seed], "gram", (2, 3, 3), g, True)
            assert np.array_equal(alone.units(_round_values(k)[r:r + 1], k)[0], seq[k, r])
            row = episode_rows(seed, ("grid", "gram"), k, 1, 18)[0].reshape(2, 3, 3)
            assert np.array_equal(round_by(_round_values(k)[r], g, row, True), seq[k, r])
    other = EpisodeRounding(ROUND_SEEDS, "target", (2, 3, 3), g, True)
    assert not np.array_equal(other.units(_round_values(3), 3), seq[3])  # its own stream


def test_a_rebuilt_central_rounds_every_item_as_before() -> None:
    """A server replays stored reports into a fresh Central: every release comes out the same,
    and each replica's releases are those of a Central of its seed alone."""
    cal = bind(_linear_config(episodes=40)).calibration()
    assert cal.integer and all(f.rounded for f in cal.families)
    rng = np.random.default_rng(2)
    reports = [{f.name: rng.uniform(0.0, 1.0, (2, *f.shape)) for f in cal.families}
               for _ in range(40)]

    def releases(seeds: list[int], replicas: slice) -> list[dict[str, np.ndarray]]:
        central, out = Central(cal, seeds, 40), []
        for report in reports:
            central.ingest({k: v[replicas] for k, v in report.items()}, Ledger())
            out.append(central.release())
        return out

    both = releases([11, 12], slice(None))
    again = releases([11, 12], slice(None))
    first, second = releases([11], slice(0, 1)), releases([12], slice(1, 2))
    for t in range(40):
        for name in cal.released:
            assert np.array_equal(both[t][name], again[t][name])
            assert np.array_equal(both[t][name], np.concatenate([first[t][name],
                                                                 second[t][name]]))


def test_exact_units_refuses_values_off_the_grid() -> None:
    assert exact_units(np.array([1.0, -3.0, 0.0]), 1.0).tolist() == [1, -3, 0]
    assert exact_units(np.array([0.75]), 0.25).tolist() == [3]
    for bad in ([0.005], [2.0, np.nan]):
        with pytest.raises(ValueError, match="off the public grid"):
            exact_units(np.array(bad), 1.0)


def test_rounding_slack_counts_released_coordinates() -> None:
    assert released_coordinates((5, 3, 3), True) == 5 * 6
    assert released_coordinates((5, 3), False) == 15
    l1, l2 = rounding_slack((5, 3, 3), FEATURE_GRID, True)
    assert l1 == 2 * 30 * FEATURE_GRID and l2 == pytest.approx(2 * math.sqrt(30) * FEATURE_GRID)


HARD = make("lm-hard")


def _linear_config(**kw) -> RunConfig:
    """UCRL-VTR on LM-Hard with Gaussian noise (JDP unless `privacy` says otherwise)."""
    base = dict(algo="ucrl-vtr", n_states=HARD.S, n_actions=HARD.A, horizon=HARD.H,
                model=model_spec_of(HARD), episodes=64, privacy="jdp", mechanism="gaussian",
                delta=1e-5, epsilon=5.0, counter="smoothed")  # the same counter for both noises
    return RunConfig(**{**base, **kw})


def test_calibration_adds_the_rounding_slack_under_integer_noise_only() -> None:
    ints = bind(_linear_config()).calibration()
    floats = bind(_linear_config(noise="float")).calibration()
    for name in ("gram", "target"):
        i, f = ints.family(name), floats.family(name)
        assert i.rounded and i.grid == FEATURE_GRID
        l1, l2 = rounding_slack(f.shape, f.grid, f.symmetric)
        assert i.l1 == pytest.approx(f.l1 + l1) and i.l2 == pytest.approx(f.l2 + l2)
    assert ints.integer and not floats.integer
    assert ints.noise_scale > floats.noise_scale  # the slack is paid in noise, never hidden


def test_integer_tree_is_exact_without_noise_and_rebuilds_identically() -> None:
    rng = np.random.default_rng(4)
    items = rng.integers(0, 4, size=(40, 2, 3))
    for smooth in (False, True):
        zero = TreeCounter((3,), Laplace(0.0), [1, 2], "x", 64, smooth)
        a = TreeCounter((3,), Gaussian(2.5), [1, 2], "x", 64, smooth)
        b = TreeCounter((3,), Gaussian(2.5), [1, 2], "x", 64, smooth)
        for t, item in enumerate(items):
            for tree in (zero, a, b):
                tree.add(item)
            assert np.array_equal(zero.release(), items[: t + 1].sum(axis=0))
            assert a.release().dtype == np.int64
            assert np.array_equal(a.release(), b.release())
    with pytest.raises(ValueError, match="off the public grid"):
        a.add(np.full((2, 3), 0.5))


def test_integer_smoothing_is_the_rounded_exact_combination() -> None:
    rng = np.random.default_rng(9)
    for level in range(1, 12):
        own, left, right = (rng.integers(-10**6, 10**6, 50) for _ in range(3))
        got = improve_integer(level, own, left, right)
        w = Fraction(smoothed_variance(level)).limit_denominator(1 << 20)
        assert w == Fraction(1 << level, (2 << level) - 1)
        for i in range(50):
            exact = w * int(own[i]) + (1 - w) * (int(left[i]) + int(right[i]))
            assert got[i] == math.floor(exact + Fraction(1, 2))
    big = np.array([2**56 // 3, -(2**56 // 5)])  # beyond int64 room: Python integers take over
    out = improve_integer(20, big, big, big)
    w = Fraction(1 << 20, (2 << 20) - 1)
    want = [math.floor(w * int(v) + (1 - w) * 2 * int(v) + Fraction(1, 2)) for v in big]
    assert out.tolist() == want


def test_symmetric_integer_noise_is_mirrored() -> None:
    noise = SymmetricNoise(Gaussian(3.0))
    draw = noise.sample(generator(1, "sym"), (2, 4, 4))
    assert draw.dtype == np.int64 and np.array_equal(draw, np.swapaxes(draw, -1, -2))


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_every_release_is_an_integer_times_its_grid(privacy: str) -> None:
    """DP-UCBVI (counts) and UCRL-VTR (features) release integers times the public grid."""
    mdp = riverswim(10)
    tab = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=30,
                    privacy=privacy, epsilon=1.0)
    lin = _linear_config(privacy=privacy)
    for config, env in ((tab, mdp), (lin, HARD)):
        run = Run(config, [5])
        for k in range(9):
            run.play_and_ingest(env, [17], k)
        for f in run.calibration.families:
            units = run.privatizer.release()[f.name] / f.grid
            assert np.array_equal(units, np.rint(units)), f.name
            assert np.abs(units).max() < 2**53


def test_users_randomized_together_report_what_each_reports_alone() -> None:
    """Each user's row is its own: rounded with its generator's uniforms, then noised from the
    same generator (`FamilyCalibration.to_units`, then the sampler's `add`), family by family,
    whoever else is randomized in the same call."""
    cal = bind(_linear_config(privacy="ldp", epsilon=40.0)).calibration()
    assert cal.integer
    rng = np.random.default_rng(3)
    stats = {f.name: rng.uniform(-1.0, 1.0, (3, *f.shape)) for f in cal.families}
    together = randomize_locally(stats, cal, [generator(r, "user") for r in range(3)])
    for r in range(3):
        own = generator(r, "user")
        for f in cal.families:
            expected = cal.sampler(f.name).add(own, f.to_units(stats[f.name][r], own)) * f.grid
            assert np.array_equal(together[f.name][r], expected), (r, f.name)
        alone = randomize_locally({k: v[r:r + 1] for k, v in stats.items()}, cal,
                                  [generator(r, "user")])
        assert all(np.array_equal(alone[k][0], together[k][r]) for k in together)


def test_users_report_bernoulli_rewards_under_integer_noise_only() -> None:
    mdp = riverswim(10)
    kw = dict(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=30, privacy="jdp")
    ints, floats = Run(RunConfig(**kw), [1]), Run(RunConfig(**kw, noise="float"), [1])
    rewards_int = np.concatenate([ints.play_and_ingest(mdp, [3], k).rewards for k in range(30)])
    rewards_float = np.concatenate([floats.play_and_ingest(mdp, [3], k).rewards
                                    for k in range(30)])
    assert set(np.unique(rewards_int)) <= {0.0, 1.0}
    assert not set(np.unique(rewards_float)) <= {0.0, 1.0}  # RiverSwim pays 0.005 on the left


def test_float_noise_is_labelled_simulation_only_in_the_ledger() -> None:
    mdp = riverswim(10)
    kw = dict(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=4, privacy="jdp")
    run = Run(RunConfig(**kw, noise="float"), [1])
    run.play_and_ingest(mdp, [3], 0)
    assert run.ledger.noise_backends() == [noise_label("float")]
    assert SIMULATION_ONLY in noise_label("float") and "Mironov 2012" in SIMULATION_ONLY
    run = Run(RunConfig(**kw), [1])
    run.play_and_ingest(mdp, [3], 0)
    assert run.ledger.noise_backends() == ["numpy"]
