"""Symmetric-matrix and vector statistics in the privacy layer: Luyo et al.'s symmetric noise
(erratum 1), tree counters over d x d matrices, fixed (paper) scales with honest charges, PSD
handling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import effective
from privrl.algorithms.base import Family
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger
from privrl.privacy.calibration import calibrate
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.noise import FLOAT_NOISE as FLOAT
from privrl.privacy.privatizers import Central, randomize_locally
from privrl.privacy.psd import (
    SymmetricNoise,
    chi_norm_tail,
    cholesky_solve,
    inverse_norms,
    mirror_upper,
    regularize,
    wigner_norm_tail,
)
from privrl.privacy.tree import TreeCounter, release_variance
from privrl.seeding import generator

D, H = 4, 3


def _config(privacy: str = "jdp", episodes: int = 16, epsilon: float = 1.0, **kw) -> RunConfig:
    if privacy == "jdp":  # the tree every episode: the mechanics checked here
        tree = {} if "tree_smoothing" in kw else {"counter": "smoothed"}
        kw = {**tree, "schedule": "every", **kw}
    return effective(RunConfig(n_states=2, n_actions=2, horizon=H, episodes=episodes,
                               privacy=privacy, epsilon=epsilon, delta=1e-5,
                               mechanism="gaussian", **kw))


def _families(scales: tuple[float | None, float | None] = (None, None)) -> tuple[Family, ...]:
    return (Family("gram", (H, D, D), 10.0, 3.0, 1.0, -1.0, True, scales[0]),
            Family("target", (H, D), 8.0, 4.0, 1.0, -1.0, False, scales[1]))


def test_symmetric_noise_is_exactly_symmetric_with_the_right_spread() -> None:
    noise = SymmetricNoise(Gaussian(2.0, FLOAT))
    z = noise.sample(generator(1, "t"), (20_000, D, D))
    np.testing.assert_array_equal(z, np.swapaxes(z, -1, -2))
    diag = z[:, np.arange(D), np.arange(D)]
    iu = np.triu_indices(D, 1)
    off = z[:, iu[0], iu[1]]
    assert np.std(diag) == pytest.approx(2.0, rel=0.03)  # sigma, not sqrt(2) sigma (GOE)
    assert np.std(off) == pytest.approx(2.0, rel=0.03)
    corr = np.corrcoef(off.T)
    assert np.abs(corr - np.eye(len(iu[0]))).max() < 0.03  # independent above the diagonal
    # Luyo's Claim 26: ||Z|| >= sigma (4 sqrt(d) + 2 ln(1/alpha)) with frequency <= alpha
    alpha = 0.05
    norms = np.abs(np.linalg.eigvalsh(z)).max(axis=-1)
    assert np.mean(norms >= 2.0 * wigner_norm_tail(D, alpha)) <= alpha
    with pytest.raises(ValueError, match="square"):
        noise.sample(generator(1), (3, 2))


def test_chi_tail_holds() -> None:
    v = generator(2, "v").standard_normal((20_000, D))
    assert np.mean(np.linalg.norm(v, axis=-1) > chi_norm_tail(D, 0.05)) <= 0.05


@pytest.mark.parametrize("smooth", [False, True])
def test_matrix_tree_counter(smooth: bool) -> None:
    sigma, n = 1.5, 13
    tree = TreeCounter((H, D, D), SymmetricNoise(Gaussian(sigma, FLOAT)), [5, 6], "gram", 16,
                       smooth)
    rng = np.random.default_rng(0)
    items = [mirror_upper(rng.normal(size=(2, H, D, D))) for _ in range(n)]
    noises = []
    for t, item in enumerate(items, start=1):
        tree.add(item)
        release = tree.release()
        np.testing.assert_array_equal(release, np.swapaxes(release, -1, -2))
        np.testing.assert_allclose(release - np.sum(items[:t], axis=0), tree.noise_sum(),
                                   atol=1e-12)
        noises.append(tree.noise_sum().copy())
    if not smooth:
        # t = 13 = 1101b uses nodes (3,1), (2,3), (0,13); t = 12 = 1100b uses (3,1), (2,3): the
        # difference is node (0,13) alone, drawn once and reused
        np.testing.assert_allclose(noises[12] - noises[11], tree.node_noise(0, 13), atol=1e-12)
    again = TreeCounter((H, D, D), SymmetricNoise(Gaussian(sigma, FLOAT)), [5, 6], "gram",
                        16, smooth)
    for item in items:
        again.add(item)
    np.testing.assert_array_equal(again.release(), tree.release())  # reproducible under seed


@pytest.mark.slow  # statistical: variances over 3000 seeded trees
@pytest.mark.parametrize("t", [1, 6, 7, 13])
def test_prefix_noise_variance_is_popcount(t: int) -> None:
    seeds = list(range(3000))
    tree = TreeCounter((D, D), SymmetricNoise(Gaussian(1.0, FLOAT)), seeds, "gram", 16)
    for _ in range(t):
        tree.add(np.zeros((len(seeds), D, D)))
    noise = tree.noise_sum()
    assert release_variance(t, False) == bin(t).count("1")
    assert noise[:, 0, 0].var() == pytest.approx(bin(t).count("1"), rel=0.08)
    assert noise[:, 0, 1].var() == pytest.approx(bin(t).count("1"), rel=0.08)


def test_zero_noise_tree_is_the_exact_sum() -> None:
    tree = TreeCounter((D, D), SymmetricNoise(Gaussian(0.0, FLOAT)), [1], "gram", 8, True)
    total = np.zeros((1, D, D))
    for i in range(7):
        item = np.full((1, D, D), float(i))
        total += item
        tree.add(item)
        np.testing.assert_array_equal(tree.release(), total)


def test_fixed_scales_are_kept_and_charged_honestly() -> None:
    config = _config()
    cal = calibrate(config, _families((300.0, 500.0)))
    assert cal.scales() == {"gram": 300.0, "target": 500.0}
    assert cal.noise_scale == 300.0
    assert isinstance(cal.sampler("gram"), SymmetricNoise)
    assert cal.family("gram").cost == pytest.approx(3.0**2 / (2 * 300.0**2))
    assert cal.family("target").cost == pytest.approx(4.0**2 / (2 * 500.0**2))
    central, ledger = Central(cal, [3], config.episodes), Ledger()
    for _ in range(config.episodes):
        central.ingest({"gram": np.zeros((1, H, D, D)), "target": np.zeros((1, H, D))}, ledger)
    levels = cal.levels
    expected = levels * (3.0**2 / (2 * 300.0**2) + 4.0**2 / (2 * 500.0**2))
    assert ledger.rho == pytest.approx(expected, rel=1e-12)
    scales = {c.mechanism: c.scale for c in ledger.entries}
    assert scales == {"tree:gram": 300.0, "tree:target": 500.0}
    release = central.release()
    np.testing.assert_array_equal(release["gram"], np.swapaxes(release["gram"], -1, -2))
    assert release["target"].std() == pytest.approx(500.0, rel=0.5)
    with pytest.raises(ValueError, match="every released family"):
        calibrate(config, _families((300.0, None)))


def test_budget_calibration_spends_exactly_epsilon() -> None:
    config = _config(episodes=64, epsilon=2.0)
    cal = calibrate(config, _families())
    central, ledger = Central(cal, [3], config.episodes), Ledger()
    for _ in range(config.episodes):
        central.ingest({"gram": np.zeros((1, H, D, D)), "target": np.zeros((1, H, D))}, ledger)
    assert ledger.totals(config.delta).epsilon == pytest.approx(2.0, rel=1e-6)


def test_release_std_bound_is_a_running_maximum() -> None:
    for smooth in (False, True):
        cal = calibrate(_config(episodes=100, tree_smoothing=smooth), _families())
        stds = [cal.release_std(t, "gram") for t in range(101)]
        bounds = [cal.release_std_bound(t, "gram") for t in range(101)]
        np.testing.assert_allclose(bounds, np.maximum.accumulate(stds), rtol=1e-12)
    ldp = calibrate(_config("ldp"), _families())
    assert ldp.release_std_bound(9, "gram") == pytest.approx(3 * ldp.scales()["gram"])


def test_local_randomizer_mirrors_symmetric_families() -> None:
    cal = calibrate(_config("ldp", epsilon=1.0), _families())
    stats = {"gram": np.zeros((500, H, D, D)), "target": np.zeros((500, H, D))}
    noisy = randomize_locally(stats, cal, [generator(i, "u") for i in range(500)])
    np.testing.assert_array_equal(noisy["gram"], np.swapaxes(noisy["gram"], -1, -2))
    sigma = cal.scales()["gram"]
    assert noisy["gram"][:, :, 0, 1].std() == pytest.approx(sigma, rel=0.08)
    assert noisy["target"].std() == pytest.approx(sigma, rel=0.08)


def test_regularize_floors_and_counts() -> None:
    rng = np.random.default_rng(3)
    good = rng.normal(size=(5, D, D))
    good = good @ np.swapaxes(good, -1, -2)
    out = regularize(good, 2.0, floor=1.0)
    assert not out.floored.any()
    np.testing.assert_allclose(out.matrices, good + 2.0 * np.eye(D), atol=1e-12)
    bad = good.copy()
    bad[2] -= 50.0 * np.eye(D)
    bad[4, 0, 1] += 0.5  # not symmetric: symmetrized first
    out = regularize(bad, 2.0, floor=1.0)
    assert out.floored.tolist() == [False, False, True, False, False]
    eig = np.linalg.eigvalsh(out.matrices)
    assert eig.min() >= 1.0 - 1e-9
    np.testing.assert_array_equal(out.matrices, np.swapaxes(out.matrices, -1, -2))
    per_step = regularize(np.zeros((2, 3, D, D)), np.array([1.0, 2.0, 3.0]), floor=0.5)
    np.testing.assert_allclose(np.diagonal(per_step.matrices, axis1=-2, axis2=-1)[0, :, 0],
                               [1.0, 2.0, 3.0])


def test_cholesky_solve_and_inverse_norms() -> None:
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, D, D))
    a = a @ np.swapaxes(a, -1, -2) + np.eye(D)
    b = rng.normal(size=(3, D))
    w, inv_chol = cholesky_solve(a, b)
    np.testing.assert_allclose(w, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-10)
    x = rng.normal(size=(3, 7, D))
    expected = np.sqrt(np.einsum("rni,rij,rnj->rn", x, np.linalg.inv(a), x))
    np.testing.assert_allclose(inverse_norms(inv_chol, x), expected, rtol=1e-10)
    assert math.isfinite(float(inverse_norms(inv_chol, np.zeros((3, 1, D))).sum()))
