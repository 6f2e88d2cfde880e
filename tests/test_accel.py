"""DP-UCBVI's compiled kernels: the fused episode loop gives the generic loop's numbers, and the
planner and its projection agree with plain numpy references (to a tolerance)."""

from __future__ import annotations

import numpy as np
import pytest
from privrl.algorithms.ucbvi import DPUCBVIAlgorithm
from privrl.config import RunConfig
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds.tabular import garnet, riverswim
from support.projection import project_counts
from support.ucbvi_reference import plan_q

CASES = {  # the fused loop runs them all: float noise and the default seeded integer noise
    "none": dict(privacy="none", preset="practical"),
    "none-pooled-faithful": dict(privacy="none", knobs={"pooled": True}),
    "ldp-laplace-pooled": dict(privacy="ldp", noise="float", mechanism="laplace", epsilon=4.0,
                               knobs={"pooled": True}),
    "ldp-gaussian-released": dict(privacy="ldp", noise="float", mechanism="gaussian",
                                  epsilon=50.0, delta=1e-5, preset="practical",
                                  knobs={"pair_counts": "released"}),
    "ldp-laplace-pooled-integer": dict(privacy="ldp", mechanism="laplace", epsilon=4.0,
                                       knobs={"pooled": True}),
    "ldp-gaussian-released-integer": dict(privacy="ldp", mechanism="gaussian", epsilon=50.0,
                                          delta=1e-5, preset="practical",
                                          knobs={"pair_counts": "released"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_loop_gives_the_generic_loops_numbers(monkeypatch: pytest.MonkeyPatch,
                                                    case: str) -> None:
    """The same run through DP-UCBVI's fused loop and through the generic loop (users, learner
    and privatizer one episode at a time): same regret (the fused loop redoes a policy's values
    only from the last step it changed at), versions, switches and ledger."""
    mdp = riverswim(8)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=150, **CASES[case])
    run = Run(config, [3, 4])
    assert run.algorithm.simulator(run, mdp) is not None  # the fused loop does run this case
    fused = run_in_process(config, mdp, [3, 4])
    monkeypatch.setattr(DPUCBVIAlgorithm, "simulator", lambda self, run, world: None)
    generic = run_in_process(config, mdp, [3, 4])
    np.testing.assert_array_equal(fused.regret, generic.regret)  # one kernel computes both
    assert fused.policy_versions == generic.policy_versions
    np.testing.assert_array_equal(fused.policy_changes, generic.policy_changes)
    assert fused.ledger.totals(1e-5) == generic.ledger.totals(1e-5)
    assert np.ptp(fused.regret) > 0  # the policies changed: a constant trace could not pass


def test_fused_loop_spans_several_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 7 episodes (the users' streams carried across them) give the one-block
    numbers."""
    from privrl.algorithms.ucbvi import fused

    mdp = riverswim(6)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=60,
                       **CASES["ldp-gaussian-released-integer"])
    whole = run_in_process(config, mdp, [5])
    monkeypatch.setattr(fused, "BLOCK", 7)
    blocks = run_in_process(config, mdp, [5])
    np.testing.assert_array_equal(blocks.regret, whole.regret)
    np.testing.assert_array_equal(blocks.policy_changes, whole.policy_changes)


PLANS = {**CASES,  # the planner also serves JDP, whose runs take the generic loop
         "jdp-gaussian": dict(privacy="jdp", noise="float", mechanism="gaussian", epsilon=1.0,
                              delta=1e-5, preset="practical"),
         "jdp-laplace-faithful": dict(privacy="jdp", noise="float", mechanism="laplace",
                                      epsilon=2.0)}


@pytest.mark.parametrize(("states", "case"), [(6, "none"), (12, "jdp-gaussian"), (12, "none"),
                                              (30, "jdp-laplace-faithful"),
                                              (9, "ldp-laplace-pooled")])
def test_compiled_plan_agrees_with_the_numpy_reference(states: int, case: str) -> None:
    mdp = garnet(states, 3, 4, seed=1)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=50,
                       **PLANS[case])
    run = Run(config, [5, 6])
    for k in range(12):  # feed some episodes, then plan the same billboard both ways
        message = run.message()
        traj, noisy = user_episode(mdp, message, run.seeds, k, run.algorithm, run.calibration,
                                   nonces=[k] * len(run.seeds))
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)
    planner, billboard, n = run.learner.planner, run.billboard(), run.reported
    private = run.calibration.mechanism is not None
    radius, threshold = run.learner.radius(n), planner.knobs.unknown_below * run.learner.pair_std(n)
    planner.q = np.full_like(planner.q, float(mdp.H))
    want = plan_q(planner, billboard, radius, threshold, private)
    actions = planner.plan(billboard, radius, run.learner.pair_std(n), n, private)
    np.testing.assert_allclose(planner.q, want, rtol=1e-9, atol=1e-9)
    assert np.isfinite(planner.q).all() and (planner.q <= mdp.H).all()
    assert np.ptp(planner.q) > 0
    best = want.max(axis=-1)  # the actions are greedy in the reference's Q~ too
    chosen = np.take_along_axis(want, actions[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(chosen, best, rtol=0, atol=1e-8)


def _projection_rows(rng: np.random.Generator, n_states: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy rows (C, S) and pair counts (C,): random, and adversarial (all negative, ties,
    zeros of both signs, infeasible and clipped pair counts)."""
    counts = rng.integers(0, 40, size=(64, n_states)).astype(float)
    rows = [counts + rng.normal(0.0, scale, counts.shape) for scale in (0.3, 3.0, 30.0)]
    rows.append(-np.abs(rng.normal(0.0, 5.0, (16, n_states))))  # all negative
    rows.append(rng.integers(-2, 3, size=(32, n_states)).astype(float))  # ties
    rows.append(np.where(rng.random((16, n_states)) < 0.5, 0.0, -0.0))  # signed zeros
    noisy = np.concatenate(rows)
    total = noisy.sum(axis=-1)
    pair = np.concatenate([total, total + rng.normal(0.0, 5.0, total.shape),
                           -np.abs(total) - 50.0, np.abs(total) * 3.0 + 50.0,
                           np.maximum(noisy, 0.0).sum(axis=-1)])  # the last: target = sum x0
    return np.tile(noisy, (5, 1)), pair


@pytest.mark.parametrize("n_states", [1, 2, 6, 9, 17, 130])
def test_compiled_projection_agrees_with_the_numpy_projection(n_states: int) -> None:
    from privrl.accel.kernels import project_cell

    rng = np.random.default_rng(n_states)
    noisy, pair = _projection_rows(rng, n_states)
    sas = noisy[:, None, :].copy()  # (C, A = 1, S): one cell per state of a fake step
    for radius in (0.0, 0.5, 3.0, 40.0, 1e6):
        want = project_counts(noisy, pair, radius)
        out = np.empty_like(sas)
        scratch = np.empty(4 * n_states)
        got_sa = np.array([project_cell(sas, c, 0, pair[c], radius, out, scratch)
                           for c in range(len(pair))])
        scale = 1.0 + np.abs(want.sas).max()
        np.testing.assert_allclose(out[:, 0], want.sas, rtol=1e-9, atol=1e-9 * scale)
        np.testing.assert_allclose(got_sa, want.sa, rtol=1e-9, atol=1e-9 * scale)


def test_ties_are_broken_uniformly_among_the_tied_actions() -> None:
    from privrl.accel.kernels import break_ties

    q = np.zeros((1, 400, 3))
    q[0, :, 1] = -1.0  # actions 0 and 2 tie, action 1 is worse
    actions = np.full((1, 400), -1, np.int64)
    break_ties(q, np.random.default_rng(0).random((1, 400)), 1e-9, actions)
    assert set(np.unique(actions)) == {0, 2}
    assert 0.4 < (actions == 0).mean() < 0.6
