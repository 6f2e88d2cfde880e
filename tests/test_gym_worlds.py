"""Gymnasium interop: privrl worlds as gymnasium.Env, gymnasium toy-text worlds as exact MDPs,
the world registry, runs and the CLI on gymnasium worlds, and the missing-extra error."""

from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium  # in the test extra: a missing gymnasium must fail loudly, not skip
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from privrl.client.cli import main
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.seeding import generator
from privrl.worlds import (
    TabularMDP,
    WorldError,
    as_gymnasium_env,
    draw_uniforms,
    from_gymnasium,
    garnet,
    gymnasium_table,
    list_worlds,
    make,
    optimal_q,
    optimal_return,
    riverswim,
    rollout,
)
from privrl.worlds.gym import GymnasiumMissing, RewardMap, env_family
from privrl.worlds.registry import UnknownWorld

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3  # FrozenLake's actions
SAFE_PATH = [DOWN, DOWN, RIGHT, DOWN, RIGHT, RIGHT]  # S(0,0) -> G(3,3) on the 4x4 map
SAFE_STATES = [4, 8, 9, 13, 14, 15]
SWIM_RIGHT = 1  # RiverSwim's upstream action


def _installed(family: str) -> str:
    """The id of `family` in the installed gymnasium (Taxi-v3 or -v4, CliffWalking-v0 or -v1)."""
    ids = [i for i in gymnasium.registry if "/" not in i and env_family(i) == family]
    if not ids:
        pytest.skip(f"gymnasium has no {family}")
    return max(ids, key=lambda i: int(i.rsplit("-v", 1)[1]))


TAXI = _installed("Taxi")
CLIFF = _installed("CliffWalking")


def _episode(env, seed: int | None, actions) -> list[tuple]:
    """Play `actions` (a callable obs, h -> action) for one episode; list of step returns."""
    obs, _ = env.reset(seed=seed)
    out = [(obs,)]
    for h in range(env.unwrapped.mdp.H):
        step = env.step(actions(obs, h))
        out.append(step[:4])
        obs = step[0]
        if step[2] or step[3]:
            break
    return out


def _independent_optimum(env_id: str, horizon: int, **kw) -> float:
    """Optimal expected return in env units within `horizon` steps, by value iteration over
    env.unwrapped.P with gymnasium's own semantics (a terminating transition ends the episode)."""
    env = gymnasium.make(env_id, **kw).unwrapped
    S, A = env.observation_space.n, env.action_space.n
    V = np.zeros(S)
    for _ in range(horizon):
        V = np.array(
            [
                max(
                    sum(p * (r + (0.0 if t else V[s2])) for p, s2, r, t in env.P[s][a])
                    for a in range(A)
                )
                for s in range(S)
            ]
        )
    return float(env.initial_state_distrib @ V)


# --------------------------------------------------------------------------------------------
# privrl worlds as gymnasium envs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mdp",
    [
        riverswim(),
        garnet(8, 3, 5, seed=4),
        garnet(6, 2, 4, seed=1, stationary=False),
        make("gymnasium:FrozenLake-v1", is_slippery=False),
    ],
    ids=["riverswim", "garnet", "garnet-nonstationary", "frozenlake"],
)
def test_check_env_passes(mdp: TabularMDP):
    env = as_gymnasium_env(mdp)
    assert isinstance(env, gymnasium.Env)
    assert env.observation_space == gymnasium.spaces.Discrete(mdp.S)
    assert env.action_space == gymnasium.spaces.Discrete(mdp.A)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any gymnasium warning fails the test
        check_env(env, skip_render_check=True)


