"""Binary-tree counter: exact sums without noise, persisted node noise, restart safety, variance."""

from __future__ import annotations

import numpy as np
import pytest
from privrl.privacy.mechanisms import Gaussian, Laplace
from privrl.privacy.noise import FLOAT_NOISE as FLOAT
from privrl.privacy.tree import (
    TreeCounter,
    levels_released,
    release_variance,
    smoothed_variance,
    tree_levels,
)


def test_levels_match_spec():
    assert tree_levels(50_000) == 16  # floor(log2 50000) + 1 (erratum E2)
    assert tree_levels(1) == 1 and tree_levels(2) == 2 and tree_levels(3) == 2
    assert [levels_released(t) for t in range(6)] == [0, 1, 2, 2, 3, 3]


def test_noise_free_release_is_exact_prefix_sum():
    rng = np.random.default_rng(0)
    items = rng.integers(0, 3, size=(100, 2, 4)).astype(float)
    tree = TreeCounter((4,), Laplace(0.0, FLOAT), [1, 2], "x", 100)
    for t in range(100):
        tree.add(items[t])
        np.testing.assert_array_equal(tree.release(), items[: t + 1].sum(axis=0))


def test_release_error_is_sum_of_popcount_nodes_and_is_repeatable():
    tree = TreeCounter((3,), Laplace(2.0, FLOAT), [7], "x", 64)
    for _ in range(13):  # 13 = 0b1101: nodes at levels 0, 2, 3
        tree.add(np.ones((1, 3)))
    first = tree.release()
    again = tree.release()
    np.testing.assert_array_equal(first, again)
    expected = sum(tree.node_noise(level, 13 >> level) for level in (0, 2, 3))
    np.testing.assert_allclose(first - 13.0, expected)


def test_restart_rebuilds_identical_releases():
    """A fresh counter fed the same items releases bit-identical values (contract 2)."""
    rng = np.random.default_rng(1)
    items = rng.random((37, 1, 5))
    a = TreeCounter((5,), Gaussian(3.0, FLOAT), [11], "sas", 100)
    for x in items:
        a.add(x)
    b = TreeCounter((5,), Gaussian(3.0, FLOAT), [11], "sas", 100)
    for x in items:
        b.add(x)
    np.testing.assert_array_equal(a.release(), b.release())
    other = TreeCounter((5,), Gaussian(3.0, FLOAT), [12], "sas", 100)
    for x in items:
        other.add(x)
    assert not np.allclose(a.release(), other.release())


