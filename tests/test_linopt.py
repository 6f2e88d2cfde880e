"""Private LinOpt-VI / LinOpt-PO (Zhou Alg. 1, 2): reference numbers, mechanics, mirror
descent, eps -> inf, honest ledger, stochastic policies, learning."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from privrl import trust
from privrl.algorithms import bind
from privrl.algorithms.linmix import zhou
from privrl.budget import plan_totals, release_plan
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger, epsilon_to_rho
from privrl.privacy.tree import tree_levels
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds import make, optimal_return, uniform_random_return
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.rollout import Trajectories, draw_uniforms, rollout_stochastic
from privrl.worlds.values import episode_regret_stochastic, stochastic_policy_values

E2 = make("zhou-mix")


def cfg(algo: str = "linopt-vi", mdp=E2, **kw) -> RunConfig:
    base = dict(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                model=model_spec_of(mdp), episodes=200, privacy="jdp", epsilon=1.0, delta=1e-5,
                mechanism="gaussian", preset="practical", schedule="every", counter="smoothed")
    # the tree every episode: the mechanics these tests check (the preset's:
    # test_preset_schedules.py)
    return RunConfig(**{**base, **kw})


def sig5(x: float, y: float) -> None:
    assert x == pytest.approx(y, rel=5e-5)


def test_golden_numbers() -> None:
    """Zhou's Theorem 6.4 / 6.5 constants to 5 significant figures (JDP config A and B,
    non-private, LDP A and B)."""
    a = zhou.constants(trust.get("jdp"), 1000, 4, 4, 4, 4, 1.0, 0.01, 0.05)
    assert a.m == 10
    for got, want in ((a.sigma_p1, 12438.8), (a.sigma_p2, 6219.38), (a.sigma_r, 194.356),
                      (a.p.big_sigma, 721473), (a.r.big_sigma, 11273),
                      (2 * a.p.big_sigma, 1.44295e6), (2 * a.r.big_sigma, 22546),
                      (a.p.nu, 162.895), (a.r.nu, 40.7237), (a.p.beta, 3111.24),
                      (a.r.beta, 410.01), (a.eta, 0.0131638)):
        sig5(got, want)
    n = zhou.constants(trust.get("none"), 1000, 4, 4, 4, 4, 1.0, 0.01, 0.05)
    sig5(n.p.beta, 15.7820)
    sig5(n.r.beta, 4.77785)
    b = zhou.constants(trust.get("jdp"), 100, 2, 2, 3, 3, 0.5, 1e-3, 0.1)
    assert b.m == 7
    for got, want in ((b.sigma_p1, 1435.77), (b.sigma_p2, 1015.25), (b.sigma_r, 179.472),
                      (b.p.big_sigma, 54917.9), (b.r.big_sigma, 7468.42), (b.p.nu, 64.8047),
                      (b.r.nu, 32.8116), (b.p.beta, 641.283), (b.r.beta, 293.297),
                      (b.eta, 0.0741152)):
        sig5(got, want)
    la = zhou.constants(trust.get("ldp"), 1000, 4, 4, 4, 4, 1.0, 0.01, 0.05)
    for got, want in ((la.sigma_p1, 3933.48), (la.p.big_sigma, 2.2815e6), (la.p.beta, 5528.0),
                      (la.r.beta, 727.95)):
        sig5(got, want)
    lb = zhou.constants(trust.get("ldp"), 100, 2, 2, 3, 3, 0.5, 1e-3, 0.1)
    for got, want in ((lb.sigma_p1, 542.672), (lb.p.big_sigma, 78454.1), (lb.p.beta, 766.0),
                      (lb.r.beta, 350.317)):
        sig5(got, want)


def test_constant_relations() -> None:
    """Property 7: lambda_max = 3 lambda_min, shift 2 Sigma, sigma ~ 1/eps and sqrt(ln(4H/delta)),
    beta_p increasing in lambda_max and nu; property 21: the zCDP check of Theorem 6.4's
    noise scales."""
    a = zhou.constants(trust.get("jdp"), 1000, 4, 4, 4, 4, 1.0, 0.01, 0.05)
    assert a.p.lam_max == pytest.approx(3 * a.p.lam_min) and a.p.lam_min == a.p.big_sigma
    half = zhou.constants(trust.get("jdp"), 1000, 4, 4, 4, 4, 2.0, 0.01, 0.05)
    assert half.sigma_p1 == pytest.approx(a.sigma_p1 / 2)
    other = zhou.constants(trust.get("jdp"), 1000, 4, 4, 4, 4, 1.0, 1e-4, 0.05)
    assert other.sigma_r / a.sigma_r == pytest.approx(
        math.sqrt(math.log(16 / 1e-4) / math.log(16 / 0.01)))
    bigger = zhou.part("p", 4, 2 * a.p.sigma_matrix, a.p.sigma_vector, 4, 1000, 0.05, 0.0)
    assert bigger.beta > a.p.beta
    # Zhou's accounting (add/remove sensitivities, 4H counters): eps_actual <= eps
    rho = 4 * 4 * (a.m * (4 * 16) ** 2 / (2 * a.sigma_p1**2))  # 4H counters, the same rho each
    eps_actual = rho + 2 * math.sqrt(rho * math.log(1 / 0.01))
    assert eps_actual == pytest.approx(0.20, abs=0.01) and eps_actual <= 1.0


def test_faithful_learner_uses_the_golden_constants() -> None:
    world = make("zhou-mix", horizon=4)
    config = cfg(mdp=world, episodes=1000, epsilon=1.0, delta=0.01, beta=0.05, preset="faithful",
                 noise="float")  # integer noise adds the rounding slack
    run = Run(config, [0])
    p, r = run.learner.parts(0)
    sig5(p.big_sigma, 721473)
    sig5(p.beta, 3111.24)  # the added ridge lambda = 1 moves it below 5 significant figures
    sig5(r.beta, 410.01)
    scales = run.calibration.scales()
    sig5(scales["gram_p"], 12438.8)
    sig5(scales["target_p"], 6219.38)
    sig5(scales["gram_r"], 194.356)
    assert run.calibration.levels == 10
    none = Run(cfg(mdp=world, episodes=1000, privacy="none", preset="faithful", beta=0.05), [0])
    sig5(none.learner.parts(0)[0].beta, 15.7820)


def _play(run: Run, mdp, k: int, seed: int = 0) -> None:
    for i in range(k):
        message = run.message()
        seeds = [seed + r for r in range(len(run.seeds))]
        traj, noisy = user_episode(mdp, message, seeds, i, run.algorithm, run.calibration,
                                   nonces=[i] * len(seeds))
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)


@pytest.mark.parametrize("algo", ["linopt-vi", "linopt-po"])
def test_mechanics(algo: str) -> None:
    """Properties 12-16: 0 <= Q <= H-h+1, V_{H+1} = 0, greedy with low-index ties (VI), uniform
    pi^1 and pi^{k+1} = softmax(eta sum_{j<=k} Q^j) (PO), Lambda^1 = shift I, theta^1 = 0."""
    run = Run(cfg(algo, privacy="none", preset="faithful", knobs={"tie_break": "first"}), [0, 1])
    learner = run.learner
    qs = []
    for _ in range(6):
        msg = run.message()
        q = learner.q
        caps = E2.H - np.arange(E2.H)
        assert (q >= 0).all() and (q <= caps[None, :, None, None]).all()
        assert not msg["values"][:, -1].any()
        if algo == "linopt-vi":
            np.testing.assert_array_equal(msg["actions"], np.argmax(q, axis=-1))
            np.testing.assert_array_equal(msg["values"][:, :-1], q.max(-1))
        else:
            probs = msg["probs"]
            np.testing.assert_allclose(probs.sum(-1), 1.0)
            logits = learner.eta * sum(qs) if qs else np.zeros_like(q)
            expect = np.exp(logits - logits.max(-1, keepdims=True))
            np.testing.assert_allclose(probs, expect / expect.sum(-1, keepdims=True), rtol=1e-12)
            np.testing.assert_allclose(msg["values"][:, :-1], (probs * q).sum(-1), rtol=1e-12)
        qs.append(q.copy())
        _play(run, E2, 1, seed=len(qs))
    assert learner.eta == pytest.approx(math.sqrt(2 * math.log(3) / (16 * 200)))


def test_vi_breaks_ties_at_random_from_the_server_seed() -> None:
    """The default: version 0's Q saturates at H-h+1 everywhere, so every action ties; each
    replica picks maximisers drawn from its own seed (not all action 0), the same ones again
    for the same seed and release."""
    seeds = [0, 1, 2, 3]
    run = Run(cfg("linopt-vi", privacy="none", preset="faithful"), seeds)
    actions, q = run.message()["actions"], run.learner.q
    assert q is not None and np.all(q == q.max(-1, keepdims=True))  # every action ties
    chosen = np.take_along_axis(q, actions[..., None], axis=-1)[..., 0]
    np.testing.assert_array_equal(chosen, q.max(-1))
    assert len(np.unique(actions)) == E2.A and not np.array_equal(actions[0], actions[1])
    again = Run(cfg("linopt-vi", privacy="none", preset="faithful"), seeds)
    np.testing.assert_array_equal(again.message()["actions"], actions)


def test_po_next_policy_ignores_the_last_episode() -> None:
    """Property 14: pi^{k+1} does not depend on episode k's statistics (its Q^k predates them)."""
    base = Run(cfg("linopt-po", privacy="jdp", epsilon=50.0), [4])
    other = Run(cfg("linopt-po", privacy="jdp", epsilon=50.0), [4])
    _play(base, E2, 3, seed=1)
    _play(other, E2, 3, seed=1)
    msg = base.message()
    traj, _ = user_episode(E2, msg, [1], 3, base.algorithm, base.calibration)
    base.ingest_trajectories(traj, msg)
    traj, _ = user_episode(E2, msg, [99], 3, other.algorithm, other.calibration)
    other.ingest_trajectories(traj, other.message())
    a, b = base.message(), other.message()
    np.testing.assert_array_equal(a["probs"], b["probs"])
    assert not np.array_equal(a["values"], b["values"])


