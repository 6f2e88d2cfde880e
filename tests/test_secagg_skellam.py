"""Skellam noise shares in secure aggregation (`privrl.trust.secagg.skellam`): the Renyi bound
of Agarwal, Kairouz & Liu against the exact divergence, the sampler's law and the closure of
shares under summation, the calibration and the ledger, and the choice against the discrete
Gaussian."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl import trust
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger, rdp_to_epsilon, rho_to_epsilon
from privrl.privacy.mechanisms import Gaussian
from privrl.seeding import noise_generator
from privrl.trust.secagg import skellam
from privrl.trust.secagg.boundary import CohortPrivatizer, share_sampler
from privrl.worlds import riverswim

special = pytest.importorskip("scipy.special")
stats = pytest.importorskip("scipy.stats")
MDP = riverswim(6)
ALPHAS = (2, 3, 4, 8, 32, 128)


def config(**kw: object) -> RunConfig:
    base = dict(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=60, privacy="secagg",
                epsilon=1.0, mechanism="gaussian", delta=1e-5, schedule="batch:20",
                knobs={"pooled": True})
    return RunConfig(**{**base, **kw})


def pmf(variance: float, support: int) -> np.ndarray:
    """Sk(variance) = Poisson(v / 2) - Poisson(v / 2) on -support .. support: e^-v I_|k|(v)."""
    return special.ive(np.abs(np.arange(-support, support + 1)), variance)


def exact_renyi(variance: float, shift: int, alpha: float) -> float:
    """D_alpha(Sk(variance) || Sk(variance) + shift), on the lattice (one coordinate)."""
    support = int(variance + 60 * math.sqrt(variance) + 60)
    p = pmf(variance, support)
    q = np.roll(p, shift)
    keep = (p > 0) & (q > 0) & (np.abs(np.arange(-support, support + 1)) < support - shift)
    logs = alpha * np.log(p[keep]) + (1 - alpha) * np.log(q[keep])
    top = logs.max()
    return float((top + math.log(np.exp(logs - top).sum())) / (alpha - 1))


def poisson_difference_pmf(variance: float, support: int) -> np.ndarray:
    """Sk(variance) on -support .. support by convolving the two Poisson(v / 2) laws directly
    (no Bessel function): a second, independent exact computation."""
    k = np.arange(0, 2 * support + 1)
    poisson = stats.poisson.pmf(k, variance / 2.0)
    law = np.convolve(poisson, poisson[::-1])  # law of X - Y on -2 support .. 2 support
    return law[support:3 * support + 1]


def exact_epsilon(variance: float, shift: int, delta: float) -> float:
    """The exact epsilon at `delta` of adding Sk(variance) to a query of sensitivity `shift`
    (one coordinate): the smallest eps with sum max(0, p - e^eps q) <= delta, both ways."""
    support = int(variance + 60 * math.sqrt(variance) + 60)
    p = pmf(variance, support)
    q = np.roll(p, shift)

    def hockey(eps: float) -> float:
        return max(float(np.maximum(0.0, p - math.exp(eps) * q).sum()),
                   float(np.maximum(0.0, q - math.exp(eps) * p).sum()))

    low, high = 0.0, 50.0
    for _ in range(80):
        mid = 0.5 * (low + high)
        low, high = (low, mid) if hockey(mid) <= delta else (mid, high)
    return high


def test_the_exact_pmf_two_ways() -> None:
    """The Bessel form e^-v I_|k|(v) is the law of Poisson(v / 2) - Poisson(v / 2)."""
    for v in (0.5, 3.0, 40.0):
        assert np.allclose(pmf(v, 80), poisson_difference_pmf(v, 80), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("variance", [0.5, 2.0, 10.0, 100.0])
@pytest.mark.parametrize("shifts", [(1,), (3,), (2, 1), (1, 1, 1, 1)])
def test_bound_dominates_the_exact_renyi_divergence(variance: float,
                                                    shifts: tuple[int, ...]) -> None:
    """The paper's bound is never below the exact Renyi divergence of a shifted Skellam vector
    (a sum over coordinates) at the integer orders it is proven for (and charged at)."""
    l1 = float(sum(shifts))
    l2 = math.sqrt(sum(s * s for s in shifts))
    for alpha in ALPHAS:
        exact = sum(exact_renyi(variance, s, alpha) for s in shifts)
        assert exact <= skellam.rdp(alpha, l1, l2, variance) * (1 + 1e-9)


def test_fractional_orders_are_refused() -> None:
    """The paper proves its bound at integer orders: a fractional or too small one is refused,
    and every order the run charges is an integer >= 2."""
    for alpha in (1.5, 2.5, 1):
        with pytest.raises(ValueError, match="integer orders"):
            skellam.rdp(alpha, 1.0, 1.0, 10.0)  # type: ignore[arg-type]
    assert all(isinstance(a, int) and a >= 2 for a in skellam.ORDERS)


@pytest.mark.parametrize("variance", [0.5, 4.0, 30.0, 400.0])
@pytest.mark.parametrize("delta", [1e-3, 2e-6])
def test_charged_epsilon_covers_the_exact_privacy_profile(variance: float,
                                                          delta: float) -> None:
    """The epsilon charged at delta (the integer-order curve, converted) is at least the
    exact epsilon of the one-coordinate Skellam mechanism at that delta."""
    charged = skellam.epsilon(skellam.rdp_curve(1.0, 1.0, variance), delta)
    assert exact_epsilon(variance, 1, delta) <= charged * (1 + 1e-9)


def test_bound_is_tight_for_wide_noise() -> None:
    """At variance 100 the bound is within 5% of the exact divergence, and the epsilon it
    charges within 1% of the continuous Gaussian's at the same variance: the correction is of
    order 1 / v^2."""
    for alpha in (2, 8):
        exact = exact_renyi(100.0, 1, alpha)
        assert exact >= 0.95 * skellam.rdp(alpha, 1.0, 1.0, 100.0)
    charged = skellam.epsilon(skellam.rdp_curve(1.0, 1.0, 100.0), 1e-5)
    assert charged == pytest.approx(rho_to_epsilon(1 / 200, 1e-5), rel=0.01)
    # the 1 / v^2 term as stated: the first branch, or 3 D1 / (2 v) where it is smaller
    assert skellam.rdp(2, 3.0, 3.0, 2.0) == pytest.approx(2 * 9 / 4 + min((27 + 18) / 16, 9 / 4))
    assert skellam.rdp(4, 1.0, 1.0, 50.0) == pytest.approx(4 / 100 + (7 + 6) / (4 * 2500))


def test_sampler_draws_the_skellam_law_and_shares_sum_to_one_skellam() -> None:
    """Sk(v) drawn from the given generator: mean 0, variance v, the Skellam pmf (chi-square);
    the sum of 8 shares Sk(v / 8) follows Sk(v); a generator is required and decides all."""
    v, n = 6.0, 200_000
    draws = skellam.Skellam(v).sample(np.random.default_rng(0), n)
    assert draws.dtype == np.int64
    assert abs(draws.mean()) < 5 * math.sqrt(v / n)
    assert draws.var() == pytest.approx(v, rel=0.02)
    summed = sum(skellam.Skellam(v / 8).sample(np.random.default_rng(1 + i), n) for i in range(8))
    for sample in (draws, summed):
        support = 12
        law = pmf(v, support)
        counts = np.bincount(np.clip(sample, -support, support) + support, minlength=law.size)
        law[0] += special.ive(np.arange(support + 1, 200), v).sum()  # clipped tails
        law[-1] += special.ive(np.arange(support + 1, 200), v).sum()
        chi2 = float(((counts - n * law) ** 2 / (n * law)).sum())
        assert chi2 < 52.6  # chi2(24), p = 0.001
    wrong = np.random.default_rng(0).poisson(v, n) - np.random.default_rng(9).poisson(v, n)
    counts = np.bincount(np.clip(wrong, -12, 12) + 12, minlength=25)
    assert float(((counts - n * law) ** 2 / (n * law)).sum()) > 1000  # the test has power
    again = skellam.Skellam(v).sample(np.random.default_rng(0), n)
    assert np.array_equal(draws, again)
    with pytest.raises(ValueError, match="seeded generator"):
        skellam.Skellam(v).sample(None, 3)


def test_tail_bounds_the_maximum() -> None:
    """P(|Sk(v)| > tail) <= p exactly, and the Skellam tail is at least the Gaussian's."""
    for v in (0.3, 4.0, 50.0):
        x = skellam.tail(v, 1, 1e-6)
        support = int(x) + 1000
        law = pmf(v, support)
        k = np.arange(-support, support + 1)
        assert law[np.abs(k) > x].sum() <= 1e-6
        assert x >= Gaussian(math.sqrt(v)).max_abs_bound(1, 1e-6) * 0.999
    assert skellam.tail(4.0, 1000, 1e-6) > skellam.tail(4.0, 1, 1e-6)


