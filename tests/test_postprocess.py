"""Tests for the post-processing of noisy counts (Qiao & Wang, Lemma 5.4; erratum E6)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog
from support.projection import Projection, lp_objective, project_counts

SIZES = (1, 2, 3, 6, 10)


def _scale(noisy_sas: np.ndarray, noisy_sa: float, radius: float) -> float:
    """Magnitude of an instance, for relative tolerances."""
    return 1.0 + float(np.abs(noisy_sas).max()) + abs(float(noisy_sa)) + float(radius)


def _linprog_optimum(noisy_sas: np.ndarray, noisy_sa: float, radius: float, force_zero: bool):
    """Solve the paper's LP (6) with HiGHS; variables (x_1..x_S, t). Returns the scipy result."""
    s = noisy_sas.size
    c = np.zeros(s + 1)
    c[-1] = 1.0
    eye = np.eye(s)
    ones = -np.ones((s, 1))
    a_ub = [np.hstack([eye, ones]), np.hstack([-eye, ones])]
    b_ub = [noisy_sas, -noisy_sas]
    a_eq = b_eq = None
    row = np.append(np.ones(s), 0.0)
    if force_zero:  # the fallback LP: sum x = 0
        a_eq, b_eq = row[None, :], np.array([0.0])
    else:
        a_ub += [row[None, :], -row[None, :]]
        b_ub += [np.array([noisy_sa + radius / 4]), np.array([-(noisy_sa - radius / 4)])]
    bounds = [(0, None)] * s + [(None, None)]
    return linprog(
        c,
        A_ub=np.vstack(a_ub),
        b_ub=np.concatenate(b_ub),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=bounds,
        method="highs",
    )


