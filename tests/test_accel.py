"""The compiled kernels (privrl.accel) give the numpy path's numbers, bit for bit.

Each case runs the same configuration twice, once with PRIVRL_NUMBA=0 (pure numpy) and once
compiled, and compares every replica's per-episode regret and the learner's final Q~ exactly.
Garnet worlds with S >= 8 and S > 128 exercise numpy's pairwise summation order.
"""

from __future__ import annotations

import numpy as np
import pytest
from privrl import accel
from privrl.config import RunConfig
from privrl.run import Run, run_in_process
from privrl.worlds.tabular import garnet, riverswim

pytestmark = pytest.mark.skipif(not accel.available(), reason="numba is not installed")

CASES = {  # private cases on the float backend: the compiled loop draws its noise
    "none": dict(privacy="none", preset="practical"),
    "none-pooled-faithful": dict(privacy="none", knobs={"pooled": True}),
    "jdp-gaussian": dict(privacy="jdp", noise="float", mechanism="gaussian", epsilon=1.0,
                         delta=1e-5,
                         preset="practical"),
    "jdp-laplace-faithful": dict(privacy="jdp", noise="float", mechanism="laplace", epsilon=2.0),
    "ldp-laplace-pooled": dict(privacy="ldp", noise="float", mechanism="laplace", epsilon=4.0,
                               knobs={"pooled": True}),
    "ldp-gaussian-released": dict(privacy="ldp", noise="float", mechanism="gaussian", epsilon=50.0,
                                  delta=1e-5, preset="practical",
                                  knobs={"pair_counts": "released"}),
}


