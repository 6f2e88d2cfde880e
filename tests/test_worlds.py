"""Tests for privrl.worlds: tabular MDPs, exact evaluation, seeded rollouts, the gym-style env."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from privrl.seeding import generator
from privrl.worlds import (
    N_UNIFORMS,
    TabularEnv,
    TabularMDP,
    WorldError,
    draw_uniforms,
    episode_regret,
    expected_return,
    garnet,
    load_npz,
    optimal_q,
    optimal_return,
    policy_values,
    riverswim,
    rollout,
    uniform_random_return,
)

H20 = 20


def _const_policy(mdp: TabularMDP, action: int) -> np.ndarray:
    """The policy that always plays `action`, shape (H, S)."""
    return np.full((mdp.H, mdp.S), action, dtype=np.int64)


def _random_policies(mdp: TabularMDP, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random deterministic policies of shape (*shape, H, S)."""
    return generator(seed, "test-policies").integers(0, mdp.A, size=(*shape, mdp.H, mdp.S))


def _tiny_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A valid stationary (S=3, A=2) world as raw arrays."""
    P = np.array(
        [
            [[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]],
            [[1.0, 0.0, 0.0], [0.1, 0.1, 0.8]],
            [[0.0, 0.0, 1.0], [0.3, 0.3, 0.4]],
        ]
    )
    R = np.array([[0.0, 0.1], [0.5, 0.2], [1.0, 0.0]])
    d1 = np.array([0.2, 0.8, 0.0])
    return P, R, d1


# ------------------------------------------------------------------------------------------
# RiverSwim and exact evaluation
# ------------------------------------------------------------------------------------------


def test_riverswim_reference_values() -> None:
    mdp = riverswim(horizon=H20)
    assert (mdp.H, mdp.S, mdp.A) == (20, 6, 2)
    assert mdp.is_stationary()
    assert mdp.reward_noise == "deterministic"
    assert round(optimal_return(mdp), 4) == 3.3973
    assert round(float(expected_return(mdp, _const_policy(mdp, 1))), 4) == 3.3966
    assert round(float(expected_return(mdp, _const_policy(mdp, 0))), 3) == 0.100
    assert round(uniform_random_return(mdp), 4) == 0.0438


def test_riverswim_structure() -> None:
    mdp = riverswim()
    P = mdp.P[0]
    assert P[0, 1, 0] == 0.4 and P[0, 1, 1] == 0.6
    assert P[5, 1, 5] == 0.6 and P[5, 1, 4] == 0.4
    for s in range(1, 5):
        assert (P[s, 1, s - 1], P[s, 1, s], P[s, 1, s + 1]) == (0.05, 0.6, 0.35)
        assert P[s, 0, s - 1] == 1.0
    assert P[0, 0, 0] == 1.0
    R = mdp.R[0]
    assert R[0, 0] == 0.005 and R[5, 1] == 1.0 and R.sum() == 1.005
    assert mdp.d1.tolist() == [1, 0, 0, 0, 0, 0]


def test_optimal_q_consistency() -> None:
    mdp = garnet(7, 3, 5, seed=11, stationary=False)
    Q, V = optimal_q(mdp)
    assert Q.shape == (5, 7, 3) and V.shape == (6, 7)
    assert np.all(V[-1] == 0.0)
    np.testing.assert_allclose(V[:-1], Q.max(axis=-1))
    np.testing.assert_allclose(Q, mdp.R + np.einsum("hsat,ht->hsa", mdp.P, V[1:]))
    greedy = Q.argmax(axis=-1)
    np.testing.assert_allclose(policy_values(mdp, greedy), V, atol=1e-12)
    assert abs(float(episode_regret(mdp, greedy))) < 1e-12
    assert np.all((V >= 0) & (V <= np.arange(mdp.H, -1, -1)[:, None] + 1e-12))
    Q[0, 0, 0] = -1.0  # returned arrays are private copies
    assert optimal_q(mdp)[0][0, 0, 0] != -1.0


@pytest.mark.parametrize("world", ["riverswim", "garnet"])
def test_regret_in_range(world: str) -> None:
    mdp = riverswim() if world == "riverswim" else garnet(10, 4, 8, seed=3)
    pols = _random_policies(mdp, (4, 50), seed=1)
    reg = episode_regret(mdp, pols)
    assert reg.shape == (4, 50)
    assert np.all(reg >= -1e-12)
    assert np.all(reg <= optimal_return(mdp) + 1e-12)


def test_policy_values_batch_equals_loop() -> None:
    mdp = garnet(8, 3, 6, seed=5, stationary=False)
    pols = _random_policies(mdp, (3, 4), seed=2)
    V = policy_values(mdp, pols)
    assert V.shape == (3, 4, mdp.H + 1, mdp.S)
    for i, j in itertools.product(range(3), range(4)):
        single = policy_values(mdp, pols[i, j])
        np.testing.assert_array_equal(V[i, j], single)
        # independent reference: Q^pi via the Bellman equation, then pick pi's action
        ref = np.zeros((mdp.H + 1, mdp.S))
        for h in range(mdp.H - 1, -1, -1):
            Qh = mdp.R[h] + mdp.P[h] @ ref[h + 1]
            ref[h] = Qh[np.arange(mdp.S), pols[i, j, h]]
        np.testing.assert_allclose(single, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(expected_return(mdp, pols), V[..., 0, :] @ mdp.d1)


def test_uniform_random_return_is_mean_over_deterministic_policies() -> None:
    # each (h, s) is decided at most once per episode, so iid uniform actions per (h, s) induce
    # exactly the uniformly random policy's trajectory law
    mdp = garnet(2, 2, 2, seed=9, stationary=False)
    all_pols = np.array(list(itertools.product(range(2), repeat=4))).reshape(-1, 2, 2)
    assert np.isclose(expected_return(mdp, all_pols).mean(), uniform_random_return(mdp))


def test_policy_validation() -> None:
    mdp = riverswim(horizon=4)
    with pytest.raises(ValueError, match="integer"):
        policy_values(mdp, np.zeros((4, 6)))
    with pytest.raises(ValueError, match="shape"):
        policy_values(mdp, np.zeros((5, 6), dtype=int))
    with pytest.raises(ValueError, match="outside"):
        policy_values(mdp, np.full((4, 6), 2))


# ------------------------------------------------------------------------------------------
# rollout
# ------------------------------------------------------------------------------------------


def _uniforms(n: int, horizon: int, seed: int) -> np.ndarray:
    """Per-user uniforms from per-user generators (the production layout)."""
    return draw_uniforms([generator(seed, "test-user", k) for k in range(n)], horizon)


def test_n_uniforms_and_draw_uniforms() -> None:
    assert N_UNIFORMS(20) == 41
    u = _uniforms(3, 20, seed=0)
    assert u.shape == (3, 41) and np.all((u >= 0) & (u < 1))
    np.testing.assert_array_equal(u[1], generator(0, "test-user", 1).random(41))
    assert draw_uniforms([], 5).shape == (0, 11)


@pytest.mark.slow  # statistical: Monte Carlo over 20,000 rollouts
@pytest.mark.parametrize(
    "mdp",
    [
        riverswim(),
        garnet(12, 3, 10, seed=4, stationary=False),
        TabularMDP.from_arrays(*_tiny_arrays(), horizon=15, reward_noise="bernoulli"),
    ],
    ids=["riverswim", "garnet", "bernoulli"],
)
def test_rollout_monte_carlo_matches_expected_return(mdp: TabularMDP) -> None:
    n = 20_000
    pol = _random_policies(mdp, (), seed=7)
    traj = rollout(mdp, pol, _uniforms(n, mdp.H, seed=123))
    returns = traj.returns
    se = returns.std(ddof=1) / np.sqrt(n)
    assert abs(returns.mean() - float(expected_return(mdp, pol))) < 5 * se + 1e-12


def test_rollout_shapes_and_invariants() -> None:
    mdp = garnet(9, 4, 7, seed=2, stationary=False)
    pols = _random_policies(mdp, (50,), seed=3)
    traj = rollout(mdp, pols, _uniforms(50, mdp.H, seed=1))
    assert traj.states.shape == (50, 8) and traj.states.dtype == np.int64
    assert traj.actions.shape == (50, 7) and traj.actions.dtype == np.int64
    assert traj.rewards.shape == (50, 7) and traj.rewards.dtype == np.float64
    rows = np.arange(50)[:, None]
    hs = np.arange(7)[None, :]
    np.testing.assert_array_equal(traj.actions, pols[rows, hs, traj.states[:, :-1]])
    # every observed transition has positive probability; rewards are the means
    assert np.all(mdp.P[hs, traj.states[:, :-1], traj.actions, traj.states[:, 1:]] > 0)
    np.testing.assert_array_equal(traj.rewards, mdp.R[hs, traj.states[:, :-1], traj.actions])
    assert np.all(traj.states[:, 0] == 0)


def test_rollout_deterministic_and_rowwise() -> None:
    mdp = TabularMDP.from_arrays(*_tiny_arrays(), horizon=6, reward_noise="bernoulli")
    pols = _random_policies(mdp, (8,), seed=4)
    u = _uniforms(8, mdp.H, seed=5)
    a = rollout(mdp, pols, u)
    b = rollout(mdp, pols.copy(), u.copy())
    for field in ("states", "actions", "rewards"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    for i in range(8):
        one = rollout(mdp, pols[i : i + 1], u[i : i + 1])
        np.testing.assert_array_equal(one.states[0], a.states[i])
        np.testing.assert_array_equal(one.actions[0], a.actions[i])
        np.testing.assert_array_equal(one.rewards[0], a.rewards[i])
    shared_pol = rollout(mdp, pols[0], u)  # one (H, S) policy for every row
    stacked = rollout(mdp, np.broadcast_to(pols[0], (8, *pols[0].shape)), u)
    np.testing.assert_array_equal(shared_pol.states, stacked.states)


def _tied_world(n_states: int, noise: str = "deterministic") -> TabularMDP:
    """H = 9, A = 3, every transition row one of two distributions in multiples of 1/64 (their
    cumulative sums exact), so a uniform equal to a CDF value is a tie in most rows."""
    g = generator(n_states, "tied-world")
    base = np.stack([g.multinomial(64, np.full(n_states, 1 / n_states)) / 64 for _ in range(2)])
    P = base[g.integers(0, 2, size=(9, n_states, 3))]
    return TabularMDP(P, g.random((9, n_states, 3)), base[0], reward_noise=noise)


def _tied_uniforms(mdp: TabularMDP, rows: int) -> np.ndarray:
    """Users' uniforms whose s_1 and transition draws all equal CDF values (ties of the inverse
    CDF: #{cdf <= u} counts the equal entry)."""
    u = _uniforms(rows, mdp.H, seed=8)
    cdf_values = np.unique(mdp.cum_P)
    u[:, : 1 + mdp.H] = generator(9, "ties").choice(cdf_values[cdf_values < 1.0],
                                                     (rows, 1 + mdp.H))
    return u


