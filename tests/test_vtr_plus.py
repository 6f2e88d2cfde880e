"""Private UCRL-VTR+ (Luyo Alg. 3): reference constants, family shapes, sensitivities by brute
force, published weights, an exact ledger, eps -> inf, learning in JDP and LDP."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from privrl import trust
from privrl.algorithms import bind
from privrl.algorithms.linmix import luyo
from privrl.config import RunConfig
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.rollout import Trajectories

HARD = make("lm-hard")
NAMES = ("wgram", "wtarget", "gram2", "target2")


def cfg(mdp=HARD, **kw) -> RunConfig:
    """A UCRL-VTR+ run on `mdp` (practical, Gaussian, JDP through the tree every episode)."""
    base = dict(algo="ucrl-vtr-plus", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                model=model_spec_of(mdp), episodes=200, privacy="jdp", epsilon=1.0, delta=1e-5,
                mechanism="gaussian", preset="practical", schedule="every", counter="smoothed")
    return RunConfig(**{**base, **kw})


def test_reference_constants() -> None:
    """Reference values (d=4, H=5, K=1000, eps=0.5, delta=0.1): Cor. 10/11's sigma_B,1 and
    sigma_B,2, the budget split over four statistics (relative tolerance 1e-9)."""
    H, K, d, eps, delta = 5, 1000, 4, 0.5, 0.1
    jdp, ldp = ([luyo.paper_sigma(trust.get(name), H, K, eps, delta, s, streams=4)
                 for s in (2 * d, 2 * H**4)] for name in ("jdp", "ldp"))
    assert jdp == pytest.approx([90868.8053, 14198250.83], rel=1e-9)
    assert ldp == pytest.approx([1107.723765, 173081.8383], rel=1e-9)
    k0 = luyo.tree_depth(K)
    closed = (64 * d / eps) * math.sqrt(2 * H * k0 * math.log(16 * H / delta)
                                        * math.log(8 / delta) * math.log(32 * H * k0 / delta))
    assert jdp[0] == pytest.approx(closed, rel=1e-12)
    hat, check, tilde = luyo.bernstein_terms(d, H, K, 10, 1.0, 0.1)
    log = math.log(24 * 100 * H / 0.1)
    assert check == pytest.approx(8 * d * math.sqrt(math.log1p(K) * log) + 8 * log, rel=1e-12)
    assert hat < check < tilde


@pytest.mark.parametrize("preset", ["faithful", "practical"])
def test_families_and_message_shapes(preset: str) -> None:
    config = cfg(preset=preset, privacy="ldp", episodes=20)
    run = Run(config, [0, 1])
    d, H = HARD.model.d, HARD.H
    fams = {f.name: f for f in run.algorithm.families()}
    assert tuple(fams) == NAMES
    assert [fams[n].shape for n in NAMES] == [(H, d, d), (H, d), (H, d, d), (H, d)]
    assert [fams[n].symmetric for n in NAMES] == [True, False, True, False]
    msg = run.message()
    assert set(msg) == {"actions", "values", "weights"}
    assert msg["weights"].shape == (2, H, HARD.S, HARD.A)
    assert (msg["weights"] > 0).all() and (msg["weights"] <= d / H**2 + 1e-15).all()
    assert run.algorithm.message_arrays() == {"values": (H + 1, HARD.S),
                                              "weights": (H, HARD.S, HARD.A)}
    if preset == "faithful":
        scales = run.calibration.scales()
        sigma1 = luyo.paper_sigma(trust.get("ldp"), H, 20, 1.0, 1e-5, 2.0 * d, streams=4)
        assert scales["wgram"] == pytest.approx(scales["wtarget"], rel=1e-3)  # + rounding
        assert scales["wgram"] >= sigma1  # the paper's, grown by the rounding slack
        assert scales["gram2"] > 100 * scales["wgram"]


def _upper(x: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(x.shape[-1])
    return x[..., i, j]


@pytest.mark.parametrize("preset", ["practical", pytest.param("faithful", marks=pytest.mark.slow)])
def test_sensitivities_by_brute_force(preset: str) -> None:
    """Every trajectory of a small instance under random messages (value tables and weights,
    extreme ones too): the largest replace-one change of each family stays within its l1, l2."""
    world = make("lm-hard", 3, d=3, gap=0.1, seed=2)  # S = 5, A = 4, H = 3
    algo = bind(cfg(world, episodes=8, preset=preset, privacy="none"))
    fams = {f.name: f for f in algo.families()}
    rng = np.random.default_rng(0)
    paths = np.array(list(itertools.product(range(world.S), repeat=world.H + 1)))
    worst = {n: [0.0, 0.0] for n in NAMES}
    for trial in range(4):
        values = rng.random((1, world.H + 1, world.S)) * world.H
        weights = rng.random((1, world.H, world.S, world.A)) * 2 * world.model.d / world.H**2
        if trial % 2:
            values = np.round(values / world.H) * world.H
            weights = np.where(weights > 0.5, 10.0, 0.0)  # clipped to d / H^2
        values[:, -1] = 0.0
        actions = rng.integers(0, world.A, size=(1, world.H, world.S))
        message = {"actions": actions, "values": values, "weights": weights}
        acts = actions[0][np.arange(world.H), paths[:, :-1]]
        traj = Trajectories(paths, acts, np.zeros(acts.shape))
        stats = algo.user_statistics(traj, {k: np.repeat(v, len(paths), 0)
                                            for k, v in message.items()})
        for name in NAMES:
            arr = stats[name]
            flat = (_upper(arr) if fams[name].symmetric else arr).reshape(len(paths), -1)
            diff = flat[:, None, :] - flat[None, :, :]
            worst[name][0] = max(worst[name][0], np.abs(diff).sum(-1).max())
            worst[name][1] = max(worst[name][1], np.sqrt((diff**2).sum(-1)).max())
            assert np.abs(arr).max() <= fams[name].clean_max + 1e-9
    for name in NAMES:
        assert worst[name][0] <= fams[name].l1 + 1e-9, name
        assert worst[name][1] <= fams[name].l2 + 1e-9, name
        assert worst[name][1] >= 0.2 * fams[name].l2, name  # not vacuous


def test_weights_are_looked_up_and_clipped() -> None:
    """A user's weighted statistics are its own published weight times UCRL-VTR's; a message
    with absurd or NaN weights cannot push them past d / H^2 times UCRL-VTR's."""
    algo = bind(cfg(episodes=4))
    vtr = bind(cfg(episodes=4, algo="ucrl-vtr"))
    run = Run(cfg(episodes=4), [0])
    message = run.message()
    traj, _ = user_episode(HARD, message, [0], 0, run.algorithm, run.calibration, nonces=[0])
    stats = algo.user_statistics(traj, message)
    plain = vtr.user_statistics(traj, message)
    steps = np.arange(HARD.H)
    w = message["weights"][0, steps, traj.states[0, :-1], traj.actions[0]]
    np.testing.assert_allclose(stats["wgram"][0], w[:, None, None] * plain["gram"][0])
    np.testing.assert_allclose(stats["wtarget"][0], w[:, None] * plain["target"][0])
    bad = dict(message, weights=np.where(message["weights"] > 0.1, np.nan, 1e9))
    wild = algo.user_statistics(traj, bad)
    wmax = HARD.model.d / HARD.H**2
    assert np.isfinite(wild["wgram"]).all()
    assert (np.abs(wild["wgram"]) <= wmax * np.abs(plain["gram"]) + 1e-12).all()


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_ledger_is_exact(privacy: str) -> None:
    """Practical: the budget spent exactly; faithful: what the paper's scales spend, below it."""
    practical = run_in_process(cfg(privacy=privacy, episodes=32, epsilon=2.0), HARD, [0])
    assert practical.ledger.totals(1e-5).epsilon == pytest.approx(2.0, rel=1e-6)
    config = cfg(privacy=privacy, preset="faithful", episodes=32, delta=0.1, epsilon=0.5)
    faithful = run_in_process(config, HARD, [0])
    cal = Run(config, [0]).calibration
    times = cal.levels if privacy == "jdp" else 1
    rho = times * sum(f.l2**2 / (2 * f.scale**2) for f in cal.families)
    assert faithful.ledger.rho == pytest.approx(rho, rel=1e-12)
    assert faithful.ledger.totals(0.1).epsilon < 0.5