def test_same_seed_same_episode_and_it_is_rollouts_episode():
    mdp = garnet(10, 3, 12, seed=2)
    env = as_gymnasium_env(mdp)
    pol = generator(5, "pol").integers(0, mdp.A, size=(mdp.H, mdp.S))
    play = lambda obs, h: int(pol[h, obs])  # noqa: E731
    a, b = _episode(env, 7, play), _episode(env, 7, play)
    assert a == b
    assert any(_episode(env, s, play) != a for s in range(8, 14))
    # np_random(seed=k) is privrl's generator(k): the episode is rollout's with those uniforms
    traj = rollout(mdp, pol, draw_uniforms([generator(7)], mdp.H))
    assert [step[0] for step in a] == traj.states[0].tolist()
    assert [step[1] for step in a[1:]] == pytest.approx(traj.rewards[0].tolist())
    # H steps, then a time limit: truncated at the last step only, never terminated
    assert len(a) == mdp.H + 1
    assert [step[3] for step in a[1:]] == [False] * (mdp.H - 1) + [True]
    assert not any(step[2] for step in a[1:])
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step(0)


def test_unseeded_resets_continue_the_stream():
    env = as_gymnasium_env(riverswim(horizon=5))
    first = [_episode(env, 3 if i == 0 else None, lambda o, h: SWIM_RIGHT) for i in range(4)]
    again = [_episode(env, 3 if i == 0 else None, lambda o, h: SWIM_RIGHT) for i in range(4)]
    assert first == again and len({str(e) for e in first}) > 1


def test_deterministic_world_follows_its_table():
    env = as_gymnasium_env(make("gymnasium:FrozenLake-v1", horizon=8, is_slippery=False))
    steps = _episode(env, 0, lambda obs, h: SAFE_PATH[h] if h < len(SAFE_PATH) else LEFT)
    assert steps[0] == (0,)
    assert [s[0] for s in steps[1:]] == [*SAFE_STATES, 15, 15]  # the goal is absorbing
    assert [s[1] for s in steps[1:]] == [0, 0, 0, 0, 0, 1.0, 0, 0]


def test_empirical_transitions_match_P():
    mdp = riverswim(horizon=30, n_states=5)
    env = as_gymnasium_env(mdp)
    counts = np.zeros((mdp.S, mdp.S))
    env.reset(seed=11)
    for _ in range(300):
        obs, _ = env.reset()
        for _ in range(mdp.H):
            nxt, *_ = env.step(SWIM_RIGHT)
            counts[obs, nxt] += 1
            obs = nxt
    n = counts.sum(axis=1)
    assert (n > 500).all()
    freq = counts / n[:, None]
    p = mdp.P[0, :, SWIM_RIGHT]
    tol = 5 * np.sqrt(p * (1 - p) / n[:, None]) + 1e-12
    assert (np.abs(freq - p) <= tol).all()
    assert (freq[p == 0] == 0).all()


# --------------------------------------------------------------------------------------------
# gymnasium worlds as exact privrl MDPs
# --------------------------------------------------------------------------------------------


def test_frozenlake_non_slippery_value_is_reaching_the_goal():
    # 6 moves reach the goal surely (reward 1 once, then the absorbing goal pays 0); 5 cannot
    for horizon in (6, 7, 20, 100):
        assert optimal_return(from_gymnasium("FrozenLake-v1", horizon, is_slippery=False)) == 1.0
    assert optimal_return(from_gymnasium("FrozenLake-v1", 5, is_slippery=False)) == 0.0
    Q, _ = optimal_q(from_gymnasium("FrozenLake-v1", 6, is_slippery=False))
    s = 0
    for h, (a, s_next) in enumerate(zip(SAFE_PATH, SAFE_STATES, strict=True)):
        assert Q[h, s, a] == 1.0
        s = s_next


def test_frozenlake_slippery_matches_independent_value_iteration():
    mdp = from_gymnasium("FrozenLake-v1", 100)
    v_star = optimal_return(mdp)
    assert v_star == pytest.approx(_independent_optimum("FrozenLake-v1", 100), abs=1e-12)
    assert v_star == pytest.approx(0.74, abs=0.01)  # gymnasium's stated optimum for 4x4
    assert optimal_return(make("gymnasium:FrozenLake-v1")) == pytest.approx(
        _independent_optimum("FrozenLake-v1", 20), abs=1e-12
    )