def _reference_rollout(mdp: TabularMDP, pols: np.ndarray, u: np.ndarray) -> np.ndarray:
    """States of the layout's inverse CDF #{cdf <= u}, clipped to S-1, step by step in Python."""
    def draw(cdf: np.ndarray, x: float) -> int:
        return min(int((cdf <= x).sum()), cdf.size - 1)

    states = np.empty((len(u), mdp.H + 1), np.int64)
    for i, (pol, row) in enumerate(zip(pols, u, strict=True)):
        states[i, 0] = draw(mdp.cum_d1, row[0])
        for h in range(mdp.H):
            s = states[i, h]
            states[i, h + 1] = draw(mdp.cum_P[h, s, pol[h, s]], row[1 + h])
    return states


@pytest.mark.parametrize("n_states", [3, 16, 40])
@pytest.mark.parametrize("noise", ["deterministic", "bernoulli"])
def test_rollout_equals_the_inverse_cdf_step_by_step(n_states: int, noise: str) -> None:
    """The compiled rollout draws the layout's inverse CDF, ties included; every user alone
    gets the trajectory the batch gives it, with the batch's dtypes."""
    mdp = _tied_world(n_states, noise)
    pols = _random_policies(mdp, (6,), seed=7)
    u = _tied_uniforms(mdp, 6)
    batch = rollout(mdp, pols, u)
    np.testing.assert_array_equal(batch.states, _reference_rollout(mdp, pols, u))
    for i in range(6):
        one = rollout(mdp, pols[i], u[i : i + 1])  # one (H, S) policy, one row of uniforms
        for field in ("states", "actions", "rewards"):
            got, want = getattr(one, field), getattr(batch, field)[i : i + 1]
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_rollout_counts_the_entries_of_a_decreasing_cdf_row() -> None:
    """A cumulative row that passes 1 before its last positive entry is pinned back to 1, so it
    decreases: the draw still counts its entries <= u (not a bisection)."""
    P = np.array([[[0.5, 0.5000000000000002, 1e-17]], [[0.2, 0.3, 0.5]], [[0.0, 0.0, 1.0]]])
    mdp = TabularMDP.from_arrays(P, np.full((3, 1), 0.5), np.full(3, 1 / 3), horizon=4)
    assert (np.diff(mdp.cum_P, axis=-1) < 0).any()
    u = _uniforms(4, mdp.H, seed=3)
    pols = np.zeros((4, mdp.H, mdp.S), np.int64)
    batch = rollout(mdp, pols, u)
    np.testing.assert_array_equal(batch.states, _reference_rollout(mdp, pols, u))
    np.testing.assert_array_equal(rollout(mdp, pols[:1], u[:1]).states, batch.states[:1])


