"""Private UCRL-VTR (Luyo Alg. 1): reference constants, sensitivities by brute force,
noise where claimed, PD shifts, eps -> inf, honest ledger, learning."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from privrl import trust
from privrl.algorithms import bind
from privrl.algorithms.linmix import luyo
from privrl.algorithms.linmix.common import feature_box
from privrl.budget import plan_totals, release_plan
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger, continuous_gaussian, epsilon_to_rho
from privrl.privacy.psd import mirror_upper
from privrl.privacy.tree import tree_levels
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds import make
from privrl.worlds.linear_mixture import public_model
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.rollout import Trajectories

HARD = make("lm-hard")


def cfg(mdp=HARD, **kw) -> RunConfig:
    base = dict(algo="ucrl-vtr", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                model=model_spec_of(mdp), episodes=200, privacy="jdp", epsilon=1.0, delta=1e-5,
                mechanism="gaussian", preset="practical", schedule="every", counter="smoothed")
    # the tree every episode: the mechanics these tests check (the preset's:
    # test_preset_schedules.py)
    return RunConfig(**{**base, **kw})


def jdp_sigma_closed_form(horizon: int, episodes: int, eps: float, delta: float) -> float:
    """Luyo et al.'s Cor. 5 as printed: the JDP noise scale in closed form."""
    k0 = luyo.tree_depth(episodes)
    return (32.0 * horizon**2 / eps) * math.sqrt(
        2.0 * horizon * k0 * math.log(8.0 * horizon / delta) * math.log(4.0 / delta)
        * math.log(16.0 * horizon * k0 / delta))


def test_reference_constants() -> None:
    """Reference: d=4, H=5, K=1000, eps=0.5, delta=p=0.1, C_w=1.1 (relative tolerance 1e-9)."""
    H, K, d, eps, delta, p, c_w = 5, 1000, 4, 0.5, 0.1, 0.1, 1.1
    assert luyo.tree_depth(K) == 11
    hoeff = luyo.hoeffding_term(H, K, d, p)
    assert hoeff == pytest.approx(33.2004681, rel=1e-8)
    sigma = luyo.paper_sigma(trust.get("jdp"), H, K, eps, delta)
    e1, d1 = luyo.adv(eps / 2, delta / 2, H)
    e0, d0 = luyo.adv(e1, d1, 11)
    assert sigma == luyo.gauss_sigma(2 * H**2, e0, d0)
    assert sigma == pytest.approx(jdp_sigma_closed_form(H, K, eps, delta), rel=1e-12)
    assert sigma == pytest.approx(237756.7878, rel=1e-9)
    b = luyo.noise_bounds(sigma * math.sqrt(11), sigma * math.sqrt(11), d, H, K, p)
    assert b.ups == pytest.approx(26198058.06, rel=1e-9)
    assert b.c == pytest.approx(7177812.68, rel=1e-9)
    assert luyo.beta_corollary(25, b.ups, c_w, hoeff) == pytest.approx(32279.16017, rel=1e-9)
    sigma = luyo.paper_sigma(trust.get("ldp"), H, K, eps, delta)
    assert sigma == luyo.gauss_sigma(2 * H**2, eps / (2 * H), delta / (2 * H))
    assert sigma == pytest.approx(3255.247261, rel=1e-9)
    b = luyo.noise_bounds(sigma * math.sqrt(K), sigma * math.sqrt(K), d, H, K, p)
    assert b.ups == pytest.approx(3419981.962, rel=1e-9)
    assert b.c == pytest.approx(937015.6304, rel=1e-9)
    assert luyo.beta_corollary(25, b.ups, c_w, hoeff) == pytest.approx(11683.95479, rel=1e-9)
    # non-private: the corollary's 3 (C_w+1) H + Hoeffding (64.70) and Thm. 7's C_w H + Hoeffding
    assert luyo.beta_corollary(25, 0, c_w, hoeff) == pytest.approx(64.70, abs=0.005)
    assert luyo.beta_thm7(25, 0, 0, 0, c_w, hoeff) == pytest.approx(38.70, abs=0.005)