@pytest.mark.parametrize(
    ("env_id", "kw", "r_min", "r_max", "horizon"),
    [
        (TAXI, {}, -10.0, 20.0, 20),
        (TAXI, {"is_rainy": True}, -10.0, 20.0, 20),
        (CLIFF, {}, -100.0, 0.0, 50),
        ("FrozenLake8x8-v1", {}, 0.0, 1.0, 50),
    ],
    ids=["taxi", "taxi-rainy", "cliffwalking", "frozenlake8x8"],
)
def test_toy_text_tables(env_id, kw, r_min, r_max, horizon):
    try:
        table = gymnasium_table(env_id, **kw)
    except WorldError as exc:  # an older gymnasium without this option
        pytest.skip(str(exc))
    mdp = table.to_mdp()
    assert mdp.H == horizon
    assert np.allclose(mdp.P.sum(axis=-1), 1.0, atol=1e-12)
    assert mdp.R.min() >= 0.0 and mdp.R.max() <= 1.0
    assert table.reward_map == RewardMap(r_min, r_max)
    assert str(table.reward_map) in mdp.name
    # absorbing terminals, worth 0 in env units
    term = np.flatnonzero(table.terminal)
    assert term.size and np.all(mdp.P[0, term, :, term] == 1.0)
    assert np.allclose(table.reward_map.inverse(mdp.R[0, term]), 0.0)
    # exact: V* equals gymnasium-semantics value iteration, through the affine map
    g = _independent_optimum(env_id, horizon, **kw)
    assert optimal_return(mdp) == pytest.approx((g - horizon * r_min) / (r_max - r_min), abs=1e-9)


def test_cliffwalking_starts_at_its_fixed_start():
    mdp = make(f"gymnasium:{CLIFF}")
    assert mdp.d1[36] == 1.0  # (row 3, col 0)
    assert optimal_return(mdp) == pytest.approx((-13 + 100 * mdp.H) / 100)  # 13 steps, then 0


@pytest.mark.slow  # statistical: mean return of 1000 episodes in Gymnasium
def test_taxi_optimal_policy_in_the_real_env_earns_v_star():
    table = gymnasium_table(TAXI)
    mdp = table.to_mdp()
    Q, _ = optimal_q(mdp)
    env = gymnasium.make(TAXI, max_episode_steps=mdp.H)
    returns = []
    env.reset(seed=0)
    for _ in range(1000):
        obs, _ = env.reset()
        total, done, h = 0.0, False, 0
        while not done:
            obs, r, term, trunc, _ = env.step(int(Q[h, obs].argmax()))
            total, h, done = total + r, h + 1, term or trunc
        returns.append(total)
    v_env = optimal_return(mdp) * table.reward_map.scale + mdp.H * table.reward_map.r_min
    assert np.mean(returns) == pytest.approx(v_env, abs=0.3)
    assert 7.5 < v_env < 8.5


def test_fickle_taxi_is_refused():
    with pytest.raises(WorldError, match="fickle_passenger"):
        make(f"gymnasium:{TAXI}", fickle_passenger=True)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("gymnasium:CartPole-v1", "no public transition table"),
        ("gymnasium:NoSuchEnv-v0", "cannot make"),
        ("gymnasium:", "names no env"),
    ],
)
def test_unusable_gymnasium_envs_are_clear_errors(name, match):
    with pytest.raises(WorldError, match=match):
        make(name)


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------


