"""Linear-mixture learners that use the noise they know (issue 31, part 4): radii and PD
levels from the release's variance, projection of a noisy Gram, post-processing only, and
replicas that run vectorized give the numbers they give one at a time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms.linmix import luyo
from privrl.config import RunConfig
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

HARD = make("lm-hard")
E2 = make("zhou-mix")


def cfg(algo: str = "ucrl-vtr", mdp=HARD, **kw) -> RunConfig:
    base = dict(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                model=model_spec_of(mdp), episodes=200, privacy="jdp", epsilon=1.0, delta=1e-5,
                mechanism="gaussian", preset="practical", schedule="every")
    # every episode: the mechanics these tests check (the preset's: test_preset_schedules.py)
    return RunConfig(**{**base, **kw})


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_ucrl_vtr_practical_radius_is_the_variance_formula(privacy: str) -> None:
    """Ups = 2 sqrt(d) s_gram, C = sqrt(d) s_target from the release's std; Thm. 7's beta with
    them, times beta_scale; the tail bounds (the paper's) give a larger radius."""
    run = Run(cfg(privacy=privacy), [0])
    learner, cal, d = run.learner, run.calibration, HARD.model.d
    lam = float(HARD.H**2)
    hoeffding = math.sqrt(2 * HARD.H**2 * (math.log(3 * HARD.H / 0.1)
                                           + d / 2 * math.log(1 + 200 * HARD.H)))
    tail = Run(cfg(privacy=privacy, knobs={"noise_norms": "tail"}), [0]).learner
    for t in (1, 37, 200):
        ups = 2 * math.sqrt(d) * cal.release_std_bound(t, "gram")
        c = math.sqrt(d) * cal.release_std_bound(t, "target")
        assert ups > 0 and learner.bounds(t).ups == pytest.approx(ups, rel=1e-12)
        want = ((lam + 3 * ups) * HARD.model.c_w + c) / math.sqrt(lam + ups) + hoeffding
        assert learner.beta(t) == pytest.approx(0.1 * want, rel=1e-12)
        assert learner.shift(t) == pytest.approx(2 * ups, rel=1e-12)  # the measured winner
        assert learner.floor(t) == lam
        assert tail.beta(t) > 1.5 * learner.beta(t)


def test_linopt_practical_levels_are_the_variance_formula() -> None:
    """Sigma = 2 sqrt(d) s, lambda_min = lambda + Sigma, nu = sqrt(d) s_v / sqrt(lambda_min)."""
    run = Run(cfg("linopt-vi", E2), [0])
    cal = run.calibration
    for t in (1, 50, 200):
        p, r = run.learner.parts(t)
        for part, gram, target, dim in ((p, "gram_p", "target_p", E2.model.d),
                                        (r, "gram_r", "target_r", E2.model.d2)):
            big = 2 * math.sqrt(dim) * cal.release_std_bound(t, gram)
            assert part.big_sigma == pytest.approx(big, rel=1e-12)
            assert part.lam_min == pytest.approx(1.0 + big, rel=1e-12)
            assert part.lam_max == pytest.approx(1.0 + 3 * big, rel=1e-12)
            nu = math.sqrt(dim) * cal.release_std_bound(t, target) / math.sqrt(1.0 + big)
            assert part.nu == pytest.approx(nu, rel=1e-12)


def _indefinite(n_rep: int, horizon: int, d: int, seed: int) -> np.ndarray:
    """Symmetric matrices (R, H, d, d) with eigenvalues from -300 to 5000."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n_rep, horizon, d, d)))
    vals = np.linspace(-300.0, 5000.0, d) * rng.uniform(0.5, 1.0, (n_rep, horizon, 1))
    return np.einsum("rhij,rhj,rhkj->rhik", q, vals, q)


@pytest.mark.parametrize("psd", ["project", "shift"])
def test_ucrl_vtr_projection_floors_only_the_small_eigenvalues(psd: str) -> None:
    """Projection: Lambda~ = lambda I + release with eigenvalues below the floor raised to it,
    the eigenvectors and the larger eigenvalues kept; the shift moves every eigenvalue."""
    run = Run(cfg(knobs={"psd": psd}), [0, 1])
    learner, d, t = run.learner, HARD.model.d, 100
    gram = _indefinite(2, HARD.H, d, 5)
    w, inv_chol = learner.estimates({"gram": gram, "target": np.ones((2, HARD.H, d))}, t)
    chol = np.linalg.inv(inv_chol)
    lam = chol @ np.swapaxes(chol, -1, -2)
    eig = np.linalg.eigvalsh(lam)
    raw = np.linalg.eigvalsh(gram + learner.lam * np.eye(d))
    if psd == "project":
        assert eig.min() >= learner.floor(t) * (1 - 1e-9)
        np.testing.assert_allclose(eig, np.maximum(raw, learner.floor(t)), rtol=1e-9)
        assert learner.fallbacks == 2 * HARD.H  # every one had an eigenvalue below the floor
    else:
        np.testing.assert_allclose(eig, raw + learner.shift(t), rtol=1e-9)
    np.testing.assert_allclose(np.einsum("rhij,rhj->rhi", lam, w), 1.0, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("algo", ["ucrl-vtr", "linopt-vi"])
def test_projection_is_post_processing_of_the_billboard(algo: str) -> None:
    """A learner that never saw any data plans from another run's billboard exactly as that
    run's own learner does: the plan is a function of the release and public numbers only."""
    mdp = HARD if algo == "ucrl-vtr" else E2
    config = cfg(algo, mdp, epsilon=3.0, episodes=40, knobs={"psd": "project"})
    run = Run(config, [2])
    for k in range(15):
        message = run.message()
        traj, _ = user_episode(mdp, message, [9], k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
    board = run.billboard()
    fresh = Run(config, [2])
    ours, theirs = run.learner.plan(board, 15), fresh.learner.plan(board, 15)
    assert run.learner.fallbacks > 0  # the projection did act on this release
    for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key])


