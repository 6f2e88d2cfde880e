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
from privrl.privacy.accountant import Ledger
from privrl.privacy.mechanisms import Gaussian
from privrl.seeding import noise_generator
from privrl.trust.secagg import skellam
from privrl.trust.secagg.boundary import CohortPrivatizer, share_sampler
from privrl.worlds import riverswim

special = pytest.importorskip("scipy.special")
MDP = riverswim(6)
ALPHAS = (1.01, 1.5, 2.0, 3.0, 8.0, 32.0, 128.0)


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


@pytest.mark.parametrize("variance", [0.5, 2.0, 10.0, 100.0])
@pytest.mark.parametrize("shifts", [(1,), (3,), (2, 1), (1, 1, 1, 1)])
def test_bound_dominates_the_exact_renyi_divergence(variance: float,
                                                    shifts: tuple[int, ...]) -> None:
    """The paper's bound (and alpha times the rho it yields) is never below the exact Renyi
    divergence of a shifted Skellam vector (a sum over coordinates), at every order tried,
    integer or not."""
    l1 = float(sum(shifts))
    l2 = math.sqrt(sum(s * s for s in shifts))
    rho = skellam.rho(l1, l2, variance)
    for alpha in ALPHAS:
        exact = sum(exact_renyi(variance, s, alpha) for s in shifts)
        assert exact <= skellam.rdp(alpha, l1, l2, variance) * (1 + 1e-9)
        assert exact <= alpha * rho * (1 + 1e-9)


def test_bound_is_tight_for_wide_noise() -> None:
    """At variance 100 the bound is within 5% of the exact divergence, and rho within 4% of
    the Gaussian's D2^2 / (2 v): the correction is of order 1 / v^2."""
    for alpha in (2.0, 8.0):
        exact = exact_renyi(100.0, 1, alpha)
        assert exact >= 0.95 * skellam.rdp(alpha, 1.0, 1.0, 100.0)
    assert skellam.rho(1.0, 1.0, 100.0) == pytest.approx(1 / 200, rel=0.04)
    assert skellam.rho(1.0, 1.0, 100.0) > 1 / 200
    # the 1 / v^2 term as stated: (D2^2 + 6 D1) / (4 v^2) when 6 D1 >= D2^2, else 2 D2^2 / ...
    assert skellam.rho(3.0, 3.0, 2.0) == pytest.approx(9 / 4 + (9 + 18) / 16)
    assert skellam.rho(1.0, 3.0, 2.0) == pytest.approx(9 / 4 + 18 / 16)


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


def test_calibration_charges_one_skellam_mechanism() -> None:
    """By default every family is charged one Skellam mechanism of the cohort variance, the
    costs add up to the Gaussian budget, a share has variance sigma^2 / n_min, and the ledger
    names the shares; the run spends at most its epsilon."""
    cal = bind(config()).calibration()
    spec = cal.cohort
    assert spec is not None and spec.noise == "skellam" and spec.honest_shares == 16
    gaussian = bind(config(privacy="ldp", schedule=None)).calibration()
    budget = sum(f.cost for f in gaussian.families)
    assert sum(f.cost for f in cal.families) == pytest.approx(budget, rel=1e-9)
    for f, g in zip(cal.families, gaussian.families, strict=True):
        var = (f.scale / f.grid) ** 2
        assert f.cost == pytest.approx(skellam.rho(f.l1 / f.grid, f.l2 / f.grid, var))
        assert f.scale > g.scale  # widened by the 1 / v^2 term, a little
        share = share_sampler(f, spec)
        assert share.std() ** 2 == pytest.approx(var / 16)
    priv = CohortPrivatizer(cal, 1, 60)
    notes = " ".join(c.note for c in priv.plan())
    assert "16 honest skellam noise shares" in notes
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