@pytest.mark.parametrize(("privacy", "beta"), [("jdp", 32279.16017), ("ldp", 11683.95479)])
def test_faithful_learner_uses_the_paper_constants(privacy: str, beta: float) -> None:
    world = make("lm-hard", gap=0.1 / 3)  # C_w = 1 + 3 gap = 1.1
    config = cfg(world, episodes=1000, privacy=privacy, epsilon=0.5, delta=0.1, beta=0.1,
                 preset="faithful", noise="float")  # integer noise adds the rounding slack
    run = Run(config, [0])
    assert world.model.c_w == pytest.approx(1.1)
    assert run.learner.lam == 25.0
    assert run.learner.beta(0) == pytest.approx(beta, rel=1e-9)
    assert run.learner.beta(500) == run.learner.beta(0)  # constant in k
    assert run.learner.shift(0) == 0.0  # release 0 is lambda I (erratum 5)
    ups = 26198058.06 if privacy == "jdp" else 3419981.962
    assert run.learner.shift(1) == pytest.approx(2 * ups, rel=1e-9)
    assert run.calibration.scales()["gram"] == pytest.approx(
        237756.7878 if privacy == "jdp" else 3255.247261, rel=1e-9)


def _upper(x: np.ndarray) -> np.ndarray:
    iu = np.triu_indices(x.shape[-1])
    return x[..., iu[0], iu[1]]


def test_per_step_caps_shrink_the_sensitivity() -> None:
    """Practical clips Q~_h at H-h+1, so V~_{h+1} <= H-h bounds step h: sqrt(2 sum c^4) instead
    of sqrt(2 (H-1)) H^2 for the Gram family (both presets' last step carries no data)."""
    practical = {f.name: f for f in bind(cfg()).families()}
    faithful = {f.name: f for f in bind(cfg(preset="faithful")).families()}
    caps = np.array([4.0, 3.0, 2.0, 1.0])
    box = feature_box(public_model(model_spec_of(HARD)).features)
    assert box["gram_l2"] < math.sqrt(2) and box["target_l2"] < 2  # the public features' bound
    assert practical["gram"].l2 == pytest.approx(box["gram_l2"] * math.sqrt(np.sum(caps**4)))
    assert practical["target"].l2 == pytest.approx(box["target_l2"] * math.sqrt(np.sum(caps**4)))
    assert faithful["gram"].l2 == pytest.approx(box["gram_l2"] * math.sqrt(4) * 25)
    assert faithful["target"].l2 == pytest.approx(box["target_l2"] * math.sqrt(4) * 25)


@pytest.mark.parametrize("name", [pytest.param("lm-hard", marks=pytest.mark.slow), "lm-mix",
                                  pytest.param("zhou-mix", marks=pytest.mark.slow)])  # long ones
def test_public_feature_bound_holds_by_brute_force(name: str) -> None:
    """feature_box <= the generic bounds, and no two (X X^T, X y) with X = phi_V(s,a), y = V(s'),
    V in [0, 1]^S (every vertex plus random interior tables, every s, a, s') differ by more.
    It reads only the public features: worlds with other secret parameters give the same."""
    world = make(name)
    model = public_model(model_spec_of(world))
    box = feature_box(model.features)
    fb = model.feature_bound
    assert box["gram_l2"] <= math.sqrt(2) * fb**2 and box["target_l2"] <= 2 * fb**2
    assert box["gram_l1"] <= (model.d + 1) * fb**2
    assert box["target_l1"] <= 2 * math.sqrt(model.d) * fb**2
    rng = np.random.default_rng(1)
    vertices = np.array(list(itertools.product([0.0, 1.0], repeat=model.S)))
    tables = np.concatenate([vertices, rng.random((24, model.S))])
    x = np.einsum("satd,vt->vsad", model.features, tables)  # (V, S, A, d)
    iu = np.triu_indices(model.d)
    gram = np.einsum("vsaj,vsak->vsajk", x, x)[..., iu[0], iu[1]].reshape(-1, len(iu[0]))
    target = (x[:, :, :, None, :] * tables[:, None, None, :, None]).reshape(-1, model.d)
    for stat, key in ((gram, "gram"), (target, "target")):
        pts = np.unique(np.round(stat, 12), axis=0)
        for i in range(0, len(pts), 256):
            diff = pts[i:i + 256, None, :] - pts[None, :, :]
            assert np.sqrt((diff**2).sum(-1)).max() <= box[f"{key}_l2"] + 1e-9
            assert np.abs(diff).sum(-1).max() <= box[f"{key}_l1"] + 1e-9
    if name == "lm-hard":
        other = make(name, seed=7)  # other secret parameters, the same public features
        assert not np.array_equal(other.P, world.P)
        assert feature_box(public_model(model_spec_of(other)).features) == box