def _both(monkeypatch: pytest.MonkeyPatch, mdp, case: dict, episodes: int) -> tuple:
    """(numpy result, compiled result) of the same run, with each learner's final Q~."""
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes,
                       **case)
    out = []
    for flag in ("0", "1"):
        monkeypatch.setenv(accel.ENV_SWITCH, flag)
        assert accel.enabled() == (flag == "1")
        out.append(run_in_process(config, mdp, [3, 4]))
    return tuple(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_run_equals_numpy_run(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    slow, fast = _both(monkeypatch, riverswim(8), CASES[case], 120)
    np.testing.assert_array_equal(fast.regret, slow.regret)
    assert fast.policy_versions == slow.policy_versions
    np.testing.assert_array_equal(fast.policy_changes, slow.policy_changes)
    assert fast.ledger.totals(1e-5) == slow.ledger.totals(1e-5)


@pytest.mark.parametrize(("states", "case"), [(12, "jdp-gaussian"), (12, "none"),
                                              (130, "jdp-laplace-faithful")])
def test_compiled_plan_equals_numpy_plan_on_garnet(monkeypatch: pytest.MonkeyPatch, states: int,
                                                   case: str) -> None:
    mdp = garnet(states, 3, 4, seed=1)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=50,
                       **CASES[case])
    run = Run(config, [5, 6])
    for k in range(12):  # feed some episodes, then plan the same billboard both ways
        run.ingest_trajectories(*_played(run, mdp, k))
    planner, billboard = run.learner.planner, run.billboard()
    args = (billboard, run.learner.radius(run.reported), run.learner.pair_std(run.reported),
            run.reported)
    results = []
    for flag in ("0", "1"):
        monkeypatch.setenv(accel.ENV_SWITCH, flag)
        planner.q = np.full_like(planner.q, float(mdp.H))
        actions = planner.plan(*args, private=run.calibration.mechanism is not None)
        results.append((actions, planner.q.copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert np.isfinite(results[1][1]).all() and (results[1][1] <= mdp.H).all()


def _played(run: Run, mdp, k: int) -> tuple:
    """Episode k's trajectories under the run's current policy, and the message played."""
    from privrl.run import user_episode

    message = run.message()
    traj, _ = user_episode(mdp, message, run.seeds, k, run.algorithm, run.calibration)
    return traj, message


def test_compiled_seed_sequence_gives_numpy_streams() -> None:
    from privrl.accel.streams import seeded_uniforms
    from privrl.seeding import CompiledSeedSequence, path_words, seed_sequence

    rng = np.random.default_rng(0)
    for trial in range(200):
        seed = int(rng.integers(0, 2**63)) << int(rng.integers(0, 66))  # 0 to ~128-bit seeds
        seed += 0 if trial % 5 else int(rng.integers(0, 3))
        path = [int(x) for x in rng.integers(0, 2**40, size=int(rng.integers(0, 4)))]
        path += ["user", "tiebreak", "tree"][trial % 3:trial % 3 + 1]
        want = np.random.Generator(np.random.PCG64(seed_sequence(seed, *path)))
        got = np.random.Generator(np.random.PCG64(CompiledSeedSequence(seed, *path)))
        np.testing.assert_array_equal(got.random(7), want.random(7))
        np.testing.assert_array_equal(got.standard_normal(5), want.standard_normal(5))
        np.testing.assert_array_equal(got.laplace(0.0, 1.0, 5), want.laplace(0.0, 1.0, 5))
        out = np.empty((3, 4))
        seeded_uniforms(*path_words(seed, *path), out)
        np.testing.assert_array_equal(
            out, np.random.Generator(np.random.PCG64(seed_sequence(seed, *path))).random((3, 4)))


@pytest.mark.slow
def test_warm_up_command_prepares_the_kernels() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "privrl.accel"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "privrl.accel: kernels ready in" in done.stdout


def test_compiled_laplace_and_normal_draws_are_numpys() -> None:
    """Every compiled draw equals numpy's Generator draw, the ziggurat's rare branches included
    (|x| beyond the base layer's edge r appears some 50 times in 200,000 normals)."""
    from privrl.accel.distributions import GAUSSIAN, LAPLACE, seeded_rows, ziggurat_nor_r
    from privrl.seeding import entropy_rows, generator, path_words

    seeds = (0, 7, 2**64 + 5, 2**127 + 12345)
    entropy, lengths = entropy_rows(seeds)
    tails = 0
    for kind in (GAUSSIAN, LAPLACE):
        for path in (("tree", "sas", 0, 1), ("tree", "r", 3, 2**33), ("user", 12)):
            out = np.empty((len(seeds), 50_000))
            seeded_rows(entropy, lengths, path_words(0, *path)[1], kind, 2.5, out)
            for r, seed in enumerate(seeds):
                rng = generator(seed, *path)
                want = rng.standard_normal(50_000) if kind == GAUSSIAN else rng.laplace(
                    0.0, 1.0, 50_000)
                np.testing.assert_array_equal(out[r], want * 2.5)
            if kind == GAUSSIAN:
                tails += int((np.abs(out) > 2.5 * ziggurat_nor_r).sum())
    assert tails > 10


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_seeded_rows_compiled_equal_generator_rows(monkeypatch: pytest.MonkeyPatch,
                                                   mechanism: str) -> None:
    from privrl.privacy.mechanisms import Gaussian, Laplace
    from privrl.privacy.noise import FLOAT_NOISE, sample_seeded_rows

    sampler = (Laplace(0.7, FLOAT_NOISE) if mechanism == "laplace"
               else Gaussian(1.3, FLOAT_NOISE))
    got = []
    for flag in ("0", "1"):
        monkeypatch.setenv(accel.ENV_SWITCH, flag)
        got.append(sample_seeded_rows(sampler, [11, 2**100], ("tree", "sas", 2, 3), (4, 3, 2)))
    assert got[0].shape == (2, 4, 3, 2)
    np.testing.assert_array_equal(got[0], got[1])
    assert not np.array_equal(got[1][0], got[1][1])  # one stream per row


@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_compiled_tree_noise_block_equals_the_trees_own(monkeypatch: pytest.MonkeyPatch,
                                                        smooth: bool, mechanism: str) -> None:
    """A block from t = 5 (nodes kept from before it), then items added one by one after it:
    every release equals the uncompiled tree's, so the block leaves the same nodes behind."""
    from privrl.privacy.mechanisms import Gaussian, Laplace
    from privrl.privacy.noise import FLOAT_NOISE
    from privrl.privacy.tree import TreeCounter

    # the compiled draws are the float backend's (simulation only); integer noise is numpy's
    noise = Laplace(0.5, FLOAT_NOISE) if mechanism == "laplace" else Gaussian(2.0, FLOAT_NOISE)
    items = np.random.default_rng(1).normal(size=(80, 2, 3, 2))
    releases = []
    for flag in ("0", "1"):
        monkeypatch.setenv(accel.ENV_SWITCH, flag)
        tree = TreeCounter((3, 2), noise, [9, 2**90], "sas", max_items=200, smooth=smooth)
        got = []
        for item in items[:5]:
            tree.add(item)
            got.append(tree.release())
        block = tree.noise_block(70)
        for i in range(70):
            got.append(block[i])  # the noise of the release after 5 + i items
            tree.exact += items[5 + i]
        for item in items[75:]:
            tree.add(item)
            got.append(tree.release())
        releases.append(np.array(got))
    np.testing.assert_array_equal(releases[0], releases[1])


def _projection_rows(rng: np.random.Generator, n_states: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy rows (C, S) and pair counts (C,): random, and adversarial (all negative, ties,
    zeros of both signs, huge and tiny entries, infeasible and clipped pair counts)."""
    counts = rng.integers(0, 40, size=(64, n_states)).astype(float)
    rows = [counts + rng.normal(0.0, scale, counts.shape) for scale in (0.3, 3.0, 30.0)]
    rows.append(-np.abs(rng.normal(0.0, 5.0, (16, n_states))))  # all negative
    rows.append(rng.integers(-2, 3, size=(32, n_states)).astype(float))  # ties
    rows.append(np.where(rng.random((16, n_states)) < 0.5, 0.0, -0.0))  # signed zeros
    huge = rng.normal(0.0, 1.0, (16, n_states)) * 10.0 ** rng.integers(-12, 16, (16, n_states))
    rows.append(huge)
    noisy = np.concatenate(rows)
    total = noisy.sum(axis=-1)
    pair = np.concatenate([total, total + rng.normal(0.0, 5.0, total.shape),
                           -np.abs(total) - 50.0, np.abs(total) * 3.0 + 50.0,
                           np.maximum(noisy, 0.0).sum(axis=-1)])  # the last: target = sum x0
    return np.tile(noisy, (5, 1)), pair


@pytest.mark.parametrize("n_states", [1, 2, 6, 7, 8, 9, 17, 130])
def test_compiled_projection_equals_numpy_projection(n_states: int) -> None:
    from privrl.accel.planning import project_cell
    from privrl.privacy.postprocess import project_counts

    rng = np.random.default_rng(n_states)
    noisy, pair = _projection_rows(rng, n_states)
    sas = noisy[:, None, :].copy()  # (C, A = 1, S): one cell per state of a fake step
    for radius in (0.0, 0.5, 3.0, 40.0, 1e6):
        want = project_counts(noisy, pair, radius)
        out = np.empty_like(sas)
        scratch = np.empty(4 * n_states)
        got_sa = np.array([project_cell(sas, c, 0, pair[c], radius, out, scratch)
                           for c in range(len(pair))])
        np.testing.assert_array_equal(out[:, 0], want.sas)
        np.testing.assert_array_equal(got_sa, want.sa)
        np.testing.assert_array_equal(np.signbit(out[:, 0]), np.signbit(want.sas))


@pytest.mark.parametrize("states", [6, 7, 8, 40, 150])
def test_compiled_regret_equals_the_evaluators(states: int) -> None:
    """The kernel's exact regret is `episode_regret`'s number, bit for bit, on both sides of
    numpy's 8-term and 128-term summation thresholds (S = 150: the halving sum)."""
    from privrl.accel.evaluation import policy_regret
    from privrl.worlds.values import episode_regret, optimal_return

    mdp = riverswim(20) if states == 6 else garnet(states, 3, 6, seed=states)
    policies = np.random.default_rng(states).integers(0, mdp.A, (40, mdp.H, mdp.S))
    scratch = np.empty(3 * mdp.S)
    got = [policy_regret(mdp.P, mdp.R, mdp.d1, optimal_return(mdp), pol, scratch)
           for pol in policies]
    want = episode_regret(mdp, policies)
    np.testing.assert_array_equal(got, want)
    assert np.ptp(want) > 0  # the policies differ in value: a constant could not pass