def test_non_private_statistics_are_the_ridge_regression() -> None:
    """Property 15: Lambda = lambda I + sum x x^T and theta_hat = the direct ridge solve."""
    run = Run(cfg(privacy="none"), [0])
    raw = {"gram_p": 0.0, "target_p": 0.0}
    for i in range(20):
        message = run.message()
        traj, _ = user_episode(E2, message, [0], i, run.algorithm, run.calibration)
        stats = run.algorithm.user_statistics(traj, message)
        raw = {n: raw[n] + stats[n] for n in raw}
        run.ingest_trajectories(traj, message)
    board = run.billboard()
    np.testing.assert_allclose(board["gram_p"], raw["gram_p"], atol=1e-12)
    theta, _ = run.learner._solve(board["gram_p"], board["target_p"], run.learner.parts(20)[0])
    lam = board["gram_p"] + np.eye(E2.model.d)
    np.testing.assert_allclose(theta, np.linalg.solve(lam, raw["target_p"][..., None])[..., 0],
                               rtol=1e-9)


@pytest.mark.parametrize("algo", ["linopt-vi", "linopt-po"])
@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_infinite_epsilon_reduces_exactly_to_non_private(algo: str, privacy: str) -> None:
    for preset in ("faithful", "practical"):
        base = run_in_process(cfg(algo, privacy="none", preset=preset, episodes=60), E2, [3, 4])
        inf = run_in_process(cfg(algo, privacy=privacy, preset=preset, episodes=60,
                                 epsilon=math.inf), E2, [3, 4])
        np.testing.assert_array_equal(inf.regret, base.regret)


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_ledger_is_honest(privacy: str) -> None:
    faithful = run_in_process(cfg(privacy=privacy, preset="faithful", episodes=64, delta=0.01),
                              E2, [0])
    assert 0 < faithful.ledger.totals(0.01).epsilon < 1.0  # the paper spends less than claimed
    practical = run_in_process(cfg(privacy=privacy, episodes=64, epsilon=3.0), E2, [0])
    assert practical.ledger.totals(1e-5).epsilon == pytest.approx(3.0, rel=1e-6)
    names = {c.mechanism.split(":")[1] for c in practical.ledger.entries}
    assert names == {"gram_p", "target_p", "gram_r", "target_r"}