@pytest.mark.parametrize("preset", ["practical", pytest.param("faithful", marks=pytest.mark.slow)])
def test_sensitivities_by_brute_force(preset: str) -> None:
    """Every trajectory of a small instance, several messages: the largest replace-one change of
    each family (on its released coordinates) stays within the declared l1 and l2."""
    world = make("lm-hard", 3, d=3, gap=0.1)  # S = 5, A = 4, H = 3
    config = cfg(world, episodes=8, preset=preset, privacy="none")
    algo = bind(config)
    fams = {f.name: f for f in algo.families()}
    rng = np.random.default_rng(0)
    paths = np.array(list(itertools.product(range(world.S), repeat=world.H + 1)))
    worst = {"gram": [0.0, 0.0], "target": [0.0, 0.0]}
    for trial in range(6):
        values = rng.random((1, world.H + 1, world.S)) * world.H
        if trial % 2:
            values = np.round(values / world.H) * world.H  # extreme tables: 0 or H
        values[:, -1] = 0.0
        actions = rng.integers(0, world.A, size=(1, world.H, world.S))
        message = {"actions": actions, "values": values}
        acts = actions[0][np.arange(world.H), paths[:, :-1]]
        traj = Trajectories(paths, acts, np.zeros(acts.shape))
        stats = algo.user_statistics(traj, {k: np.repeat(v, len(paths), 0)
                                            for k, v in message.items()})
        flat = {"gram": _upper(stats["gram"]).reshape(len(paths), -1),
                "target": stats["target"].reshape(len(paths), -1)}
        for name, arr in flat.items():
            diff = arr[:, None, :] - arr[None, :, :]
            worst[name][0] = max(worst[name][0], np.abs(diff).sum(-1).max())
            worst[name][1] = max(worst[name][1], np.sqrt((diff**2).sum(-1)).max())
        assert (values >= 0).all() and (values <= world.H).all()
        x_norm = np.sqrt(np.einsum("rhii->rh", stats["gram"]))
        assert x_norm.max() <= world.H + 1e-9
    for name in worst:
        assert worst[name][0] <= fams[name].l1 + 1e-9
        assert worst[name][1] <= fams[name].l2 + 1e-9
        assert worst[name][1] >= 0.2 * fams[name].l2  # the bound is not vacuous here


def test_statistics_clip_an_oversized_message() -> None:
    """A message with values outside [0, H] cannot push a user's statistics past the bounds."""
    config = cfg(episodes=4)
    algo = bind(config)
    bad = np.full((1, HARD.H + 1, HARD.S), 1e6)
    traj = Trajectories(np.zeros((1, HARD.H + 1), dtype=np.int64),
                        np.zeros((1, HARD.H), dtype=np.int64), np.zeros((1, HARD.H)))
    stats = algo.user_statistics(traj, {"actions": np.zeros((1, HARD.H, HARD.S), np.int64),
                                        "values": bad})
    assert np.abs(stats["gram"]).max() <= HARD.H**2 + 1e-9
    assert np.abs(stats["target"]).max() <= HARD.H**2 + 1e-9
    assert not stats["gram"][:, -1].any() and not stats["target"][:, -1].any()