def test_relative_split_gives_each_family_a_quarter() -> None:
    cal = Run(cfg(episodes=16), [0]).calibration
    shares = [f.l2**2 / (2 * f.scale**2) for f in cal.families]
    assert shares == pytest.approx([shares[0]] * 4, rel=1e-9)


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_infinite_epsilon_reduces_exactly_to_non_private(privacy: str) -> None:
    base = run_in_process(cfg(privacy="none", episodes=60), HARD, [3])
    inf = run_in_process(cfg(privacy=privacy, episodes=60, epsilon=math.inf), HARD, [3])
    np.testing.assert_array_equal(inf.regret, base.regret)


@pytest.mark.slow  # statistical: regret's shape over K = 1000 episodes, 3 seeds per mode
@pytest.mark.parametrize(("privacy", "eps"), [("none", math.inf), ("jdp", 100.0),
                                              ("ldp", 1000.0)])
def test_learns_on_lm_hard(privacy: str, eps: float) -> None:
    """At a generous epsilon the last 20% of episodes' regret is under half the first 20%'s."""
    k = 1000
    res = run_in_process(cfg(privacy=privacy, episodes=k, epsilon=eps,
                             delta=0.0 if privacy == "none" else 1e-5,
                             schedule="every" if privacy == "jdp" else None,
                             counter=None), HARD, [0, 1, 2])
    first, last = res.regret[:, : k // 5].mean(), res.regret[:, -k // 5:].mean()
    assert last < 0.5 * first
    assert (res.regret >= -1e-9).all()