def test_rollout_uniform_layout() -> None:
    P = np.zeros((2, 1, 2))
    P[0, 0] = [0.25, 0.75]
    P[1, 0] = [0.25, 0.75]
    R = np.array([[0.3], [0.9]])
    d1 = np.array([0.5, 0.5])
    H = 2
    det = TabularMDP.from_arrays(P, R, d1, horizon=H)
    ber = TabularMDP.from_arrays(P, R, d1, horizon=H, reward_noise="bernoulli")
    pol = np.zeros((H, 2), dtype=np.int64)
    #              s1    s2    s3    r1    r2
    u = np.array([[0.49, 0.25, 0.24, 0.29, 0.95], [0.50, 0.10, 0.90, 0.95, 0.10]])
    t = rollout(ber, pol, u)
    np.testing.assert_array_equal(t.states, [[0, 1, 0], [1, 0, 1]])
    np.testing.assert_array_equal(t.rewards, [[1.0, 0.0], [0.0, 1.0]])
    td = rollout(det, pol, u)
    np.testing.assert_array_equal(td.states, t.states)
    np.testing.assert_array_equal(td.rewards, [[0.3, 0.9], [0.9, 0.3]])
    u2 = u.copy()
    u2[:, 1 + H :] = 0.999  # reward uniforms never affect states
    np.testing.assert_array_equal(rollout(ber, pol, u2).states, t.states)