def test_policy_message_and_greedy_plan() -> None:
    run = Run(cfg(privacy="none"), [0, 1])
    msg = run.message()
    assert set(msg) == {"actions", "values"}
    assert msg["actions"].shape == (2, HARD.H, HARD.S)
    assert msg["values"].shape == (2, HARD.H + 1, HARD.S)
    assert (msg["values"] >= 0).all() and (msg["values"] <= HARD.H).all()
    assert not msg["values"][:, -1].any()


def test_faithful_values_are_optimistic() -> None:
    """With the paper's beta (non-private), V~_h >= V*_h at every state and every episode."""
    from privrl.worlds import optimal_q

    _, v_star = optimal_q(HARD)
    config = cfg(privacy="none", preset="faithful", episodes=150)
    run = Run(config, [2])
    for k in range(config.episodes):
        message = run.message()
        assert (message["values"][0] >= v_star - 1e-9).all()
        traj, _ = user_episode(HARD, message, [2], k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
@pytest.mark.parametrize("preset", ["practical", "faithful"])
def test_infinite_epsilon_reduces_exactly_to_non_private(privacy: str, preset: str) -> None:
    base = run_in_process(cfg(privacy="none", preset=preset, episodes=120), HARD, [3, 4])
    inf = run_in_process(cfg(privacy=privacy, preset=preset, episodes=120,
                             epsilon=math.inf), HARD, [3, 4])
    np.testing.assert_array_equal(inf.regret, base.regret)
    assert inf.policy_versions == base.policy_versions


def _raw_sums(config: RunConfig, seed: int) -> tuple[Run, dict[str, np.ndarray]]:
    run = Run(config, [seed])
    raw = {"gram": 0.0, "target": 0.0}
    for k in range(config.episodes):
        message = run.message()
        traj, noisy = user_episode(HARD, message, [seed], k, run.algorithm, run.calibration,
                                   nonces=[k])
        stats = run.algorithm.user_statistics(traj, message)
        raw = {n: raw[n] + stats[n] for n in raw}
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)
    return run, raw


def test_jdp_noise_is_the_tree_prefix_noise() -> None:
    """The release minus the raw sums is the tree's prefix noise (in grid units times the grid),
    up to the randomized rounding of the 13 items (less than one grid step each)."""
    run, raw = _raw_sums(cfg(episodes=13), 5)
    board = run.billboard()
    for name, tree in run.privatizer.trees.items():
        grid = run.calibration.family(name).grid
        np.testing.assert_allclose(board[name] - raw[name], tree.noise_sum() * grid,
                                   atol=13 * grid)
    noise = board["gram"] - raw["gram"]
    np.testing.assert_allclose(noise, np.swapaxes(noise, -1, -2), atol=1e-6)
    assert np.abs(noise).max() > 0


def test_ldp_reports_carry_noise_of_the_declared_scale() -> None:
    config = cfg(privacy="ldp", episodes=4)
    run = Run(config, [0])
    message = run.message()
    seeds = list(range(400))
    msg = {k: np.repeat(v, len(seeds), 0) for k, v in message.items()}
    traj, noisy = user_episode(HARD, msg, seeds, 0, run.algorithm, run.calibration,
                               nonces=[0] * len(seeds))
    clean = run.algorithm.user_statistics(traj, msg)
    scales = run.calibration.scales()
    assert scales["gram"] != scales["target"]  # one sigma per family (sigma_f^2 ~ Delta_f)
    for name in ("gram", "target"):
        diff = noisy[name] - clean[name]
        assert diff.std() == pytest.approx(scales[name], rel=0.03)
    np.testing.assert_array_equal(noisy["gram"], np.swapaxes(noisy["gram"], -1, -2))


def test_faithful_shift_keeps_the_noise_eigenvalues_in_range() -> None:
    """Property 5: lambda_min(B) >= Ups and lambda_max(B) <= 3 Ups with B = noise + 2 Ups I."""
    config = cfg(privacy="jdp", preset="faithful", episodes=64, epsilon=1.0)
    run, raw = _raw_sums(config, 7)
    ups = run.learner.bounds(64).ups
    noise = run.billboard()["gram"] - raw["gram"] + run.learner.shift(64) * np.eye(HARD.model.d)
    eig = np.linalg.eigvalsh(noise)
    assert eig.min() >= ups and eig.max() <= 3 * ups
    assert run.learner.fallbacks == 0


