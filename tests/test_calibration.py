"""Noise calibration, radii and the ledger's honesty (Qiao & Wang; errata E2, E3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.ucbvi import union_radius
from privrl.config import RunConfig
from privrl.privacy.accountant import rho_to_epsilon
from privrl.privacy.privatizers import randomize_locally
from privrl.run import Run
from privrl.worlds.rollout import Trajectories


def radius_of(config: RunConfig) -> float:
    """DP-UCBVI's union-bound radius E for a configuration."""
    algorithm = bind(config)
    return union_radius(algorithm.calibration(), algorithm)


def paper_config(**kw) -> RunConfig:
    base = dict(n_states=6, n_actions=2, horizon=20, episodes=50_000, preset="faithful")
    return RunConfig(**{**base, **kw})


@pytest.mark.parametrize(
    ("eps", "paper_scale", "paper_radius"), [(1, 960, 244_096), (10, 96, 24_410)]
)
def test_jdp_laplace_matches_spec_appendix_a_with_replace_one_factor(
    eps, paper_scale, paper_radius
):
    """Strict (replace-one) calibration doubles the paper's node scale 3HL/eps and its E."""
    cfg = paper_config(privacy="jdp", epsilon=eps)
    cal = bind(cfg).calibration()
    assert cal.levels == 16
    assert cal.mechanism.scale == pytest.approx(2 * paper_scale)
    assert radius_of(cfg) == pytest.approx(2 * paper_radius, rel=2e-4)


@pytest.mark.parametrize(
    ("eps", "paper_scale", "paper_radius"), [(1, 60, 719_587), (5, 12, 143_917)]
)
def test_ldp_laplace_matches_spec_appendix_a_with_replace_one_factor(
    eps, paper_scale, paper_radius
):
    cfg = paper_config(privacy="ldp", epsilon=eps)
    cal = bind(cfg).calibration()
    assert cal.mechanism.scale == pytest.approx(2 * paper_scale)
    assert radius_of(cfg) == pytest.approx(2 * paper_radius, rel=2e-4)


def test_radius_decreases_with_eps_and_grows_with_k():
    radii = [radius_of(paper_config(privacy="jdp", epsilon=e)) for e in (0.5, 1, 5)]
    assert radii[0] > radii[1] > radii[2]
    assert (
        radius_of(paper_config(privacy="jdp", episodes=1000))
        < radius_of(paper_config(privacy="jdp", episodes=100_000))
    )
    assert radius_of(paper_config(privacy="jdp", epsilon=math.inf)) == 0


def _spend(config: RunConfig, episodes: int) -> Run:
    """Feed `episodes` dummy trajectories (or noisy reports) and return the run."""
    run = Run(config, [0])
    traj = Trajectories(np.zeros((1, 21), int), np.zeros((1, 20), int), np.zeros((1, 20)))
    for _ in range(episodes):
        if config.privacy == "ldp":
            stats = run.algorithm.user_statistics(traj, run.message())
            run.ingest_noisy(randomize_locally(stats, run.calibration, [np.random.default_rng(0)]))
        else:
            run.ingest_trajectories(traj, run.message())
    return run


@pytest.mark.parametrize("pairs", ["released", "derived"])
def test_jdp_ledger_reaches_exactly_epsilon_at_k(pairs):
    cfg = paper_config(privacy="jdp", epsilon=2.0, episodes=40, knobs={"pair_counts": pairs})
    run = _spend(cfg, 40)
    assert run.ledger.totals(1e-5).epsilon == pytest.approx(2.0)
    assert run.ledger.totals(1e-5).delta == 0
    # a level opens at t = 1, 2, 4, ..., 32: 6 levels of ceil(log2 40)+... = L = 6
    assert len(run.ledger) == 6 * len(run.calibration.families)


def test_jdp_ledger_grows_with_released_levels():
    cfg = paper_config(privacy="jdp", epsilon=2.0, episodes=64)
    half = _spend(cfg, 10).ledger.totals(1e-5).epsilon  # levels 0..3 of 7
    assert half == pytest.approx(2.0 * 4 / 7)


def test_gaussian_jdp_ledger_is_the_requested_eps_delta():
    cfg = paper_config(privacy="jdp", epsilon=1.0, delta=1e-5, mechanism="gaussian", episodes=33)
    totals = _spend(cfg, 33).ledger.totals(1e-5)
    assert totals.epsilon == pytest.approx(1.0, rel=1e-9)
    assert totals.epsilon <= 1.0 + 1e-12
    assert rho_to_epsilon(totals.rho, 1e-5) == pytest.approx(totals.epsilon)


def test_ldp_ledger_charges_one_report_per_user():
    cfg = paper_config(privacy="ldp", epsilon=3.0, episodes=5)
    run = _spend(cfg, 5)
    assert run.ledger.totals(1e-5).epsilon == pytest.approx(3.0)


def test_infinite_epsilon_is_recorded_as_infinite_spend():
    run = _spend(paper_config(privacy="jdp", epsilon=math.inf, episodes=4), 4)
    assert math.isinf(run.ledger.totals(1e-5).epsilon)


def test_gaussian_needs_delta_and_laplace_refuses_delta():
    with pytest.raises(ValueError, match="delta"):
        paper_config(privacy="jdp", mechanism="gaussian", delta=0.0)
    with pytest.raises(ValueError, match="pure"):
        paper_config(privacy="jdp", mechanism="laplace", delta=1e-5)


def test_pooled_sensitivity_is_larger_in_l2():
    per_step = bind(paper_config(privacy="jdp", mechanism="gaussian", delta=1e-5)).calibration()
    pooled = bind(paper_config(privacy="jdp", mechanism="gaussian", delta=1e-5,
                                        knobs={"pooled": True})).calibration()
    assert per_step.families[0].l2 == pytest.approx(math.sqrt(40))
    assert pooled.families[0].l2 == pytest.approx(math.sqrt(2) * 20)
    assert pooled.mechanism.sigma / per_step.mechanism.sigma == pytest.approx(math.sqrt(20))


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_local_randomizer_noise_has_the_declared_scale(mechanism):
    cfg = paper_config(
        privacy="ldp",
        epsilon=4.0,
        mechanism=mechanism,
        delta=1e-5 if mechanism == "gaussian" else 0.0,
    )
    cal = bind(cfg).calibration()
    zeros = {f.name: np.zeros((1, *f.shape)) for f in cal.families}
    rngs = [np.random.default_rng(seed) for seed in range(120)]
    noise = np.concatenate([randomize_locally(zeros, cal, [g])["sas"].ravel() for g in rngs])
    assert noise.size > 100_000
    assert noise.std() == pytest.approx(cal.mechanism.std(), rel=0.02)
    assert abs(noise.mean()) < 0.02 * cal.mechanism.std()
    if mechanism == "laplace":
        assert np.abs(noise).mean() == pytest.approx(cal.mechanism.scale, rel=0.02)