def test_rollout_never_samples_zero_probability_states() -> None:
    # cumsum of ten 0.1's ends at 0.9999999999999999; a trailing zero-probability state follows
    row = np.array([0.1] * 10 + [0.0])
    S = row.size
    P = np.broadcast_to(row, (S, 1, S)).copy()
    mdp = TabularMDP.from_arrays(P, np.zeros((S, 1)), row, horizon=3)
    top = np.nextafter(1.0, 0.0)
    u = np.array([[top] * N_UNIFORMS(3), [0.0] * N_UNIFORMS(3)])
    t = rollout(mdp, np.zeros((3, S), dtype=np.int64), u)
    np.testing.assert_array_equal(t.states, [[9, 9, 9, 9], [0, 0, 0, 0]])


def test_rollout_input_validation() -> None:
    mdp = riverswim(horizon=3)
    pol = _const_policy(mdp, 1)
    with pytest.raises(ValueError, match="shape"):
        rollout(mdp, pol, np.zeros((2, 6)))
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        rollout(mdp, pol, np.ones((2, 7)))
    with pytest.raises(ValueError, match="rows"):
        rollout(mdp, np.stack([pol] * 3), np.zeros((2, 7)))
    with pytest.raises(ValueError, match="outside"):
        rollout(mdp, pol + 1, np.zeros((2, 7)))