def test_without_shift_the_floor_keeps_every_solve_finite() -> None:
    config = cfg(privacy="ldp", episodes=30, epsilon=5.0, knobs={"shift_scale": 0.0})
    result = Run(config, [1])
    for k in range(30):
        message = result.message()
        assert np.isfinite(message["values"]).all()
        traj, noisy = user_episode(HARD, message, [1], k, result.algorithm, result.calibration,
                                   nonces=[k])
        result.ingest_noisy(noisy)
    assert result.learner.fallbacks > 0  # the bad noise event happened and was floored


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_ledger_is_honest(privacy: str) -> None:
    faithful = run_in_process(cfg(privacy=privacy, preset="faithful", episodes=64, delta=0.1,
                                  epsilon=0.5), HARD, [0])
    config = cfg(privacy=privacy, preset="faithful", episodes=64, delta=0.1, epsilon=0.5)
    cal = Run(config, [0]).calibration
    times = cal.levels if privacy == "jdp" else 1
    rho = times * sum(f.l2**2 / (2 * f.scale**2) for f in cal.families)
    assert faithful.ledger.rho == pytest.approx(rho, rel=1e-12)
    spent = faithful.ledger.totals(0.1).epsilon
    assert spent < 0.5  # the paper's advanced composition spends far less than it claims
    practical = run_in_process(cfg(privacy=privacy, episodes=64, epsilon=0.5), HARD, [0])
    assert practical.ledger.totals(1e-5).epsilon == pytest.approx(0.5, rel=1e-6)