@pytest.mark.parametrize(("algo", "privacy"), [("ucrl-vtr", "jdp"), ("ucrl-vtr", "ldp"),
                                               ("linopt-vi", "jdp"), ("linopt-po", "jdp")])
def test_vectorized_replicas_equal_one_at_a_time(algo: str, privacy: str) -> None:
    """Replicas on a leading axis R (one run, batched numpy) give each seed's numbers."""
    mdp = HARD if algo == "ucrl-vtr" else E2
    config = cfg(algo, mdp, privacy=privacy, episodes=25, epsilon=5.0)
    seeds = [3, 4, 5]
    together = run_in_process(config, mdp, seeds)
    for r, seed in enumerate(seeds):
        alone = run_in_process(config, mdp, [seed])
        np.testing.assert_array_equal(together.regret[r], alone.regret[0])
        assert together.policy_changes[r] == alone.policy_changes[0]
    assert together.ledger.rho == pytest.approx(alone.ledger.rho, rel=1e-12)


def test_luyo_radius_helpers_are_the_theorem() -> None:
    """Thm. 7's beta with Ups_low = Ups_high = 0 is C_w sqrt(lambda) + Hoeffding."""
    assert luyo.beta_thm7(4.0, 0.0, 0.0, 0.0, 2.0, 1.5) == pytest.approx(2.0 * 2.0 + 1.5)


@pytest.mark.parametrize("algo", ["ucrl-vtr", "linopt-vi", "linopt-po"])
def test_sparse_schedule_replans_only_at_releases(algo: str) -> None:
    """Under batch:10 the learner plans once per release (and once at the start), not per
    report; the PO mirror step still counts every episode played with Q^k."""
    mdp = HARD if algo == "ucrl-vtr" else E2
    run = Run(cfg(algo, mdp, episodes=50, schedule="batch:10"), [1, 2])
    planned: list[int] = []
    plan = run.learner.plan

    def counting(billboard, reported):
        planned.append(reported)
        return plan(billboard, reported)

    run.learner.plan = counting  # type: ignore[method-assign]
    for k in range(50):
        message = run.message()
        traj, _ = user_episode(mdp, message, [5, 6], k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
    assert planned == [0, 10, 20, 30, 40]
    if algo == "linopt-po":
        assert run.learner.planned_at == 40