# ------------------------------------------------------------------------------------------
# TabularEnv
# ------------------------------------------------------------------------------------------


def test_env_reproduces_rollout_exactly() -> None:
    mdp = TabularMDP.from_arrays(*_tiny_arrays(), horizon=5, reward_noise="bernoulli")
    pol = _random_policies(mdp, (), seed=8)
    env = TabularEnv(mdp)
    episodes = []
    s, info = env.reset(seed=42)
    for ep in range(3):
        if ep:
            s, info = env.reset()
        assert info == {"h": 0}
        states, rewards = [s], []
        for h in range(mdp.H):
            s, r, terminated, truncated, _ = env.step(int(pol[h, s]))
            states.append(s)
            rewards.append(r)
            assert terminated == (h == mdp.H - 1) and truncated is False
        episodes.append((states, rewards))
    g = generator(42, "env")
    traj = rollout(mdp, pol, draw_uniforms([g, g, g], mdp.H))
    for k, (states, rewards) in enumerate(episodes):
        assert states == traj.states[k].tolist()
        assert rewards == traj.rewards[k].tolist()


@pytest.mark.slow  # statistical: transition frequencies over 3000 episodes
def test_env_transition_law_statistically() -> None:
    mdp = riverswim(horizon=10)
    env = TabularEnv(mdp)
    counts = np.zeros((mdp.S, mdp.S))
    returns = []
    env.reset(seed=0)
    for _ in range(3000):
        s, _ = env.reset()
        total = 0.0
        done = False
        while not done:
            nxt, r, done, _, _ = env.step(1)
            counts[s, nxt] += 1
            total += r
            s = nxt
        returns.append(total)
    n = counts.sum(axis=1, keepdims=True)
    visited = n[:, 0] > 500
    assert visited.sum() >= 4
    freq = counts[visited] / n[visited]
    p = mdp.P[0, visited, 1]
    se = np.sqrt(p * (1 - p) / n[visited])
    assert np.all(np.abs(freq - p) <= 5 * se + 1e-12)
    ret = np.array(returns)
    assert abs(ret.mean() - float(expected_return(mdp, _const_policy(mdp, 1)))) < 5 * ret.std(
        ddof=1
    ) / np.sqrt(ret.size)


def test_env_errors() -> None:
    env = TabularEnv(riverswim(horizon=2))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=1)
    with pytest.raises(ValueError, match="action"):
        env.step(2)
    env.step(0)
    _, _, terminated, _, _ = env.step(1)
    assert terminated
    with pytest.raises(RuntimeError, match="over"):
        env.step(0)
    s, _ = env.reset()
    assert s == 0


# ------------------------------------------------------------------------------------------
# Garnet
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stationary", [True, False])
def test_garnet_reproducible_and_valid(stationary: bool) -> None:
    a = garnet(15, 4, 6, seed=21, stationary=stationary)
    b = garnet(15, 4, 6, seed=21, stationary=stationary)
    c = garnet(15, 4, 6, seed=22, stationary=stationary)
    np.testing.assert_array_equal(a.P, b.P)
    np.testing.assert_array_equal(a.R, b.R)
    assert not np.array_equal(a.P, c.P)
    assert a.P.shape == (6, 15, 4, 15) and a.R.shape == (6, 15, 4)
    np.testing.assert_allclose(a.P.sum(axis=-1), 1.0, atol=1e-12)
    assert np.all((a.R >= 0) & (a.R <= 1))
    assert np.all(np.count_nonzero(a.P, axis=-1) == 3)  # default branching max(2, 15 // 5)
    assert a.d1.tolist() == [1.0] + [0.0] * 14
    assert a.is_stationary() == stationary


def test_garnet_branching() -> None:
    g = garnet(6, 2, 3, seed=0, branching=6)
    assert np.all(np.count_nonzero(g.P, axis=-1) == 6)
    assert np.all(np.count_nonzero(garnet(3, 2, 3, seed=0).P, axis=-1) == 2)
    with pytest.raises(WorldError, match="branching"):
        garnet(4, 2, 3, seed=0, branching=5)