@pytest.mark.slow  # statistical: regret's shape over K = 3000 episodes, 5 seeds
def test_non_private_regret_is_sublinear() -> None:
    """Sublinear regret on LM-Hard easy (d=4, H=5, Delta=0.05, K=3000, 5 seeds)."""
    k = 3000
    res = run_in_process(cfg(privacy="none", episodes=k), HARD, list(range(5)))
    first, last = res.regret[:, : k // 5].mean(), res.regret[:, -k // 5:].mean()
    assert last < 0.5 * first
    cum = np.median(res.regret.cumsum(1), axis=0)
    ks = np.arange(k // 10, k + 1)
    slope = np.polyfit(np.log(ks), np.log(cum[ks - 1]), 1)[0]
    assert slope < 0.85
    assert (res.regret >= -1e-9).all() and res.regret.sum(1).max() <= k * HARD.H


@pytest.mark.slow  # statistical: mean regret of 5 seeds, private vs not
def test_privacy_costs_utility() -> None:
    """Property 12: regret at eps = inf is not larger than at eps = 0.5. With the practical
    preset, where the non-private run learns within K = 300 (the theory constants learn nothing
    there: both runs stay near the uniform policy, and their order is a coin flip of the
    noise draws)."""
    inf = run_in_process(cfg(privacy="none", episodes=300), HARD, range(5))
    priv = run_in_process(cfg(privacy="jdp", episodes=300, epsilon=0.5, delta=0.1), HARD,
                          range(5))
    assert inf.regret[:, -50:].mean() < 0.5 * priv.regret[:, -50:].mean()  # it learned
    assert inf.regret.sum(1).mean() <= priv.regret.sum(1).mean()


def test_refusals() -> None:
    with pytest.raises(ValueError, match="needs a public linear-mixture model"):
        bind(RunConfig(algo="ucrl-vtr", n_states=7, n_actions=8, horizon=5, episodes=10,
                       privacy="none"))
    zhou = make("zhou-mix")
    with pytest.raises(ValueError, match="only reward features"):
        bind(cfg(zhou))
    with pytest.raises(ValueError, match="Gaussian"):
        bind(cfg(preset="faithful", mechanism="laplace", delta=0.0))
    with pytest.raises(ValueError, match=r"\(S, A, H\)"):
        bind(cfg(n_states=6))
    lap = run_in_process(cfg(mechanism="laplace", delta=0.0, episodes=20), HARD, [0])
    assert 0.5 < lap.ledger.epsilon_pure <= 1.0 + 1e-12  # Laplace: an extension, never over


def test_symmetric_sum_of_mirrored_noise() -> None:
    z = np.random.default_rng(0).normal(size=(3, 4, 4))
    m = mirror_upper(z)
    np.testing.assert_array_equal(np.triu(m), np.triu(z))


def test_cli_runs_with_the_default_world(tmp_path) -> None:
    import json

    from privrl.client.cli import main

    out = tmp_path / "res"
    assert main(["run", "--algo", "ucrl-vtr", "--privacy", "none", "ldp", "--epsilon", "100",
                 "--episodes", "60", "--seeds", "2", "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0
    results = json.loads((out / "summary.json").read_text())["results"]
    assert [r["label"] for r in results] == ["non-private", "ldp eps=100 gaussian"]
    assert results[0]["world"]["name"] == "lm-hard"
    assert results[1]["ledger"]["epsilon"] == pytest.approx(100, rel=1e-6)
    assert (out / "regret.png").exists()
    other = make("lm-hard", seed=9)
    with pytest.raises(ValueError, match="public model"):
        run_in_process(cfg(make("lm-hard", gap=0.04), episodes=5), other, [0])


def test_frontier_plot_of_infinite_epsilon_runs(tmp_path) -> None:
    """`privrl run --epsilon inf` sweeps (eps -> inf checks) still draw a frontier figure."""
    from privrl.lab.plots import plot_frontier

    def record(privacy: str, eps: float) -> dict:
        return {"config": {"privacy": privacy, "mechanism": "gaussian", "epsilon": eps},
                "regret": {"tail_per_episode_mean": 0.1, "tail_per_episode_std": 0.0,
                           "random_policy_per_episode": 0.8}}

    path = plot_frontier([record("none", 1.0), record("jdp", math.inf)], tmp_path / "f.png")
    assert path.exists() and path.stat().st_size > 0


@pytest.mark.parametrize(("privacy", "noise"), [("jdp", "numpy"), ("ldp", "numpy"),
                                                ("jdp", "float")])
def test_zcdp_splits_the_budget_by_sensitivity(privacy: str, noise: str) -> None:
    """calibration=zcdp with Gaussian noise: sigma_f^2 = L Delta_f (Delta_g + Delta_t) / (2 rho)
    per family (closed form), the plan spends exactly epsilon (through the exact Gaussian profile
    with float noise), each family's ledger share is Delta_f / sum Delta, and the summed variance
    is below the one-sigma calibration's."""
    config = cfg(privacy=privacy, epsilon=2.0, episodes=300, noise=noise)
    assert bind(config).knobs.calibration == "zcdp"
    fams = {f.name: f for f in bind(config).families()}
    rho = epsilon_to_rho(2.0, config.delta, continuous=continuous_gaussian(noise))
    levels = tree_levels(300) if privacy == "jdp" else 1
    total = sum(f.l2 for f in fams.values())
    for f in fams.values():
        assert f.scale**2 == pytest.approx(levels * f.l2 * total / (2 * rho), rel=1e-12)
    one_sigma2 = levels * sum(f.l2**2 for f in fams.values()) / (2 * rho)
    assert sum(f.scale**2 for f in fams.values()) < 2 * one_sigma2
    plan = release_plan(config)
    assert plan_totals(plan, config.delta).epsilon == pytest.approx(2.0, rel=1e-9)
    assert plan_totals(plan, config.delta).epsilon <= 2.0 * (1 + 1e-9)
    spent = Ledger(plan).by_mechanism()
    for name, f in fams.items():
        share = sum(v["rho"] for k, v in spent.items() if k.endswith(f":{name}")) / rho
        assert share == pytest.approx(f.l2 / total, rel=1e-6)
    run = run_in_process(cfg(privacy=privacy, epsilon=2.0, episodes=40, noise=noise), HARD, [0])
    assert run.ledger.totals(config.delta).epsilon <= 2.0 * (1 + 1e-9)
