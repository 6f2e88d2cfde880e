"""DP-UCBVI: edge cases, bonus terms by hand, monotone optimistic Q, eps -> inf, learning."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.ucbvi.counts import family_shapes, tabular_counts
from privrl.algorithms.ucbvi.learner import DPUCBVI, iota
from privrl.config import RunConfig
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds import (
    garnet,
    optimal_q,
    optimal_return,
    riverswim,
    rollout,
    uniform_random_return,
)
from support.projection import project_counts
from support.ucbvi_reference import static_bonus

RIVER = riverswim(20)


def cfg(**kw) -> RunConfig:
    base = dict(n_states=6, n_actions=2, horizon=20, episodes=400, preset="practical")
    if kw.get("privacy", "jdp") == "jdp":  # the tree every episode: the mechanics checked here
        base.update(counter="tree" if kw.get("preset") == "faithful" else "smoothed",
                    schedule="every")
    return RunConfig(**{**base, **kw})


def test_iota_matches_appendix_a():
    c = cfg(episodes=50_000, beta=0.1)
    assert iota(c) == pytest.approx(math.log(7.2e10), rel=1e-12)
    assert iota(c) == pytest.approx(25.00, abs=0.01)


def test_bonus_terms_by_hand():
    """S=2, A=1, H=2, fixed counts: terms 2, 3, 4 of eq. 31 computed by hand; term 4 = 0 at H."""
    c = RunConfig(n_states=2, n_actions=1, horizon=2, episodes=10, preset="faithful", beta=0.5)
    learner = DPUCBVI(c, bind(c).knobs, [0])
    n_sa = np.array([[[[4.0], [0.0]], [[2.0], [8.0]]]])  # (R=1, H=2, S=2, A=1)
    p = np.array([[[[[0.25, 0.75]], [[0.5, 0.5]]], [[[1.0, 0.0]], [[0.5, 0.5]]]]])
    radius = 3.0
    bonus = static_bonus(learner, n_sa, p, radius)  # the numpy reference the kernel is checked by
    io = math.log(30 * 2 * 2 * 1 * 2 * 10 / 0.5)
    # h = 1 (index 0), s = 0: N = 4; next-step counts N'(s') = (2, 8)
    c1 = 1000**2 * 2**3 * 2 * 1 * io**2
    c23 = 1000**2 * 2**4 * 1 * io**4 * (2**4 * radius**2 + 2**6)
    g = [min(c1 / n + c23 / n**2, 4.0) for n in (2.0, 8.0)]
    w = 0.25 * g[0] + 0.75 * g[1]
    expected = (
        math.sqrt(2 * io / 4) + 20 * 2 * 2 * radius * io / 4 + 4 * math.sqrt(io) * math.sqrt(w / 4)
    )
    assert bonus[0, 0, 0, 0] == pytest.approx(expected)
    assert math.isinf(bonus[0, 0, 1, 0])  # N = 0 -> +inf
    # h = H: term 4 is 0, so the bonus is terms 2 + 3 only
    expected_last = math.sqrt(2 * io / 2) + 20 * 2 * 2 * radius * io / 2
    assert bonus[0, 1, 0, 0] == pytest.approx(expected_last)


def test_first_episode_is_all_optimistic_and_random_tie_breaking():
    run = Run(cfg(privacy="none"), [0, 1, 2])
    pol = run.policy()
    planner = run.learner.planner
    assert np.all(planner.q == planner.caps[None, :, None, None])
    assert pol.shape == (3, 20, 6)
    assert 0.3 < pol.mean() < 0.7  # ties broken at random, not towards action 0


@pytest.mark.parametrize("privacy", ["none", "jdp", "ldp"])
def test_q_is_bounded_and_non_increasing_in_k(privacy):
    c = (
        cfg(privacy=privacy, epsilon=5.0, delta=1e-5, mechanism="gaussian", episodes=120)
        if privacy != "none"
        else cfg(episodes=120)
    )
    run = Run(c, [3])
    prev = None
    for k in range(c.episodes):
        message = run.message()
        q = run.learner.planner.q.copy()
        assert np.all(q >= 0) and np.all(q <= 20)
        if prev is not None:
            assert np.all(q <= prev + 1e-12)
        prev = q
        traj, noisy = user_episode(RIVER, message, run.seeds, k, run.algorithm, run.calibration,
                                   nonces=[k] * len(run.seeds))
        if noisy is not None:
            run.ingest_noisy(noisy)
        else:
            run.ingest_trajectories(traj, message)


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_infinite_epsilon_reduces_exactly_to_non_private(privacy, mechanism):
    """eps = inf is the non-private run number for number, with either backend (nothing is
    drawn, so nothing is put on a grid either)."""
    base = cfg(episodes=300, privacy="none")
    private = cfg(
        episodes=300,
        privacy=privacy,
        epsilon=math.inf,
        mechanism=mechanism,
        delta=1e-5 if mechanism == "gaussian" else 0.0,
    )
    a = run_in_process(base, RIVER, [4, 5])
    for noise in ("numpy", "float"):
        b = run_in_process(private.model_copy(update={"noise": noise}), RIVER, [4, 5])
        np.testing.assert_array_equal(a.regret, b.regret)
    assert a.regret[:, -50:].mean() < a.regret[:, :50].mean()  # and it is learning


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_integer_noise_at_negligible_scale_releases_the_exact_bernoulli_counts(privacy):
    """Integer noise at eps = 1e12 draws only zeros: the release is the exact integer sums of
    what users reported (Bernoulli rewards: 0 or 1)."""
    run = Run(cfg(episodes=40, privacy=privacy, epsilon=1e12), [3])
    total_r = 0.0
    for k in range(40):
        played = run.play_and_ingest(RIVER, [11], k)
        assert set(np.unique(played.rewards)) <= {0.0, 1.0}
        total_r += played.rewards.sum()
    board = run.billboard()
    assert board["r"].sum() == total_r and board["sas"].sum() == 40 * RIVER.H
    assert np.array_equal(board["sas"], np.rint(board["sas"]))


def test_huge_finite_epsilon_is_close_to_non_private():
    a = run_in_process(cfg(episodes=300, privacy="none"), RIVER, [6])
    b = run_in_process(cfg(episodes=300, privacy="jdp", epsilon=1e12, noise="float"), RIVER, [6])
    differing = np.mean(np.abs(a.regret - b.regret) > 1e-9)
    assert differing < 0.05


def test_faithful_jdp_satisfies_the_count_contract_every_episode():
    """Lemma 5.4 on the good event: N <= N~(s,a) <= N + E, |N~(s,a,s') - N(s,a,s')| <= E."""
    world = garnet(3, 2, 3, seed=1)
    c = RunConfig(
        n_states=3,
        n_actions=2,
        horizon=3,
        episodes=150,
        preset="faithful",
        privacy="jdp",
        epsilon=2.0,
    )
    run = Run(c, [7])
    violations = 0
    for k in range(c.episodes):
        message = run.message()
        traj, _ = user_episode(world, message, run.seeds, k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
        rel, e = run.billboard(), run.radius()
        exact = {n: t.exact for n, t in run.privatizer.trees.items()}
        proj = project_counts(rel["sas"], rel["sa"], e)
        violations += int(np.any(proj.sa < exact["sa"]) or np.any(proj.sa > exact["sa"] + e))
        violations += int(np.any(np.abs(proj.sas - exact["sas"]) > e))
        assert np.all(proj.sas > 0)
        np.testing.assert_allclose(proj.sas.sum(-1) / proj.sa, 1.0)
    assert violations == 0


def test_faithful_q_is_optimistic():
    world = garnet(3, 2, 3, seed=2)
    c = RunConfig(
        n_states=3,
        n_actions=2,
        horizon=3,
        episodes=100,
        preset="faithful",
        privacy="jdp",
        epsilon=5.0,
    )
    q_star, _ = optimal_q(world)
    run = Run(c, [8])
    for k in range(c.episodes):
        message = run.message()
        assert np.all(run.learner.planner.q[0] >= q_star - 1e-9)
        traj, _ = user_episode(world, message, run.seeds, k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)


def test_non_private_learns_riverswim_sublinearly():
    res = run_in_process(cfg(episodes=3000, privacy="none"), RIVER, [0, 1])
    random_regret = optimal_return(RIVER) - uniform_random_return(RIVER)
    assert res.regret[:, -500:].mean() < 0.2 * random_regret
    cum = np.cumsum(res.regret.mean(axis=0))
    ks = np.array([300, 3000])
    slope = np.diff(np.log(cum[ks - 1])) / np.diff(np.log(ks))
    assert slope[0] < 0.9


def test_faithful_constants_do_not_learn_in_short_runs():
    """Erratum E11: with the paper's constants the policy stays near random."""
    res = run_in_process(cfg(episodes=300, privacy="none", preset="faithful"), RIVER, [0])
    random_regret = optimal_return(RIVER) - uniform_random_return(RIVER)
    assert res.regret[:, -100:].mean() > 0.8 * random_regret


