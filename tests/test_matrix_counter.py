"""Matrix-factorization counter: the factorization, its exact integer encoder, its sensitivity,
and its release variance against the closed form (and the binary tree's at the same rho)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.privacy.continual import CounterPlan
from privrl.privacy.discrete import discrete_gaussian_variance
from privrl.privacy.matrix_counter import (
    ENCODER_BITS,
    MatrixCounter,
    decoder_coefficients,
    encoder_coefficients,
    encoder_column_norm,
    matrix_release_variance,
    sqrt_coefficients,
    tree_column_norm,
)
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.noise import FLOAT_NOISE, INTEGER_NOISE
from privrl.privacy.tree import TreeCounter, release_variance


def toeplitz(first: np.ndarray) -> np.ndarray:
    """The lower-triangular Toeplitz matrix with this first column."""
    n = len(first)
    i, j = np.indices((n, n))
    return np.where(i >= j, first[np.clip(i - j, 0, n - 1)], 0.0)


def test_square_root_factorization_of_the_prefix_sum_matrix():
    c = sqrt_coefficients(40)
    assert [c[k] for k in range(5)] == [math.comb(2 * k, k) / 4**k for k in range(5)]
    lower = toeplitz(c)
    np.testing.assert_allclose(lower @ lower, np.tril(np.ones((40, 40))), atol=1e-12)


@pytest.mark.parametrize("bands", [None, 1, 4, 100])
def test_the_integer_encoder_and_its_decoder_factor_the_prefix_sums(bands):
    enc = encoder_coefficients(64, bands)
    width = 64 if bands is None else min(bands, 64)
    assert enc.dtype == np.int64 and enc[0] == 2**ENCODER_BITS and not enc[width:].any()
    assert np.all(np.abs(enc[:width] - np.ldexp(sqrt_coefficients(64)[:width], ENCODER_BITS))
                  <= 0.5)
    product = toeplitz(decoder_coefficients(64, bands)) @ toeplitz(enc.astype(float))
    np.testing.assert_allclose(product, np.tril(np.ones((64, 64))), atol=1e-9)


@pytest.mark.parametrize("bands", [None, 32])
def test_the_decoder_is_exact_where_it_is_computed_by_fft(bands):
    enc = toeplitz(encoder_coefficients(700, bands).astype(float))
    product = toeplitz(decoder_coefficients(700, bands)) @ enc
    np.testing.assert_allclose(product, np.tril(np.ones((700, 700))), atol=1e-9)


def test_sensitivity_is_the_largest_encoder_column_norm_by_brute_force():
    enc = toeplitz(encoder_coefficients(32).astype(float))
    norms = np.linalg.norm(enc, axis=0)
    assert encoder_column_norm(32) == pytest.approx(norms.max()) == pytest.approx(norms[0])
    rng = np.random.default_rng(3)
    for _ in range(50):  # one user changes one item by at most 1: ||E(x - x')|| <= the norm
        x = rng.integers(0, 2, 32)
        y = x.copy()
        y[rng.integers(32)] ^= 1
        assert np.linalg.norm(enc @ (x - y)) <= encoder_column_norm(32) + 1e-9
    assert tree_column_norm(1024) == math.sqrt(11)


def test_matrix_noise_spends_exactly_rho_on_the_encoder_sensitivity():
    mech = CounterPlan("matrix", 100).noise(0.3, 2.0)
    assert mech.backend is INTEGER_NOISE
    assert mech.rho(2.0 * encoder_column_norm(100)) == pytest.approx(0.3)


@pytest.mark.parametrize("bands", [None, 1, 6])
def test_noise_free_counter_releases_exact_prefix_sums_on_the_grid(bands):
    rng = np.random.default_rng(0)
    items = rng.integers(0, 5, size=(50, 2, 3))
    counter = MatrixCounter((3,), Gaussian(0.0, INTEGER_NOISE), [1, 2], "x", 50, bands)
    for t in range(50):
        counter.add(items[t])
        out = counter.release()
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, items[: t + 1].sum(axis=0))
        enc = encoder_coefficients(50, bands)[: t + 1]
        want = sum(int(e) * int(v) for e, v in zip(enc, items[t::-1, 0, 0], strict=True))
        assert int(counter.last_encoded[0, 0]) == want  # E x in exact integers


def test_release_is_repeatable_and_refuses_what_it_cannot_hold():
    noise = CounterPlan("matrix", 3).noise(1.0, 1.0)
    counter = MatrixCounter((2,), noise, [9], "x", 3)
    for _ in range(3):
        counter.add(np.ones((1, 2)))
    np.testing.assert_array_equal(counter.release(), counter.release())
    with pytest.raises(ValueError, match="full"):
        counter.add(np.ones((1, 2)))
    with pytest.raises(ValueError, match="integer noise"):
        MatrixCounter((2,), Gaussian(1.0, FLOAT_NOISE), [9], "x", 3)
    with pytest.raises(ValueError, match="grid"):
        MatrixCounter((2,), noise, [9], "x", 3).add(np.full((1, 2), 0.5))


@pytest.mark.parametrize("bands", [None, 4])
def test_release_variance_matches_the_closed_form(bands):
    n, steps = 20_000, 48
    mech = CounterPlan("matrix", steps, bands).noise(0.5, 1.0)
    counter = MatrixCounter((n,), mech, [11], "x", steps, bands)
    unit = discrete_gaussian_variance(mech.sigma)
    for t in range(1, steps + 1):
        counter.add(np.zeros((1, n), np.int64))
        if t in (1, 2, 7, 48):
            want = unit * matrix_release_variance(t, steps, bands)
            got = counter.noise_sum().var()
            assert abs(got / want - 1.0) < 5 * math.sqrt(2.0 / n), (t, got, want)
            rounded = counter.release().astype(float).var()  # rounding adds at most 1/4
            assert abs((rounded - 0.125) / want - 1.0) < 5 * math.sqrt(2.0 / n) + 0.125 / want
    if bands:
        return
    # in sigma^2 units of the exact factorization: sum_{k<t} c_k^2 (to the encoder's bits)
    sigma_items = mech.sigma / 2**ENCODER_BITS
    closed = sigma_items**2 * float(np.sum(sqrt_coefficients(steps) ** 2))
    assert unit * matrix_release_variance(steps, steps) == pytest.approx(closed, rel=1e-3)


def test_tree_release_variance_matches_its_closed_form():
    n = 20_000
    tree = TreeCounter((n,), Gaussian(3.0, INTEGER_NOISE), [5], "x", 16)
    for _ in range(13):  # 13 = 0b1101: three nodes
        tree.add(np.zeros((1, n), np.int64))
    want = discrete_gaussian_variance(3.0) * release_variance(13, smooth=False)
    assert abs(tree.noise_sum().var() / want - 1.0) < 5 * math.sqrt(2.0 / n)


def test_the_matrix_counter_beats_the_tree_at_equal_rho():
    steps = 1024  # max over t of the release variance, all at the same rho (common 1/(2 rho))
    mf = encoder_column_norm(steps) ** 2 * matrix_release_variance(steps, steps)
    tree = tree_column_norm(steps) ** 2 * CounterPlan("tree", steps).max_release_factor()
    smoothed = tree_column_norm(steps) ** 2 * CounterPlan("smoothed", steps).max_release_factor()
    assert tree == 110.0
    assert 9.0 < tree / mf < 12.0 and 5.0 < smoothed / mf < 7.0
    # banding trades variance for O(bands) state: at 64 bands it still beats the smoothed tree,
    # at 16 only the plain one, and one band (the identity encoder) releases sums of raw noise
    banded = {b: encoder_column_norm(steps, b) ** 2 * matrix_release_variance(steps, steps, b)
              for b in (1, 16, 64)}
    assert mf < banded[64] < smoothed < banded[16] < tree
    assert banded[1] == pytest.approx(steps)