def test_sensitivities_by_brute_force() -> None:
    world = make("zhou-mix", 3, n_states=3, n_actions=2, d=3, reward_dim=2)
    algo = bind(cfg(mdp=world, episodes=8))
    fams = {f.name: f for f in algo.families()}
    rng = np.random.default_rng(1)
    paths = np.array(list(itertools.product(range(world.S), repeat=world.H + 1)))
    acts_all = np.array(list(itertools.product(range(world.A), repeat=world.H)))
    worst = {n: 0.0 for n in fams}
    for _ in range(4):
        values = np.round(rng.random((1, world.H + 1, world.S))) * world.H
        values[:, -1] = 0.0
        rows = len(paths) * len(acts_all)
        states = np.repeat(paths, len(acts_all), axis=0)
        actions = np.tile(acts_all, (len(paths), 1))
        rewards = rng.integers(0, 2, size=(rows, world.H)).astype(float)
        stats = algo.user_statistics(Trajectories(states, actions, rewards),
                                     {"values": np.repeat(values, rows, 0)})
        for name, arr in stats.items():
            if fams[name].symmetric:
                iu = np.triu_indices(arr.shape[-1])
                arr = arr[..., iu[0], iu[1]]
            flat = arr.reshape(rows, -1)
            lo, hi = flat.min(0), flat.max(0)
            assert (lo >= fams[name].clean_min - 1e-9).all()
            assert (hi <= fams[name].clean_max + 1e-9).all()
            sub = flat[rng.choice(rows, size=min(rows, 600), replace=False)]
            diff = sub[:, None] - sub[None]
            worst[name] = max(worst[name], float(np.sqrt((diff**2).sum(-1)).max()))
    for name, fam in fams.items():
        assert worst[name] <= fam.l2 + 1e-9, name