def test_calibration_charges_one_skellam_release() -> None:
    """By default each user's release is charged once for all its families: their Skellam
    Renyi curves at integer orders, converted at the run's delta, spend what the Gaussian
    calibration would (its epsilon there); a share has variance sigma^2 / n_min, and the
    ledger names the shares."""
    cal = bind(config()).calibration()
    spec = cal.cohort
    assert spec is not None and spec.noise == "skellam" and spec.honest_shares == 16
    assert spec.delta == 1e-5
    gaussian = bind(config(privacy="ldp", schedule=None)).calibration()
    spent = rho_to_epsilon(sum(f.cost for f in gaussian.families), 1e-5)
    for f, g in zip(cal.families, gaussian.families, strict=True):
        var = (f.scale / f.grid) ** 2
        assert f.cost == 0.0  # no zCDP rho: the families are charged together
        assert f.scale > g.scale  # widened by the 1 / v^2 term and the integer orders
        share = share_sampler(f, spec)
        assert share.std() ** 2 == pytest.approx(var / 16)
    priv = CohortPrivatizer(cal, 1, 60)
    (charge,) = priv.plan()
    assert charge.mechanism == "secagg:skellam" and charge.delta == 1e-5 and charge.rho == 0.0
    assert charge.epsilon <= spent and charge.epsilon == pytest.approx(spent, rel=1e-6)
    assert "16 honest skellam noise shares" in charge.note
    assert "integer orders" in charge.note
    for noise in ("skellam", "ddg"):  # the widening never overspends, not even by rounding
        for eps in (1.0, 3.0, 10.0):
            cfg = config(epsilon=eps, secagg_noise=noise, knobs={"pooled": False})
            ledger = Ledger()
            ledger.charge_all(CohortPrivatizer(bind(cfg).calibration(), 1, 60).plan())
            assert ledger.totals(1e-5).epsilon <= eps