def test_pooled_statistics_have_one_step():
    assert family_shapes(6, 2, 20, pooled=True)["sas"] == (1, 6, 2, 6)
    res = run_in_process(cfg(episodes=200, privacy="none", knobs={"pooled": True}), RIVER, [0])
    assert res.regret.shape == (1, 200)


@pytest.mark.parametrize("pooled", [False, True])
def test_tabular_counts_by_hand(pooled):
    """Each family is the sum over replicas' steps of its one-hot increment (rewards added in
    step order from 0.0), entry for entry, as a plain loop computes it."""
    world = garnet(5, 3, 7, seed=4, stationary=False)  # mean rewards: sums depend on order
    rng = np.random.default_rng(6)
    traj = rollout(world, rng.integers(0, 3, (4, 7, 5)), rng.random((4, 15)))
    counts = tabular_counts(traj, 5, 3, pooled)
    want = {name: np.zeros((4, *shape)) for name, shape in family_shapes(5, 3, 7, pooled).items()}
    for r in range(4):
        for h in range(7):
            s, a, t = traj.states[r, h], traj.actions[r, h], traj.states[r, h + 1]
            j = 0 if pooled else h
            want["sas"][r, j, s, a, t] += 1.0
            want["sa"][r, j, s, a] += 1.0
            want["r"][r, j, s, a] += traj.rewards[r, h]
    assert counts.keys() == want.keys()
    for name in want:
        assert counts[name].dtype == np.float64
        np.testing.assert_array_equal(counts[name], want[name])
    assert np.isclose(counts["r"].sum(), traj.rewards.sum()) and traj.rewards.sum() > 0


def test_world_and_config_must_agree():
    with pytest.raises(ValueError, match="world has"):
        run_in_process(cfg(n_states=5), RIVER, [0])


def test_knobs_never_change_the_noise():
    a = Run(cfg(privacy="jdp", epsilon=1.0), [0])
    b = Run(cfg(privacy="jdp", epsilon=1.0, knobs={"bonus_scale": 5, "radius_scale": 9}), [0])
    assert a.calibration == b.calibration
