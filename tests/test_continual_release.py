"""Continual release wired into runs: every counter x schedule spends exactly its plan, releases
with the variance the calibration states, refuses past the budget before drawing, and gives the
same numbers over HTTP as in process."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.algorithms import bind, effective
from privrl.algorithms.base import Family
from privrl.config import RunConfig
from privrl.privacy.accountant import Budget, BudgetExhausted, Ledger
from privrl.privacy.calibration import calibrate
from privrl.privacy.privatizers import Central
from privrl.run import Run, run_in_process
from privrl.worlds.tabular import riverswim
from pydantic import ValidationError
from support.server import Apps, create, play, public, spec, state

COUNTERS = ("tree", "smoothed", "matrix")
SCHEDULES = ("every", "batch:7", "geometric:1.3")
MDP = riverswim(5, 4)


def _config(counter: str, schedule: str, episodes: int = 60, **extra) -> RunConfig:
    """A small Gaussian JDP DP-UCBVI run on RiverSwim (S=4, H=5)."""
    return RunConfig(n_states=4, n_actions=2, horizon=5, episodes=episodes, epsilon=1.0,
                     delta=1e-5, mechanism="gaussian", counter=counter, schedule=schedule,
                     **extra)


def _key(charges) -> list[tuple]:
    """What a charge list says: mechanism, cost, sensitivity, scale and when."""
    return [(c.mechanism, c.rho, c.epsilon, c.sensitivity, c.scale, c.at) for c in charges]


@pytest.mark.parametrize(("counter", "schedule"), [  # fast: each counter and schedule once
    pytest.param(c, s, marks=[] if COUNTERS.index(c) == SCHEDULES.index(s) else pytest.mark.slow)
    for c, s in itertools.product(COUNTERS, SCHEDULES)])
def test_a_runs_ledger_is_its_plan_and_spends_the_budget(counter: str, schedule: str) -> None:
    config = _config(counter, schedule)
    plan = Run(config, [0]).privatizer.plan()
    result = run_in_process(config, MDP, [1, 2])
    assert _key(result.ledger.entries) == _key(plan)
    spent = result.ledger.totals(config.delta).epsilon
    assert spent <= config.epsilon * (1 + 1e-9)
    assert spent == pytest.approx(config.epsilon, rel=1e-9)  # nothing left unspent either
    releases = sum(1 for e in range(1, 61) if Run(config, [0]).privatizer.release_due(e))
    assert releases == Run(config, [0]).calibration.plan.releases


def test_a_banded_matrix_counter_charges_only_its_bands() -> None:
    config = _config("matrix", "every", counter_bands=4)
    result = run_in_process(config, MDP, [1])
    assert sorted({c.at for c in result.ledger.entries}) == [1, 2, 3, 4]
    assert result.ledger.totals(config.delta).epsilon == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize(("counter", "schedule"), list(itertools.product(COUNTERS, SCHEDULES)))
def test_the_billboard_has_the_release_variance_the_calibration_states(
        counter: str, schedule: str) -> None:
    """Central over many zero entries: each release's empirical variance is release_std^2 (the
    discrete Gaussian's own variance; randomized rounding adds at most 1/4), and between
    releases the billboard does not move."""
    n, episodes = 20_000, 30
    config = RunConfig(n_states=1, n_actions=1, horizon=1, episodes=episodes, epsilon=2.0,
                       delta=1e-5, mechanism="gaussian", counter=counter, schedule=schedule)
    cal = calibrate(config, [Family("x", (n,), 1.0, 1.0, 1.0)])
    central, ledger = Central(cal, [5], episodes), Ledger()
    last = central.release()["x"]
    for e in range(1, episodes + 1):
        central.ingest({"x": np.zeros((1, n))}, ledger)
        board = central.release()["x"]
        if not central.release_due(e):
            np.testing.assert_array_equal(board, last)
            continue
        want = cal.release_std(e) ** 2
        got = board.var()
        slack = 5 * math.sqrt(2.0 / n) + (0.25 / want if counter == "matrix" else 0.0)
        assert abs(got / want - 1.0) < slack, (e, got, want)
        assert cal.release_std(e) <= cal.release_std_bound(e) * (1 + 1e-12)
        last = board


@pytest.mark.parametrize("counter", COUNTERS)
def test_the_filter_refuses_a_release_before_drawing_its_noise(counter: str) -> None:
    """A ledger with 90% of the run's budget: the release it cannot pay ends the run with the
    counters and the billboard untouched."""
    config = _config(counter, "geometric:1.3", episodes=40)
    run = Run(config, [3])
    run.ledger = Ledger(budget=Budget(0.9 * config.epsilon, config.delta))
    board = run.billboard()
    with pytest.raises(BudgetExhausted):
        for k in range(40):
            board = {name: arr.copy() for name, arr in run.billboard().items()}
            run.play_and_ingest(MDP, [4], k)
    central = run.privatizer
    assert isinstance(central, Central) and run.exhausted is not None
    assert 0 < central.released < central.counter_plan.releases
    assert all(c.t == central.released for c in central.trees.values())  # nothing drawn
    for name, arr in run.billboard().items():
        np.testing.assert_array_equal(arr, board[name])
    assert run.ledger.totals(config.delta).epsilon <= 0.9 * config.epsilon


def test_counter_configuration_errors_say_what_to_do() -> None:
    base = dict(n_states=3, n_actions=2, horizon=4, episodes=10)
    cases = [
        (dict(schedule="weekly"), "use every, batch:B or geometric:r"),
        (dict(schedule="geometric:1"), "ratio above 1"),
        (dict(counter_bands=3), "counter_bands is for counter='matrix'"),
        (dict(counter="matrix"), "use mechanism 'gaussian'"),
        (dict(counter="matrix", mechanism="gaussian", delta=1e-5, noise="float"),
         "needs noise='numpy'"),
        (dict(counter="tree", tree_smoothing=True), "contradicts counter='tree'"),
        (dict(counter="binary"), "'tree', 'smoothed' or 'matrix'"),
    ]
    for extra, message in cases:
        with pytest.raises(ValidationError, match=message):
            RunConfig(**base, **extra)
    assert RunConfig(**base).counter is None  # the preset's, filled where a run is made
    assert effective(RunConfig(**base)).counter == "smoothed"
    assert effective(RunConfig(**base, preset="faithful")).counter == "tree"
    assert RunConfig(**base, tree_smoothing=False).counter == "tree"
    with pytest.raises(ValueError, match="releases nothing"):
        calibrate(RunConfig(**base, counter="tree", schedule="batch:11"),
                  [Family("x", (1,), 1.0, 1.0)])
    with pytest.raises(ValueError, match="until an algorithm binds"):
        calibrate(RunConfig(**base), [Family("x", (1,), 1.0, 1.0)])


def test_a_schedule_outside_jdp_is_refused_where_the_run_is_made() -> None:
    """The configuration is plain data; binding it to its algorithm refuses the schedule, and
    a matrix counter (neither does anything outside JDP)."""
    for privacy in ("ldp", "none"):
        config = RunConfig(n_states=3, n_actions=2, horizon=4, episodes=10, privacy=privacy,
                           schedule="batch:2")
        with pytest.raises(ValueError, match=f"with privacy '{privacy}' leave schedule at"):
            bind(config)
        assert bind(config.model_copy(update={"schedule": "every"})).config.schedule == "every"
        matrix = config.model_copy(update={"schedule": None, "counter": "matrix",
                                           "mechanism": "gaussian", "delta": 1e-5})
        with pytest.raises(ValueError, match=f"with privacy '{privacy}' leave counter at its"):
            bind(matrix)


def test_dp_ucbvi_plans_only_when_the_billboard_changes() -> None:
    config = _config("smoothed", "batch:7", episodes=30)
    run = Run(config, [2])
    versions = []
    for k in range(30):
        run.play_and_ingest(MDP, [2], k)
        run.message()
        versions.append(run._planned_at)
    assert set(versions) == {0, 7, 14, 21, 28}


# -- the server ----------------------------------------------------------------------------------


def test_http_run_with_a_matrix_counter_and_a_schedule_gives_the_in_process_numbers(
        apps: Apps) -> None:
    body = spec("jdp", episodes=24, mechanism="gaussian", delta=1e-5, counter="matrix",
                schedule="geometric:1.5", seed=3)
    client: TestClient = apps()
    run_id = create(client, body)
    play(client, run_id, body, 24)
    served = state(client, run_id)

    config = public(body)
    assert (config.counter, config.schedule) == ("matrix", "geometric:1.5")
    run = Run(config, [3])
    for k in range(24):
        run.play_and_ingest(MDP, [11], k)
    board = run.billboard()
    got = served["billboard"]
    assert got["reported"] == 24
    for name, arr in board.items():
        np.testing.assert_allclose(np.asarray(got["arrays"][name]), arr[0].ravel(), rtol=0,
                                   atol=1e-12)
    assert got["noise_std"] == pytest.approx(run.calibration.release_std(24), rel=1e-12)
    assert served["ledger"]["rho"] == pytest.approx(run.ledger.totals(1e-5).rho, rel=1e-12)
    assert len(served["ledger"]["charges"]) == len(run.ledger.entries)
    np.testing.assert_array_equal(np.asarray(served["policy"]["actions"]).ravel(),
                                  run.policy()[0].ravel())