def test_make_builds_every_kind_of_world(tmp_path):
    assert make("riverswim").name == "riverswim" and make("riverswim").H == 20
    assert make("riverswim", 7, n_states=4).S == 4
    g = make("garnet", 5, n_states=4, n_actions=2, seed=3)
    ref = garnet(4, 2, 5, seed=3)
    assert np.array_equal(g.P, ref.P) and np.array_equal(g.R, ref.R)
    path = tmp_path / "w.npz"
    np.savez(path, P=ref.P[0], R=ref.R[0], d1=ref.d1, H=5)
    assert np.array_equal(make(str(path)).P, ref.P)
    assert make("gymnasium:FrozenLake-v1", 9).H == 9


def test_make_refuses_unknown_names_and_params():
    with pytest.raises(UnknownWorld, match="riverswim, garnet") as info:
        make("mars")
    assert {"riverswim", "garnet", "FILE.npz", "gymnasium:FrozenLake-v1"} <= set(info.value.known)
    with pytest.raises(WorldError, match="it takes: n_states"):
        make("riverswim", depth=3)


def test_list_worlds_describes_every_world():
    worlds = {w.name: w for w in list_worlds()}
    assert worlds["riverswim"].params == {"n_states": 6}
    assert worlds["riverswim"].default_horizon == 20
    assert {"n_states", "n_actions", "seed"} <= set(worlds["garnet"].params)
    lake = worlds["gymnasium:FrozenLake-v1"]
    assert lake.params["is_slippery"] is True and lake.default_horizon == 20
    assert worlds[f"gymnasium:{TAXI}"].default_horizon == 20
    assert "FILE.npz" in worlds and "gymnasium:<EnvId>" in worlds
    for w in worlds.values():
        assert w.description and "\n" not in w.description
    for name, w in worlds.items():
        if name.startswith("gymnasium:") and "<" not in name:
            assert make(name).H == w.default_horizon


# --------------------------------------------------------------------------------------------
# learning on gymnasium worlds
# --------------------------------------------------------------------------------------------


def test_in_process_run_learns_frozenlake():
    mdp = make("gymnasium:FrozenLake-v1", 8, is_slippery=False)
    cfg = RunConfig(privacy="none", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=500)
    regret = run_in_process(cfg, mdp, [0, 1, 2]).regret
    assert regret.shape == (3, 500)
    assert regret[:, :100].mean() > 0.9  # V* = 1, a random policy almost never reaches the goal
    assert regret[:, -100:].mean() < 0.75


def test_cli_run_on_a_gymnasium_world(tmp_path, capsys):
    out = tmp_path / "res"
    rc = main(
        [
            "run",
            "--env",
            "gymnasium:FrozenLake-v1",
            "--privacy",
            "none",
            "jdp",
            "--episodes",
            "30",
            "--seeds",
            "1",
            "--workers",
            "1",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    assert (out / "summary.json").exists()
    assert "gymnasium:FrozenLake-v1" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# gymnasium is optional
# --------------------------------------------------------------------------------------------


def test_missing_gymnasium_is_a_clear_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # `import gymnasium` -> ImportError
    for call in (
        lambda: make("gymnasium:FrozenLake-v1"),
        lambda: from_gymnasium("Taxi-v3"),
        lambda: as_gymnasium_env(riverswim()),
    ):
        with pytest.raises(GymnasiumMissing, match=r"pip install 'privrl\[gym\]'"):
            call()
    assert isinstance(GymnasiumMissing("x"), ImportError)
    assert {"riverswim", "garnet", "gymnasium:<EnvId>"} <= {w.name for w in list_worlds()}
    assert make("riverswim").S == 6
    rc = main(["run", "--env", "gymnasium:Taxi-v3", "--episodes", "5", "--out", str(tmp_path)])
    assert rc == 2
    assert "pip install 'privrl[gym]'" in capsys.readouterr().err


@pytest.mark.slow
def test_importing_worlds_does_not_import_gymnasium():
    code = (
        "import sys, privrl, privrl.worlds, privrl.worlds.gym, privrl.worlds.registry,"
        " privrl.lab.experiments;"
        "assert 'gymnasium' not in sys.modules, 'gymnasium imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