# ------------------------------------------------------------------------------------------
# from_arrays / load_npz validation
# ------------------------------------------------------------------------------------------


def test_from_arrays_broadcast_and_nonstationary() -> None:
    P, R, d1 = _tiny_arrays()
    mdp = TabularMDP.from_arrays(P, R, d1, horizon=4, name="tiny")
    assert (mdp.H, mdp.S, mdp.A, mdp.name) == (4, 3, 2, "tiny")
    assert mdp.is_stationary()
    assert not mdp.P.flags.writeable
    R_h = np.stack([R, R * 0.5, R, R])
    mixed = TabularMDP.from_arrays(P, R_h, d1)  # horizon inferred from R
    assert mixed.H == 4 and not mixed.is_stationary()
    P[0, 0] = [1.0, 0.0, 0.0]  # caller's arrays are copied
    assert mdp.P[0, 0, 0, 0] == 0.5


def test_stationary_error_names_index() -> None:
    P, R, d1 = _tiny_arrays()
    P[2, 1] = [0.3, 0.3, 0.37]
    with pytest.raises(WorldError, match=r"P\[s=2, a=1\] sums to 0\.97, expected 1"):
        TabularMDP.from_arrays(P, R, d1, horizon=3)


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda P, R, d1: P.__setitem__((3, 2, 1), [0.3, 0.3, 0.37]), r"P\[h=3, s=2, a=1\] sums"),
        (lambda P, R, d1: R.__setitem__((1, 0, 1), 1.5), r"R\[h=1, s=0, a=1\] = 1\.5 .*\[0, 1\]"),
        (lambda P, R, d1: R.__setitem__((0, 2, 0), -0.1), r"R\[h=0, s=2, a=0\] = -0\.1"),
        (lambda P, R, d1: P.__setitem__((0, 1, 0, 1), np.nan), r"P contains a non-finite"),
        (lambda P, R, d1: R.__setitem__((2, 1, 1), np.inf), r"R contains a non-finite"),
        (
            lambda P, R, d1: P.__setitem__((1, 0, 0), [1.2, -0.2, 0.0]),
            r"non-negative: P\[h=1, s=0, a=0, s'=1\]",
        ),
        (lambda P, R, d1: d1.__setitem__(0, 0.5), r"d1 sums to 1\.3, expected 1"),
    ],
)
def test_from_arrays_value_errors(mutate, pattern: str) -> None:
    P, R, d1 = _tiny_arrays()
    P4 = np.stack([P] * 4)
    R4 = np.stack([R] * 4)
    mutate(P4, R4, d1)
    with pytest.raises(WorldError, match=pattern):
        TabularMDP.from_arrays(P4, R4, d1)


def test_from_arrays_shape_errors() -> None:
    P, R, d1 = _tiny_arrays()
    with pytest.raises(WorldError, match=r"R has shape \(3, 3\) but P implies \(S, A\) = \(3, 2\)"):
        TabularMDP.from_arrays(P, np.zeros((3, 3)), d1, horizon=2)
    with pytest.raises(WorldError, match=r"d1 has shape \(4,\)"):
        TabularMDP.from_arrays(P, R, np.array([1.0, 0, 0, 0]), horizon=2)
    with pytest.raises(WorldError, match="last axis"):
        TabularMDP.from_arrays(np.ones((3, 2, 1)), R, d1, horizon=2)
    with pytest.raises(WorldError, match=r"P must have shape"):
        TabularMDP.from_arrays(np.ones((3, 2)), R, d1, horizon=2)
    with pytest.raises(WorldError, match="horizon must be given"):
        TabularMDP.from_arrays(P, R, d1)
    with pytest.raises(WorldError, match="P has horizon 4 .* R has horizon 3"):
        TabularMDP.from_arrays(np.stack([P] * 4), np.stack([R] * 3), d1)
    with pytest.raises(WorldError, match="horizon=5 disagrees"):
        TabularMDP.from_arrays(np.stack([P] * 4), R, d1, horizon=5)
    with pytest.raises(WorldError, match="reward_noise"):
        TabularMDP.from_arrays(P, R, d1, horizon=2, reward_noise="gaussian")  # type: ignore[arg-type]
    with pytest.raises(WorldError, match="numeric"):
        TabularMDP.from_arrays(P, R, np.array(["a", "b", "c"], dtype=object), horizon=2)
    with pytest.raises(WorldError, match=r"\(H, S, A, S\)"):
        TabularMDP(P=P, R=np.stack([R]), d1=d1)


