"""Privacy audits from first principles: the declared epsilon bounds the actual privacy loss.

LDP: the exact loss of the local randomizer on two trajectories, from its output densities.
JDP: two neighbouring user streams, every tree node that differs, and the loss it implies.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.ucbvi.counts import tabular_counts
from privrl.config import RunConfig
from privrl.privacy.tree import tree_levels
from privrl.worlds.rollout import Trajectories

S, A, H = 4, 2, 5


def random_trajectory(rng: np.random.Generator, disjoint_from: Trajectories | None = None):
    states = rng.integers(0, S, size=(1, H + 1))
    actions = rng.integers(0, A, size=(1, H))
    rewards = rng.random((1, H))
    if disjoint_from is not None:  # worst case: every step in a different cell, rewards 1
        states = (disjoint_from.states + 1) % S
        rewards = np.ones((1, H))
        disjoint_from.rewards[:] = 1.0
    return Trajectories(states, actions, rewards)


def config(privacy: str, mechanism: str, **kw) -> RunConfig:
    delta = 1e-5 if mechanism == "gaussian" else 0.0
    return RunConfig(
        n_states=S,
        n_actions=A,
        horizon=H,
        episodes=64,
        privacy=privacy,
        epsilon=0.7,
        delta=delta,
        mechanism=mechanism,
        # the tree every episode: the mechanics these tests check
        **({"counter": "smoothed", "schedule": "every"} if privacy == "jdp" else {}),
        **kw,
    )


def released_difference(cal, x: Trajectories, y: Trajectories, pooled: bool) -> np.ndarray:
    fx, fy = tabular_counts(x, S, A, pooled), tabular_counts(y, S, A, pooled)
    return np.concatenate([(fx[f.name] - fy[f.name]).ravel() for f in cal.families])


def laplace_log_density(y: np.ndarray, center: np.ndarray, b: float) -> float:
    return float(np.sum(-np.abs(y - center) / b - math.log(2 * b)))


@pytest.mark.parametrize("pooled", [False, True])
@pytest.mark.parametrize("pairs", ["released", "derived"])
def test_ldp_laplace_loss_from_densities_never_exceeds_epsilon(pooled, pairs):
    cfg = config("ldp", "laplace", knobs={"pooled": pooled, "pair_counts": pairs})
    cal = bind(cfg).calibration()
    b = cal.mechanism.scale
    rng = np.random.default_rng(0)
    worst = 0.0
    for i in range(300):
        x = random_trajectory(rng)
        y = random_trajectory(rng, disjoint_from=x if i % 2 else None)
        fx = np.concatenate([tabular_counts(x, S, A, pooled)[f.name].ravel() for f in cal.families])
        fy = np.concatenate([tabular_counts(y, S, A, pooled)[f.name].ravel() for f in cal.families])
        # the output maximizing p(out|x)/p(out|y) lies beyond fx, away from fy
        out = fx + np.sign(fx - fy) * 10 * b
        loss = laplace_log_density(out, fx, b) - laplace_log_density(out, fy, b)
        assert loss <= cfg.epsilon + 1e-9
        worst = max(worst, loss)
    assert worst == pytest.approx(cfg.epsilon)  # the disjoint pairs attain the bound


@pytest.mark.parametrize("pooled", [False, True])
def test_ldp_gaussian_rho_from_actual_differences(pooled):
    cfg = config("ldp", "gaussian", knobs={"pooled": pooled})
    cal = bind(cfg).calibration()
    budget_rho = sum(f.cost for f in cal.families)
    rng = np.random.default_rng(1)
    for i in range(300):
        x = random_trajectory(rng)
        y = random_trajectory(rng, disjoint_from=x if i % 2 else None)
        if pooled and i % 3 == 0:  # pooled worst case: every step in one cell
            x = Trajectories(np.zeros((1, H + 1), int), np.zeros((1, H), int), np.ones((1, H)))
            y = Trajectories(np.ones((1, H + 1), int), np.ones((1, H), int), np.ones((1, H)))
        diff = released_difference(cal, x, y, pooled)
        rho = float(diff @ diff) / (2 * cal.mechanism.sigma**2)
        assert rho <= budget_rho + 1e-12


def _node_sums(items: np.ndarray, levels: int) -> list[np.ndarray]:
    """All dyadic node sums (level j, index i covers items ((i-1)2^j, i 2^j]) of a stream."""
    n = len(items)
    nodes = []
    for j in range(levels):
        for idx in range(1, n // 2**j + 1):
            nodes.append(items[(idx - 1) * 2**j : idx * 2**j].sum(axis=0))
    return nodes


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_jdp_neighbouring_streams_differ_by_at_most_the_declared_loss(mechanism):
    """Users equal except user j: the loss over every noisy tree node is within the budget."""
    cfg = config("jdp", mechanism)
    cal = bind(cfg).calibration()
    levels = tree_levels(cfg.episodes)
    rng = np.random.default_rng(2)
    users = [random_trajectory(rng) for _ in range(cfg.episodes)]
    for j in (0, 5, 31, 63):
        other = random_trajectory(rng, disjoint_from=users[j])
        loss = 0.0
        for fam in cal.families:
            a = np.stack([tabular_counts(u, S, A)[fam.name][0].ravel() for u in users])
            b = a.copy()
            b[j] = tabular_counts(other, S, A)[fam.name][0].ravel()
            diffs = [
                x - y for x, y in zip(_node_sums(a, levels), _node_sums(b, levels), strict=True)
            ]
            changed = [d for d in diffs if np.any(d != 0)]
            assert len(changed) <= levels
            if mechanism == "laplace":
                loss += sum(np.abs(d).sum() for d in changed) / cal.mechanism.scale
            else:
                loss += sum(float(d @ d) for d in changed) / (2 * cal.mechanism.sigma**2)
        budget = (
            cfg.epsilon if mechanism == "laplace" else sum(f.cost for f in cal.families) * levels
        )
        assert loss <= budget + 1e-9
        assert loss == pytest.approx(budget, rel=0.35)  # the worst case nearly attains it