@pytest.mark.slow  # statistical: Monte Carlo over 30,000 rollouts
def test_stochastic_rollout_and_values() -> None:
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(E2.A), size=(E2.H, E2.S))
    n = 30_000
    gens = [np.random.default_rng(i) for i in range(n)]
    traj = rollout_stochastic(E2, np.broadcast_to(probs, (n, *probs.shape)),
                              draw_uniforms(gens, E2.H), rng.random((n, E2.H)))
    first = np.bincount(traj.actions[:, 0][traj.states[:, 0] == 0], minlength=E2.A) / n
    np.testing.assert_allclose(first, probs[0, 0], atol=0.015)
    exact = stochastic_policy_values(E2, probs)[0] @ E2.d1
    assert traj.returns.mean() == pytest.approx(exact, abs=4 * traj.returns.std() / math.sqrt(n))
    assert episode_regret_stochastic(E2, probs) >= 0


@pytest.mark.slow  # statistical: regret's halves over 600 episodes, 3 seeds, twice
def test_learning_with_the_practical_preset() -> None:
    """Property 25 (and PO): the second half's per-episode regret is well below the first
    half's. VI's random ties learn fast (its first half is low already), so VI's second half is
    checked against the uniform policy's regret instead."""
    uniform = optimal_return(E2) - uniform_random_return(E2)
    for algo in ("linopt-vi", "linopt-po"):
        res = run_in_process(cfg(algo, privacy="none", episodes=600), E2, list(range(3)))
        first, second = res.regret[:, :300].mean(), res.regret[:, 300:].mean()
        assert second < first, algo
        if algo == "linopt-vi":
            assert second < 0.1 * uniform
        else:
            assert second < 0.6 * first
        assert (res.regret >= -1e-9).all()


def test_refusals() -> None:
    with pytest.raises(ValueError, match="reward features"):
        bind(cfg(mdp=make("lm-hard")))
    with pytest.raises(ValueError, match="Gaussian"):
        bind(cfg(preset="faithful", mechanism="laplace", delta=0.0))


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_zcdp_splits_the_budget_by_sensitivity(privacy: str) -> None:
    """calibration=zcdp: sigma_f^2 = L Delta_f sum_g Delta_g / (2 rho) per family (closed form),
    the plan spends exactly epsilon, and each family's share of the ledger is Delta_f / sum Delta
    (the reward families get a far smaller sigma than the one-sigma split gave them)."""
    config = cfg(privacy=privacy, epsilon=2.0, knobs={"calibration": "zcdp"}, episodes=300)
    algo = bind(config)
    fams = {f.name: f for f in algo.families()}
    rho = epsilon_to_rho(2.0, config.delta)
    levels = tree_levels(300) if privacy == "jdp" else 1
    total = sum(f.l2 for f in fams.values())
    for f in fams.values():
        assert f.scale**2 == pytest.approx(levels * f.l2 * total / (2 * rho), rel=1e-12)
    one_sigma2 = levels * sum(f.l2**2 for f in fams.values()) / (2 * rho)
    assert fams["target_r"].scale ** 2 < one_sigma2 / 4
    plan = release_plan(config)
    assert plan_totals(plan, config.delta).epsilon == pytest.approx(2.0, rel=1e-9)
    spent = Ledger(plan).by_mechanism()
    for name, f in fams.items():
        share = sum(v["rho"] for k, v in spent.items() if k.endswith(f":{name}")) / rho
        assert share == pytest.approx(f.l2 / total, rel=1e-9)
