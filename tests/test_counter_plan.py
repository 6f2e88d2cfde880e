"""Counter plans: every counter declares its sensitivity and variance over a schedule's T."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.privacy.continual import CounterPlan
from privrl.privacy.discrete import discrete_gaussian_variance
from privrl.privacy.matrix_counter import MatrixCounter
from privrl.privacy.schedules import Batches, EveryEpisode, Geometric
from privrl.privacy.tree import TreeCounter


@pytest.mark.parametrize("kind", ["tree", "smoothed", "matrix"])
def test_noise_spends_exactly_rho_on_the_declared_sensitivity(kind):
    plan = CounterPlan(kind, 100)
    mech = plan.noise(0.2, 3.0)
    assert mech.rho(3.0 * plan.column_norm() * plan.unit) == pytest.approx(0.2)
    if kind != "matrix":
        assert plan.column_norm() == math.sqrt(7)  # 7 levels over 100 items


def test_the_schedule_sets_the_counter_size():
    assert CounterPlan.for_run("matrix", Geometric(2), 1000).releases == 10
    assert CounterPlan.for_run("tree", Batches(10), 1000).releases == 100
    assert CounterPlan.for_run("smoothed", EveryEpisode(), 1000).releases == 1000
    with pytest.raises(ValueError, match="unknown counter"):
        CounterPlan("fenwick", 10)
    with pytest.raises(ValueError, match="bands"):
        CounterPlan("tree", 10, bands=4)


def test_max_release_variance_orders_the_counters_at_equal_rho():
    worst = {k: CounterPlan(k, 1024).max_release_variance(0.5, 1.0)
             for k in ("tree", "smoothed", "matrix")}
    assert worst["tree"] == pytest.approx(110.0)  # 11 levels x 10 nodes / (2 rho)
    assert worst["matrix"] < worst["smoothed"] < worst["tree"]
    assert worst["tree"] / worst["matrix"] == pytest.approx(10.27, abs=0.01)


@pytest.mark.parametrize("kind", ["tree", "smoothed", "matrix"])
def test_max_release_factor_is_the_largest_release_variance_so_far(kind):
    plan = CounterPlan(kind, 70)
    for items in range(1, 71):  # exactly the largest, by exhaustion over t <= items
        worst = max(plan.release_variance(t) for t in range(1, items + 1))
        assert plan.max_release_factor(items) == worst
    assert plan.max_release_factor() == plan.max_release_factor(70)


@pytest.mark.parametrize("kind", ["tree", "smoothed", "matrix"])
def test_built_counters_release_with_the_declared_variance(kind):
    n, steps = 20_000, 12
    plan = CounterPlan(kind, steps)
    mech = plan.noise(0.01, 1.0)  # sigma >> 1: the integer smoothing's rounding is negligible
    counter = plan.build((n,), mech, [3], "x")
    assert isinstance(counter, MatrixCounter if kind == "matrix" else TreeCounter)
    for _ in range(steps):
        counter.add(np.zeros((1, n), np.int64))
    want = discrete_gaussian_variance(mech.sigma) / plan.unit**2 * plan.release_variance(steps)
    assert abs(counter.noise_sum().var() / want - 1.0) < 5 * math.sqrt(2.0 / n)
