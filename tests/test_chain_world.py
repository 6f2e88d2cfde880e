"""The chain MRP of Balle et al. 2016: exact values, first-visit returns, the per-user
simulator and the fast sufficient-statistics simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.seeding import generator
from privrl.worlds.chain import ChainMRP
from privrl.worlds.first_visit import FirstVisits
from support.policy_eval import first_visit_returns, visit_probabilities

CHAIN = ChainMRP()


def dp_values(chain: ChainMRP) -> np.ndarray:
    """V = (I - gamma P)^{-1} r by dynamic programming, P among recorded states (a missing row
    mass ends the trajectory), r the expected reward of a step in each state."""
    n, p = chain.S, chain.stay
    trans = np.zeros((n, n))
    idx = np.arange(chain.goal)
    trans[idx, idx] = p
    trans[idx, idx + 1] = 1.0 - p
    r = np.zeros(n)
    if chain.reward == "goal":
        r[chain.goal] = 1.0  # the goal's step pays 1 and ends the trajectory
    else:
        trans[chain.goal - 1, chain.goal] = 0.0  # entering the goal pays 1 and ends it
        r[chain.goal - 1] = 1.0 - p
    return np.linalg.solve(np.eye(n) - chain.gamma * trans, r)


def users(n: int, seed: int = 1) -> list[np.random.Generator]:
    return [generator(seed, "user", k) for k in range(n)]


def test_exact_values_match_the_spec_and_dynamic_programming() -> None:
    q = 0.5 * 0.99 / (1 - 0.5 * 0.99)
    assert CHAIN.q == pytest.approx(0.98019802, abs=1e-8)
    v = CHAIN.values()
    np.testing.assert_allclose(v, q ** (39 - np.arange(40)), rtol=1e-12)
    assert v[0] == pytest.approx(0.458394, abs=1e-6) and v[38] == pytest.approx(0.980198, abs=1e-6)
    assert v[39] == 1.0
    np.testing.assert_allclose(dp_values(CHAIN), v, atol=1e-12)


def test_reading_a_pays_on_entry_and_never_records_the_goal() -> None:
    chain = ChainMRP(reward="entry")
    v = chain.values()
    assert v[39] == 0.0
    np.testing.assert_allclose(v[:39], CHAIN.values()[:39] / 0.99, rtol=1e-12)
    np.testing.assert_allclose(dp_values(chain), v, atol=1e-12)
    (states, rewards), = chain.trajectories(users(1))
    assert 39 not in states and rewards[-1] == 1.0 and rewards[:-1].sum() == 0.0


def test_visit_probabilities_of_both_start_rules() -> None:
    np.testing.assert_allclose(visit_probabilities(CHAIN)[:39], (np.arange(39) + 1) / 39)
    assert visit_probabilities(CHAIN)[39] == 1.0
    np.testing.assert_array_equal(visit_probabilities(ChainMRP(start="first")), np.ones(40))


def test_invalid_parameters_are_refused() -> None:
    for kwargs in ({"n_states": 1}, {"stay": 0.0}, {"stay": 1.0}, {"gamma": 1.0},
                   {"start": "middle"}, {"reward": "late"}):
        with pytest.raises(ValueError):
            ChainMRP(**kwargs)


def test_first_visit_returns_of_the_worked_example() -> None:
    """The worked example: x1 revisits state 0 (ignored), x2 visits only state 1."""
    x1 = first_visit_returns([0, 1, 0, 2], [0, 1, 0, 1], 0.9, 3)
    x2 = first_visit_returns([1, 1], [0.5, 0.5], 0.9, 3)
    np.testing.assert_allclose(x1.returns[0], [1.629, 1.81, 1.0], rtol=1e-12)
    np.testing.assert_allclose(x2.returns[0], [0.0, 0.95, 0.0], rtol=1e-12)
    assert x2.visited.tolist() == [[False, True, False]]
    assert x1.pairs() == [(0, pytest.approx(1.629)), (1, pytest.approx(1.81)), (2, 1.0)]


def test_first_visit_returns_ignore_a_suffix_that_visits_no_new_state() -> None:
    rng = generator(3, "suffix")
    for _ in range(20):
        states = rng.integers(0, 6, size=12)
        rewards = rng.random(12)
        full = first_visit_returns(states, rewards, 0.8, 6)
        # append steps in already visited states with zero reward: nothing changes
        tail = rng.choice(states, size=5)
        longer = first_visit_returns(np.append(states, tail), np.append(rewards, np.zeros(5)),
                                     0.8, 6)
        np.testing.assert_allclose(longer.returns, full.returns, rtol=1e-12)
        assert (full.returns >= 0).all() and (full.returns <= 1 / (1 - 0.8)).all()
        assert (full.returns[~full.visited] == 0).all()


def test_first_visits_from_pairs_refuses_a_repeated_state() -> None:
    row = FirstVisits.from_pairs([(2, 0.5), (0, 0.25)], 4)
    assert row.visited.tolist() == [[True, False, True, False]]
    with pytest.raises(ValueError, match="state 2 is listed twice"):
        FirstVisits.from_pairs([(2, 0.5), (2, 0.25)], 4)


@pytest.mark.parametrize("reward", ["goal", "entry"])
def test_per_user_first_visits_equal_the_step_by_step_trajectories(reward: str) -> None:
    """The same user streams: closed-form first visits == the generic backward/forward pass."""
    chain = ChainMRP(reward=reward)
    direct = chain.first_visits(users(50))
    rebuilt = FirstVisits.stack([
        first_visit_returns(s, r, chain.gamma, chain.S) for s, r in chain.trajectories(users(50))
    ])
    np.testing.assert_array_equal(direct.visited, rebuilt.visited)
    np.testing.assert_allclose(direct.returns, rebuilt.returns, rtol=1e-10)


def test_dwell_times_are_geometric_including_the_table_tail() -> None:
    chain = ChainMRP(stay=0.5)
    e = generator(4, "dwell").standard_exponential(200_000)
    factors = chain._discounted_dwell(e)
    dwell = np.round(np.log(factors) / np.log(chain.gamma)).astype(int)
    # P(G = 1) = 1 - p, E[G] = 1 / (1 - p): 5-sigma checks
    assert abs((dwell == 1).mean() - 0.5) < 5 * math.sqrt(0.25 / e.size)
    assert abs(dwell.mean() - 2.0) < 5 * math.sqrt(2.0 / e.size)
    huge = np.array([10.0, 60.0, 200.0])  # floor(E / ln 2) + 1 beyond the table
    expected = 0.99 ** (np.floor(huge / math.log(2)) + 1)
    np.testing.assert_allclose(chain._discounted_dwell(huge), expected, rtol=1e-12)


@pytest.mark.slow  # statistical: 20,000 users per chain, both simulators
@pytest.mark.parametrize("chain", [ChainMRP(), ChainMRP(start="first"), ChainMRP(reward="entry"),
                                   ChainMRP(n_states=7, stay=0.3, gamma=0.9)], ids=repr)
def test_fast_simulator_matches_the_per_user_simulator_in_law(chain: ChainMRP) -> None:
    """Visit counts are multinomial prefix sums; mean first-visit returns per trajectory agree
    with the per-user simulator within 5 standard errors."""
    m = 20_000
    n, g = chain.statistics(m, generator(5, "fast"), chunk=3000)
    slow = chain.first_visits(users(m, seed=6))
    p = visit_probabilities(chain)
    sd = np.sqrt(np.maximum(m * p * (1 - p), 1e-12))
    assert (np.abs(n - m * p) <= 5 * sd + 1e-9).all()
    per_user = slow.returns
    se = np.sqrt(2 * per_user.var(axis=0) / m) + 1e-12
    assert (np.abs(g / m - per_user.mean(axis=0)) <= 5 * se).all()
    if chain.reward == "goal":
        assert n[chain.goal] == m and g[chain.goal] == m
    else:
        assert n[chain.goal] == 0 and g[chain.goal] == 0
    assert (np.diff(n[: chain.goal]) >= 0).all()


def test_fast_simulator_is_reproducible_and_reaches_a_million_trajectories() -> None:
    n, g = CHAIN.statistics(10**6, generator(7, "big"))
    n2, g2 = CHAIN.statistics(10**6, generator(7, "big"))
    np.testing.assert_array_equal(n, n2)
    np.testing.assert_array_equal(g, g2)
    fbar = g / n
    # Fbar_s -> V(s): the per-state standard error is below 1e-3 at this m
    assert np.abs(fbar - CHAIN.values()).max() < 3e-3
    assert n.sum() == pytest.approx(10**6 * (visit_probabilities(CHAIN).sum()), rel=1e-2)


def test_fast_simulator_edge_cases() -> None:
    n, g = CHAIN.statistics(0, generator(1))
    assert n.sum() == 0 and g.sum() == 0
    with pytest.raises(ValueError):
        CHAIN.statistics(-1, generator(1))