def _random_instance(rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
    """A noisy cell: negative entries, ties, n^ near or far from sum N^, small and large E."""
    s = int(rng.choice(SIZES))
    scale = 10.0 ** rng.uniform(-2, 3)
    kind = rng.integers(4)
    if kind == 0:  # noisy counts around a true count vector
        true = rng.multinomial(int(rng.integers(0, 50)), np.full(s, 1 / s)) * scale
        noisy = true + scale * rng.laplace(size=s)
    elif kind == 1:  # mostly negative
        noisy = -scale * rng.exponential(size=s) + scale * rng.uniform(-0.5, 0.2)
    elif kind == 2:  # rounded values: many ties
        noisy = np.round(scale * rng.standard_normal(s))
    else:
        noisy = scale * rng.standard_normal(s)
    spread = rng.choice([0.0, 0.1, 1.0, 10.0, 100.0])
    noisy_sa = float(noisy.sum() + spread * scale * s * rng.standard_normal())
    radius = float(rng.choice([0.0, 1e-3, 0.3, 3.0, 30.0, 3000.0]) * scale * rng.uniform(0.5, 2))
    return noisy, noisy_sa, radius


def _reference_cell(noisy: np.ndarray, noisy_sa: float, radius: float):
    """The closed-form solver written literally for one cell (bisection for t2 and lambda)."""
    s = noisy.size
    lo_sum, hi_sum = noisy_sa - radius / 4, noisy_sa + radius / 4
    if hi_sum < 0:
        lo_sum = hi_sum = 0.0
    else:
        lo_sum = max(lo_sum, 0.0)
    t0 = max(0.0, float(np.max(-noisy)))
    t1 = (lo_sum - noisy.sum()) / s
    a, b = 0.0, max(0.0, float(noisy.max()))
    if np.maximum(noisy, 0).sum() <= hi_sum:
        b = 0.0
    for _ in range(200):
        mid = (a + b) / 2
        if np.maximum(noisy - mid, 0).sum() <= hi_sum:
            b = mid
        else:
            a = mid
    t = max(t0, t1, b)
    lo, hi = np.maximum(0, noisy - t), noisy + t
    x0 = np.maximum(noisy, 0)
    target = min(max(x0.sum(), lo_sum), hi_sum)
    a, b = float((lo - x0).min()) - 1, float((hi - x0).max()) + 1
    for _ in range(200):
        mid = (a + b) / 2
        if np.clip(x0 + mid, lo, hi).sum() < target:
            a = mid
        else:
            b = mid
    return np.clip(x0 + (a + b) / 2, lo, hi), t


def _check_outputs(proj: Projection, noisy, noisy_sa, radius) -> None:
    """Structural properties that must hold for every cell."""
    noisy = np.asarray(noisy, dtype=float)
    e = np.broadcast_to(np.asarray(radius, dtype=float), np.shape(noisy_sa))
    s = noisy.shape[-1]
    assert proj.sas.shape == noisy.shape and proj.sa.shape == np.shape(noisy_sa)
    assert proj.t.shape == np.shape(noisy_sa) and proj.infeasible.shape == np.shape(noisy_sa)
    assert proj.sas.dtype == np.float64 and proj.infeasible.dtype == bool
    np.testing.assert_array_equal(proj.sa, proj.sas.sum(axis=-1))
    offset = (e / (2 * s))[..., None]
    assert np.all(proj.sas >= offset)
    x = proj.sas - offset
    tol = 1e-9 * (1 + np.abs(noisy).max(axis=-1) + np.abs(noisy_sa) + e)
    assert np.all(x >= -tol[..., None])
    assert np.all(np.abs(x - noisy).max(axis=-1) <= proj.t + tol)
    feas = ~proj.infeasible
    assert np.all((np.abs(x.sum(axis=-1) - noisy_sa) <= e / 4 + tol)[feas])
    assert np.all((np.abs(x.sum(axis=-1)) <= tol)[proj.infeasible])
    pos = e > 0
    p = proj.sas[pos] / proj.sa[pos][..., None]
    assert np.all(p > 0)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.slow  # a long test: 400 random instances against HiGHS
def test_t_star_matches_highs_on_random_instances() -> None:
    rng = np.random.default_rng(20240501)
    n_checked = n_infeasible = 0
    worst = 0.0
    for _ in range(400):
        noisy, noisy_sa, radius = _random_instance(rng)
        scale = _scale(noisy, noisy_sa, radius)
        if abs(noisy_sa + radius / 4) < 1e-9 * scale:
            continue  # feasibility boundary: decided by round-off, not by the algorithm
        proj = project_counts(noisy, noisy_sa, radius)
        _check_outputs(proj, noisy, noisy_sa, radius)
        infeasible = noisy_sa + radius / 4 < 0
        assert bool(proj.infeasible) == infeasible
        if infeasible:
            assert _linprog_optimum(noisy, noisy_sa, radius, force_zero=False).status == 2
            n_infeasible += 1
        res = _linprog_optimum(noisy, noisy_sa, radius, force_zero=infeasible)
        assert res.status == 0, res.message
        assert abs(float(proj.t) - res.fun) <= 1e-7 * scale
        worst = max(worst, abs(float(proj.t) - res.fun) / scale)
        # The canonical x* attains the optimum (it is LP-optimal, not just feasible).
        x = proj.sas - radius / (2 * noisy.size)
        assert abs(np.abs(x - noisy).max() - res.fun) <= 1e-7 * scale
        n_checked += 1
    assert n_checked >= 300
    assert n_infeasible >= 10
    assert worst < 1e-9


def test_matches_literal_reference_solver() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        noisy, noisy_sa, radius = _random_instance(rng)
        proj = project_counts(noisy, noisy_sa, radius)
        x_ref, t_ref = _reference_cell(noisy, noisy_sa, radius)
        scale = _scale(noisy, noisy_sa, radius)
        assert abs(float(proj.t) - t_ref) <= 1e-9 * scale
        x = proj.sas - radius / (2 * noisy.size)
        np.testing.assert_allclose(x, x_ref, rtol=0, atol=1e-9 * scale)


def test_hand_computed_examples() -> None:
    # t1 binds (sum too small): x* = box upper ends.
    proj = project_counts(np.array([3.0, -1.0]), 10.0, 4.0)
    assert proj.t == 3.5 and not proj.infeasible
    np.testing.assert_allclose(proj.sas, [7.5, 3.5])
    assert proj.sa == 11.0
    # t2 binds (sum too large): x* = box lower ends.
    proj = project_counts(np.array([10.0, 4.0, -2.0]), 3.0, 4.0)
    assert proj.t == 6.0
    np.testing.assert_allclose(proj.sas, np.array([4.0, 0.0, 0.0]) + 4 / 6)
    # t2 binds at the window's upper end: N^ = [5, 1], n^ = 2, E = 4 -> window [1, 3],
    # t* = 2, boxes [3, 7] and [0, 3], target 3 = sum of lower ends -> x* = [3, 0].
    proj = project_counts(np.array([5.0, 1.0]), 2.0, 4.0)
    assert proj.t == 2.0
    np.testing.assert_allclose(proj.sas, [4.0, 1.0])  # + E/(2S) = 1
    # Interior lambda: N^ = [4, -3], n^ = 6, E = 4 -> window [5, 7], t* = t0 = 3,
    # boxes [1, 7] and [0, 0], x0 = [4, 0], target 5 -> lambda = 1 -> x* = [5, 0].
    proj = project_counts(np.array([4.0, -3.0]), 6.0, 4.0)
    assert proj.t == 3.0
    np.testing.assert_allclose(proj.sas, [6.0, 1.0])
    # t0 binds and sum max(N^, 0) is in the window: x* = max(N^, 0) exactly (lambda = 0).
    proj = project_counts(np.array([2.0, -3.0, 1.0]), 3.2, 1.0)
    assert proj.t == 3.0
    np.testing.assert_array_equal(proj.sas, np.array([2.0, 0.0, 1.0]) + 1 / 6)


def test_canonical_x_is_positive_part_when_its_sum_is_in_window() -> None:
    rng = np.random.default_rng(11)
    noisy = rng.normal(3.0, 2.0, size=(500, 6))
    x0 = np.maximum(noisy, 0)
    radius = 2.0
    noisy_sa = x0.sum(-1) + rng.uniform(-radius / 4, radius / 4, size=500)
    proj = project_counts(noisy, noisy_sa, radius)
    np.testing.assert_array_equal(proj.sas, x0 + radius / 12)
    np.testing.assert_array_equal(proj.t, np.maximum((-noisy).max(-1), 0))


def test_zero_radius_exact_inputs_are_returned_unchanged() -> None:
    rng = np.random.default_rng(3)
    for s in SIZES:
        counts = rng.integers(0, 1000, size=(4, 7, s)).astype(float)
        counts[0, 0] = 0.0  # an unvisited cell
        counts[1, :, 0] = 0.0  # zero entries
        proj = project_counts(counts, counts.sum(-1), 0.0)
        np.testing.assert_array_equal(proj.sas, counts)
        np.testing.assert_array_equal(proj.sa, counts.sum(-1))
        np.testing.assert_array_equal(proj.t, 0.0)
        assert not proj.infeasible.any()
    # integer dtype inputs work too
    proj = project_counts(np.array([3, 0, 2]), 5, 0)
    np.testing.assert_array_equal(proj.sas, [3.0, 0.0, 2.0])
    assert proj.sa == 5.0 and proj.sas.dtype == np.float64


def test_all_zero_noisy_counts_give_half_radius() -> None:
    # Erratum E4: post-processing all-zero counts gives N~(s,a) = E/2.
    proj = project_counts(np.zeros((3, 4)), np.zeros(3), 6.0)
    np.testing.assert_allclose(proj.sas, 6.0 / 8)
    np.testing.assert_allclose(proj.sa, 3.0)
    np.testing.assert_array_equal(proj.t, 0.0)


@pytest.mark.parametrize("s", SIZES)
@pytest.mark.parametrize("radius", [0.01, 0.5, 4.0, 100.0, 1e4])
def test_lemma_5_4_on_the_good_event(s: int, radius: float) -> None:
    rng = np.random.default_rng(1000 * s + int(radius * 100))
    cells = 400
    totals = rng.integers(0, 200, size=cells)
    totals[:20] = 0
    probs = rng.dirichlet(np.full(s, 0.5), size=cells)
    true_sas = np.stack([rng.multinomial(n, p) for n, p in zip(totals, probs, strict=True)])
    true_sas = true_sas.astype(float)
    true_sa = true_sas.sum(-1)
    q = radius / 4
    noise_sas = rng.uniform(-q, q, size=true_sas.shape)
    noise_sa = rng.uniform(-q, q, size=cells)
    # extremes of the good event
    noise_sas[:50] = rng.choice([-q, q], size=(50, s))
    noise_sa[:50] = rng.choice([-q, q], size=50)
    noisy_sas, noisy_sa = true_sas + noise_sas, true_sa + noise_sa
    proj = project_counts(noisy_sas, noisy_sa, radius)
    _check_outputs(proj, noisy_sas, noisy_sa, radius)
    tol = 1e-9 * (1 + true_sa + radius)
    assert not proj.infeasible.any()
    assert np.all(proj.t <= q + tol)  # the true counts are feasible with t <= E/4
    assert np.all(proj.sas > 0)
    assert np.all(true_sa <= proj.sa + tol)
    assert np.all(proj.sa <= true_sa + radius + tol)
    assert np.all(np.abs(proj.sas - true_sas) <= radius + tol[:, None])


def test_batch_shapes_match_per_cell_results() -> None:
    rng = np.random.default_rng(5)
    for s in (1, 3, 6):
        shape = (2, 3, 4, 2)
        noisy = rng.normal(2.0, 3.0, size=(*shape, s))
        noisy_sa = noisy.sum(-1) + rng.normal(0.0, 3.0, size=shape)
        noisy_sa[0, 0, 0, 0] = -100.0  # an infeasible cell
        radius = rng.uniform(0.0, 8.0, size=(3, 1, 1))  # broadcast over the batch
        proj = project_counts(noisy, noisy_sa, radius)
        _check_outputs(proj, noisy, noisy_sa, np.broadcast_to(radius, shape))
        assert proj.infeasible[0, 0, 0, 0]
        radius_full = np.broadcast_to(radius, shape)
        for idx in np.ndindex(*shape):
            one = project_counts(noisy[idx], noisy_sa[idx], radius_full[idx])
            np.testing.assert_allclose(proj.sas[idx], one.sas, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(proj.sa[idx], one.sa, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(proj.t[idx], one.t, rtol=1e-13, atol=1e-13)
            assert proj.infeasible[idx] == one.infeasible
    # the production shapes
    for shape in [(5, 20, 6, 2, 6), (1, 20, 50, 5, 50)]:
        noisy = rng.normal(0.0, 5.0, size=shape)
        proj = project_counts(noisy, noisy.sum(-1), 3.0)
        _check_outputs(proj, noisy, noisy.sum(-1), 3.0)
    # a single cell gives 0-d arrays
    proj = project_counts([1.0, 2.0], 3.0, 1.0)
    assert proj.sa.shape == () and proj.t.shape == () and proj.infeasible.shape == ()


def test_infeasible_fallback_forces_zero_sum() -> None:
    noisy = np.array([[2.0, -5.0, 1.0], [0.5, 0.5, 0.5], [0.0, 0.0, 0.0]])
    radius = 4.0
    noisy_sa = np.array([-1.5, -10.0, -1.0])  # n^ + E/4 = -0.5, -9, 0 (the last is feasible)
    proj = project_counts(noisy, noisy_sa, radius)
    np.testing.assert_array_equal(proj.infeasible, [True, True, False])
    np.testing.assert_array_equal(proj.sas, np.full((3, 3), radius / 6))
    np.testing.assert_allclose(proj.sa, radius / 2)
    np.testing.assert_array_equal(proj.t, [5.0, 0.5, 0.0])
    for i in range(2):
        assert _linprog_optimum(noisy[i], noisy_sa[i], radius, force_zero=False).status == 2
        res = _linprog_optimum(noisy[i], noisy_sa[i], radius, force_zero=True)
        assert abs(res.fun - proj.t[i]) <= 1e-9


def test_lp_objective_helper() -> None:
    rng = np.random.default_rng(9)
    noisy = rng.normal(1.0, 2.0, size=(50, 4))
    noisy_sa = noisy.sum(-1) + rng.normal(0.0, 2.0, size=50)
    radius = 1.5
    proj = project_counts(noisy, noisy_sa, radius)
    x = proj.sas - radius / 8
    t = lp_objective(noisy, noisy_sa, radius, x)
    ok = ~proj.infeasible
    np.testing.assert_allclose(t[ok], proj.t[ok], rtol=0, atol=1e-12)
    assert np.all(np.isinf(lp_objective(noisy, noisy_sa, radius, x - 1.0)))  # sum or sign off
    assert np.isinf(lp_objective([1.0, 1.0], 2.0, 0.0, [-1.0, 3.0]))  # negative entry


def test_input_validation() -> None:
    with pytest.raises(ValueError):
        project_counts(np.zeros((2, 3)), np.zeros(3), 1.0)
    with pytest.raises(ValueError):
        project_counts(np.zeros((2, 3)), np.zeros(2), -1.0)
    with pytest.raises(ValueError):
        project_counts(np.zeros((2, 3)), np.zeros(2), np.ones(3))
    with pytest.raises(ValueError):
        project_counts(np.zeros((2, 0)), np.zeros(2), 1.0)
    with pytest.raises(ValueError):
        project_counts(np.array([np.nan, 1.0]), 1.0, 1.0)


def test_inputs_untouched_views_accepted_and_permutation_equivariant() -> None:
    rng = np.random.default_rng(13)
    base = rng.normal(1.0, 4.0, size=(6, 7, 5))
    noisy = base.transpose(1, 0, 2)[:, ::2]  # a non-contiguous view, shape (7, 3, 5)
    noisy_sa = noisy.sum(-1) + rng.normal(0.0, 4.0, size=(7, 3))
    before, before_sa = noisy.copy(), noisy_sa.copy()
    proj = project_counts(noisy, noisy_sa, 2.0)
    np.testing.assert_array_equal(noisy, before)
    np.testing.assert_array_equal(noisy_sa, before_sa)
    perm = rng.permutation(5)
    proj_perm = project_counts(noisy[..., perm], noisy_sa, 2.0)
    # equal up to the summation order inside a cell
    np.testing.assert_allclose(proj_perm.sas, proj.sas[..., perm], rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(proj_perm.t, proj.t, rtol=1e-12, atol=1e-11)
