"""DP-UCBVI's `support` knob: only a world's public transition support is released, P~ is
restricted to it, and the privacy cost (sensitivity, noise, ledger) is unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from privrl import accel
from privrl.algorithms import bind
from privrl.algorithms.ucbvi import SUPPORT_FAMILY
from privrl.algorithms.ucbvi.counts import tabular_counts
from privrl.algorithms.ucbvi.support import WORLD, SupportCells, support_knob
from privrl.config import RunConfig
from privrl.run import Run, run_in_process, user_episode
from privrl.studies.cases import case_named
from privrl.studies.frontier import Planner, StudySpec
from privrl.ties import TIE_TOL
from privrl.worlds.classic import gridworld, strens_chain
from privrl.worlds.rollout import Trajectories

GRID = gridworld(20, size=3, slip=0.0)


def config(world, support: bool, **kw) -> RunConfig:
    knobs = {"support": support_knob(world)} if support else {}
    base = dict(n_states=world.S, n_actions=world.A, horizon=world.H, episodes=60,
                privacy="jdp", epsilon=1.0, mechanism="gaussian", counter="smoothed",
                schedule="every", knobs={**knobs, **kw} or None)
    return RunConfig(**base)


def test_the_knob_is_the_worlds_declared_support():
    cells = SupportCells(bind(config(GRID, True)).knobs.support, GRID.S, GRID.A)
    np.testing.assert_array_equal(cells.mask, GRID.support)
    assert cells.cells == int(GRID.support.sum()) < GRID.S * GRID.A * GRID.S
    dense = np.arange(2 * GRID.S * GRID.A * GRID.S, dtype=float).reshape(2, GRID.S, GRID.A, -1)
    back = cells.unpack(cells.pack(dense))
    np.testing.assert_array_equal(back, np.where(GRID.support, dense, 0.0))


@pytest.mark.parametrize("knob", [[[0]], [[0, 0]] * 36, [[9]] * 36, [[]] * 36])
def test_a_malformed_support_is_refused(knob):
    with pytest.raises(ValueError, match="knob support"):
        bind(RunConfig(n_states=9, n_actions=4, horizon=20, episodes=10, knobs={"support": knob}))


@pytest.mark.parametrize("pooled", [False, True])
def test_sensitivity_and_privacy_cost_are_unchanged(pooled):
    """Same l1, l2 and noise scale per family, one fewer-celled family, same ledger totals."""
    dense, packed = (Run(config(GRID, s, pooled=pooled), [0]) for s in (False, True))
    by_name = {f.name: f for f in packed.calibration.families}
    assert "sas" not in by_name and by_name[SUPPORT_FAMILY].shape[-1] == int(GRID.support.sum())
    for f in dense.calibration.families:
        g = by_name[SUPPORT_FAMILY if f.name == "sas" else f.name]
        assert (g.l1, g.l2, g.scale, g.cost) == (f.l1, f.l2, f.scale, f.cost)
    results = [run_in_process(r.config, GRID, [0, 1]) for r in (dense, packed)]
    a, b = (res.ledger.totals(2e-6) for res in results)
    assert a.rho == pytest.approx(b.rho, rel=1e-12) and a.epsilon == pytest.approx(b.epsilon)
    names = set(results[1].ledger.by_mechanism())
    assert any(SUPPORT_FAMILY in n for n in names) and not any(n.endswith(":sas") for n in names)


def test_cells_outside_the_support_are_never_released():
    """The billboard's N(s,a,s') is exactly 0 off the support (no noise there), noisy on it."""
    run = Run(config(GRID, True), [3])
    for k in range(20):
        message = run.message()
        traj, _ = user_episode(GRID, message, run.seeds, k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
        released = run.privatizer.release()
        assert set(released) == {SUPPORT_FAMILY, "r"}
        assert released[SUPPORT_FAMILY].shape[-1] == int(GRID.support.sum())
        board = run.billboard()["sas"]
        assert np.all(board[..., ~GRID.support] == 0.0)
    assert np.any(board[..., GRID.support] % 1 != 0) or np.any(board[..., GRID.support] < 0)


def test_a_transition_outside_the_support_counts_nowhere():
    """A user's contribution stays one unit per step (so the sensitivity holds) even when it
    reports an impossible move: that step counts in no released cell."""
    algorithm = bind(config(GRID, True))
    impossible = int(np.flatnonzero(~GRID.support[0, 0])[0])
    states = np.array([[0, impossible, *([impossible] * (GRID.H - 1))]])
    traj = Trajectories(states=states, actions=np.zeros((1, GRID.H), np.int64),
                        rewards=np.zeros((1, GRID.H)))
    stats = algorithm.user_statistics(traj, {})
    assert stats[SUPPORT_FAMILY].sum(axis=-1).max() <= 1.0
    full = tabular_counts(traj, GRID.S, GRID.A)["sas"]
    assert stats[SUPPORT_FAMILY].sum() < full.sum()


def test_a_world_moving_outside_the_support_is_refused():
    chain = strens_chain(20, n_states=5, slip=0.2)
    knob = support_knob(chain)
    narrower = [row[:1] for row in knob]
    algorithm = bind(RunConfig(n_states=5, n_actions=2, horizon=20, episodes=10,
                               knobs={"support": narrower}))
    with pytest.raises(ValueError, match="outside the knob support"):
        algorithm.check_world(chain)
    bind(RunConfig(n_states=5, n_actions=2, horizon=20, episodes=10,
                   knobs={"support": knob})).check_world(chain)


def test_the_planners_model_is_restricted_to_the_support():
    """P~ is 0 off the support and sums to 1 on it, from a release noisy everywhere."""
    run = Run(config(GRID, True), [0])
    planner = run.learner.planner
    rng = np.random.default_rng(0)
    shape = (1, GRID.H, GRID.S, GRID.A)
    sas = np.abs(rng.normal(5.0, 3.0, (*shape, GRID.S)))
    release = (sas, sas.sum(-1), np.ones(shape))
    kernels = accel.load()
    model = planner.model(kernels, shape)
    q_new, actions = np.empty_like(planner.q), np.empty(shape[:3], np.int64)
    kernels.plan_replicas(release, 1.0, 0.0, planner.constants(1.0), planner.caps,
                          planner.flags(True), planner.q, q_new, actions,
                          np.empty(1, np.bool_), model, TIE_TOL)
    p = model[0][0]
    assert np.all(p[..., ~GRID.support] == 0.0)
    np.testing.assert_allclose(p.sum(-1), 1.0)


def test_per_pair_thresholds_follow_each_pairs_support():
    run = Run(config(GRID, True, threshold_per_pair=True, pair_counts="derived"), [0])
    factor = run.learner.planner.factor
    widths = GRID.support.sum(-1)
    np.testing.assert_allclose(factor, np.sqrt(widths / widths.max()))
    assert factor.min() < 1.0 == factor.max()
    assert Run(config(GRID, True), [0]).learner.planner.factor.size == 0


def test_a_study_resolves_the_support_of_each_world():
    case = case_named("dp-ucbvi-step-jdp")
    grid = {"name": "gridworld", "horizon": None, "params": {"size": 3, "slip": 0.0}}
    garnet = {"name": "garnet", "horizon": None,
              "params": {"n_states": 5, "n_actions": 2, "seed": 1}}
    on = Planner(StudySpec(episodes=100, world=grid, knobs=(("support", WORLD),)))
    config_on, _ = on.config(case, "practical", 1.0)
    assert config_on.knobs["support"] == support_knob(GRID)
    off = Planner(StudySpec(episodes=100, world=garnet))
    none = Planner(StudySpec(episodes=100, world=garnet, knobs=(("support", WORLD),)))
    assert none.config(case, "practical", 1.0)[0] == off.config(case, "practical", 1.0)[0]


def test_the_union_threshold_covers_every_pair_and_release():
    """unknown_union: P(N(0,1) > z) = beta / (H S A x releases), never below unknown_below."""
    from statistics import NormalDist

    from privrl.algorithms.ucbvi.learner import union_threshold
    from privrl.privacy.schedules import parse_schedule

    c = config(GRID, False, unknown_union=True)
    run = Run(c, [0])
    releases = parse_schedule(run.config.schedule).releases(c.episodes)
    tail = 1.0 - NormalDist().cdf(run.learner.planner.unknown_below)
    assert tail * GRID.H * GRID.S * GRID.A * releases == pytest.approx(c.beta, rel=1e-6)
    assert union_threshold(run.config, pooled=True) < run.learner.planner.unknown_below
    huge = config(GRID, False, unknown_union=True, unknown_below=50.0)
    assert Run(huge, [0]).learner.planner.unknown_below == 50.0
    assert Run(config(GRID, False), [0]).learner.planner.unknown_below == 2.0