def test_load_npz_roundtrip_and_broadcast(tmp_path: Path) -> None:
    P, R, d1 = _tiny_arrays()
    f = tmp_path / "tiny.npz"
    np.savez(f, P=P, R=R, d1=d1)
    mdp = load_npz(f, horizon=7)
    assert (mdp.H, mdp.S, mdp.A, mdp.name) == (7, 3, 2, "tiny")
    assert mdp.is_stationary()
    np.testing.assert_array_equal(mdp.P[6], P)
    np.testing.assert_array_equal(mdp.R[3], R)
    ref = TabularMDP.from_arrays(P, R, d1, horizon=7)
    assert optimal_return(mdp) == optimal_return(ref)
    with pytest.raises(WorldError, match="horizon must be given"):
        load_npz(f)
    g = tmp_path / "with_h.npz"
    np.savez(g, P=P, R=R, d1=d1, H=np.array(5))
    assert load_npz(g).H == 5
    with pytest.raises(WorldError, match="disagrees with H=5"):
        load_npz(g, horizon=6)
    full = garnet(5, 2, 3, seed=1, stationary=False)
    h = tmp_path / "full.npz"
    np.savez(h, P=full.P, R=full.R, d1=full.d1)
    loaded = load_npz(h)
    np.testing.assert_array_equal(loaded.P, full.P)
    assert load_npz(h, reward_noise="bernoulli").reward_noise == "bernoulli"


def test_load_npz_errors(tmp_path: Path) -> None:
    P, R, d1 = _tiny_arrays()
    with pytest.raises(WorldError, match="does not exist"):
        load_npz(tmp_path / "nope.npz", horizon=2)
    miss = tmp_path / "miss.npz"
    np.savez(miss, P=P, d1=d1)
    with pytest.raises(WorldError, match=r"missing key\(s\) R"):
        load_npz(miss, horizon=2)
    bad_row = tmp_path / "bad_row.npz"
    Pb = P.copy()
    Pb[1, 0] = [0.5, 0.2, 0.2]
    np.savez(bad_row, P=Pb, R=R, d1=d1)
    with pytest.raises(WorldError, match=r"bad_row\.npz.*P\[s=1, a=0\] sums to 0\.9, expected 1"):
        load_npz(bad_row, horizon=2)
    bad_r = tmp_path / "bad_r.npz"
    np.savez(bad_r, P=P, R=R + 1.0, d1=d1)
    with pytest.raises(WorldError, match=r"outside \[0, 1\]"):
        load_npz(bad_r, horizon=2)
    nan = tmp_path / "nan.npz"
    Rn = R.copy()
    Rn[0, 0] = np.nan
    np.savez(nan, P=P, R=Rn, d1=d1)
    with pytest.raises(WorldError, match="non-finite"):
        load_npz(nan, horizon=2)
    shape = tmp_path / "shape.npz"
    np.savez(shape, P=P, R=R[:2], d1=d1)
    with pytest.raises(WorldError, match=r"R has shape \(2, 2\)"):
        load_npz(shape, horizon=2)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(WorldError, match="not a readable .npz"):
        load_npz(junk, horizon=2)
    single = tmp_path / "single.npy"
    np.save(single, P)
    with pytest.raises(WorldError, match="single array"):
        load_npz(single, horizon=2)
    bad_h = tmp_path / "bad_h.npz"
    np.savez(bad_h, P=P, R=R, d1=d1, H=np.array([2, 3]))
    with pytest.raises(WorldError, match="H must be a scalar"):
        load_npz(bad_h)