def test_releases_are_post_processing_of_dyadic_nodes():
    """B(t) = sum over bits j of t of (exact dyadic node sum + that node's noise), and each item
    lies in exactly one node per level: at most L noisy node values ever depend on it."""
    rng = np.random.default_rng(2)
    max_items = 45
    items = rng.random((max_items, 1, 2))
    tree = TreeCounter((2,), Laplace(1.0, FLOAT), [3], "x", max_items)
    for t in range(1, max_items + 1):
        tree.add(items[t - 1])
        expected = np.zeros((1, 2))
        for j in range(t.bit_length()):
            if (t >> j) & 1:
                idx = t >> j  # node covering items ((idx-1) 2^j, idx 2^j]
                exact = items[(idx - 1) * 2**j : idx * 2**j].sum(axis=0)
                expected += exact + tree.node_noise(j, idx)
        np.testing.assert_allclose(tree.release(), expected, atol=1e-12)
    for i in range(1, max_items + 1):
        nodes = {(j, (i - 1) // 2**j + 1) for j in range(tree.levels)}
        assert len(nodes) == tree.levels  # one node per level


def test_release_variance_matches_popcount():
    """Monte Carlo over seeds: Var(B(t) - exact) = sigma^2 popcount(t)."""
    t = 11  # popcount 3
    errors = []
    for seed in range(400):
        tree = TreeCounter((50,), Gaussian(1.5, FLOAT), [seed], "x", 16)
        for _ in range(t):
            tree.add(np.zeros((1, 50)))
        errors.append(tree.release().ravel())
    var = np.var(np.concatenate(errors))
    assert var == pytest.approx(1.5**2 * 3, rel=0.05)
    assert tree.release_std() == pytest.approx(1.5 * np.sqrt(3))


def test_full_counter_refuses_more_items():
    tree = TreeCounter((1,), Laplace(1.0, FLOAT), [0], "x", 2)
    tree.add(np.zeros((1, 1)))
    tree.add(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="full"):
        tree.add(np.zeros((1, 1)))


def test_smoothed_tree_without_noise_is_exact():
    rng = np.random.default_rng(4)
    items = rng.random((70, 1, 3))
    tree = TreeCounter((3,), Laplace(0.0, FLOAT), [1], "x", 70, smooth=True)
    for t in range(70):
        tree.add(items[t])
        np.testing.assert_allclose(tree.release(), items[: t + 1].sum(axis=0), atol=1e-12)


def test_smoothed_node_is_the_min_variance_combination_of_node_and_children():
    """Node (1, 1) after 2 items: w own + (1 - w)(child 1 + child 2), w = 2/3."""
    tree = TreeCounter((2,), Gaussian(1.0, FLOAT), [9], "x", 8, smooth=True)
    tree.add(np.zeros((1, 2)))
    first_leaf = tree.node_noise(0, 1).copy()
    tree.add(np.zeros((1, 2)))
    expected = (2 / 3) * tree.node_noise(1, 1) + (1 / 3) * (first_leaf + tree.node_noise(0, 2))
    np.testing.assert_allclose(tree.release(), expected)
    assert smoothed_variance(1) == pytest.approx(2 / 3)
    assert smoothed_variance(30) == pytest.approx(0.5, abs=1e-6)


def test_smoothed_release_variance_is_lower_and_as_declared():
    t = 15  # popcount 4: binary variance 4 sigma^2, smoothed 1 + 2/3 + 4/7 + 8/15
    assert release_variance(t, smooth=False) == 4
    assert release_variance(t, smooth=True) == pytest.approx(1 + 2 / 3 + 4 / 7 + 8 / 15)
    errors = []
    for seed in range(400):
        tree = TreeCounter((50,), Gaussian(2.0, FLOAT), [seed], "x", 16, smooth=True)
        for _ in range(t):
            tree.add(np.zeros((1, 50)))
        errors.append(tree.release().ravel())
    var = np.var(np.concatenate(errors))
    assert var == pytest.approx(4.0 * release_variance(t, smooth=True), rel=0.05)
    assert tree.release_std() == pytest.approx(2.0 * np.sqrt(release_variance(t, True)))


def test_smoothed_restart_rebuilds_identical_releases():
    rng = np.random.default_rng(5)
    items = rng.random((29, 2, 4))
    a = TreeCounter((4,), Laplace(1.0, FLOAT), [3, 4], "sas", 64, smooth=True)
    b = TreeCounter((4,), Laplace(1.0, FLOAT), [3, 4], "sas", 64, smooth=True)
    for x in items:
        a.add(x)
    for x in items:
        b.add(x)
    np.testing.assert_array_equal(a.release(), b.release())


@pytest.mark.parametrize("integer", [False, True])
def test_a_node_asked_alone_equals_the_node_drawn_in_its_group(integer: bool) -> None:
    """Seeded nodes come in groups (one draw per group), yet node (level, index) is a function
    of the seed alone: a fresh tree asked for the nodes out of order (a restart) rebuilds the
    release of a tree fed item by item; the nodes of one group differ."""
    from privrl.privacy.noise import INTEGER_NOISE
    from privrl.privacy.tree import nodes_per_draw

    noise = Laplace(3.0, INTEGER_NOISE if integer else FLOAT)
    zeros = np.zeros((2, 2, 3), np.int64 if integer else np.float64)
    for t in (nodes_per_draw(0) + 3, 299):
        in_order = TreeCounter((2, 3), noise, [5, 6], "sas", 300)
        for _ in range(t):
            in_order.add(zeros)
        alone = TreeCounter((2, 3), noise, [5, 6], "sas", 300)
        levels = [j for j in range(levels_released(t)) if (t >> j) & 1]  # as noise_sum adds
        rebuilt = sum(alone.node_noise(j, t >> j) for j in levels)
        np.testing.assert_array_equal(rebuilt, in_order.release())
    fresh = TreeCounter((2, 3), noise, [5, 6], "sas", 300)
    a, b = fresh.node_noise(0, 2).copy(), fresh.node_noise(0, 3)
    assert not np.array_equal(a, b)
    assert not np.array_equal(a[0], a[1])  # replicas draw from their own seeds