def test_skellam_beats_the_discrete_gaussian_where_coordinates_are_many() -> None:
    """Per-step DP-UCBVI at eps = 10 (cohorts of 100): the discrete Gaussian's correction
    keeps the noise far above the Gaussian calibration; Skellam stays within 25% of it."""
    kw = dict(epsilon=10.0, episodes=5000, schedule="batch:100", knobs={"pooled": False})
    gauss = bind(config(privacy="ldp", **{**kw, "schedule": None})).calibration().families[0]
    ddg = bind(config(secagg_noise="ddg", **kw)).calibration().families[0]
    sk = bind(config(**kw)).calibration().families[0]
    assert sk.scale <= 1.25 * gauss.scale
    assert ddg.scale > 2.0 * sk.scale


def test_users_shares_come_from_their_own_streams() -> None:
    """A user's report is its grid units plus a Skellam share from its own noise stream: the
    same stream gives the same report, another stream another; the reports sum exactly."""
    cal = bind(config(episodes=20)).calibration()
    boundary = trust.get("secagg")
    stats = {f.name: np.ones((1, *f.shape)) for f in cal.families}
    one = boundary.randomize(stats, cal, [noise_generator(7, 0)], [noise_generator(7, 0)])
    same = boundary.randomize(stats, cal, [noise_generator(7, 0)], [noise_generator(7, 0)])
    other = boundary.randomize(stats, cal, [noise_generator(7, 1)], [noise_generator(7, 1)])
    assert one is not None and same is not None and other is not None
    for f in cal.families:
        assert np.array_equal(one[f.name], same[f.name])
        assert not np.array_equal(one[f.name], other[f.name])
        units = one[f.name] / f.grid
        assert np.allclose(units, np.round(units))  # on the grid: integer noise
    priv = CohortPrivatizer(cal, 1, 20)
    ledger = Ledger()
    reports = [boundary.randomize(stats, cal, [noise_generator(7, u)], [noise_generator(7, u)])
               for u in range(20)]
    for report in reports:
        priv.ingest(report, ledger)
    assert [r.outcome for r in priv.records] == ["released"]
    for f in cal.families:
        assert np.allclose(priv.release()[f.name], sum(r[f.name] for r in reports))


def test_refusals() -> None:
    with pytest.raises(ValueError, match="seeded numpy stream"):
        bind(config(noise="opendp")).calibration()
    with pytest.raises(ValueError, match="secure-aggregation"):  # at binding
        bind(RunConfig(**{**config(privacy="ldp", schedule=None).model_dump(),
                          "secagg_noise": "ddg"}))
    with pytest.raises(ValueError):
        config(secagg_noise="laplace")


def test_a_share_beyond_exact_integer_sampling_is_refused_at_creation() -> None:
    """UCRL-VTR+'s faithful preset at epsilon = 0.1 would ask each user for a Skellam share of
    variance ~1e21, beyond numpy's Poisson sampler: refused before the run, with the reason."""
    import pytest
    from privrl.config import RunConfig
    from privrl.lab.experiments import WorldSpec
    from privrl.run import Run
    from privrl.worlds.model_spec import model_spec_of

    mdp = WorldSpec("lm-hard", None, {}).build()
    config = RunConfig(algo="ucrl-vtr-plus", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                       model=model_spec_of(mdp), episodes=6, privacy="secagg", epsilon=0.1,
                       delta=1e-5, mechanism="gaussian", preset="faithful")
    with pytest.raises(ValueError, match="beyond exact integer sampling"):
        Run(config, [0])


def test_rdp_conversion_matches_zcdp_on_integer_orders() -> None:
    """A zCDP curve rho * alpha restricted to the integer orders converts to at least the
    real-order conversion's epsilon, and within 2% of it; malformed curves are refused."""
    orders = np.asarray(skellam.ORDERS, dtype=float)
    for rho in (1e-4, 0.03, 2.0):
        restricted = rdp_to_epsilon(skellam.ORDERS, rho * orders, 2e-6)
        assert rho_to_epsilon(rho, 2e-6) <= restricted <= 1.02 * rho_to_epsilon(rho, 2e-6)
    with pytest.raises(ValueError, match="order"):
        rdp_to_epsilon((1.0, 2.0), (0.1, 0.2), 1e-5)
    with pytest.raises(ValueError, match="non-negative"):
        rdp_to_epsilon((2.0,), (-0.1,), 1e-5)
