"""Issue 31 part 1, the budget is a limit: the ledger's privacy filter, the refusal of an
overspending release plan at creation, and the sweep of every algorithm x mode x preset x knob x
epsilon (`support.budget_sweep`)."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.algorithms import registry
from privrl.budget import OverspendingPlan, fits, planned_totals, run_budget
from privrl.client.user_state import UserState
from privrl.client.users import BudgetExhaustedError, User, UserContext
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec
from privrl.privacy.accountant import Budget, BudgetExhausted, Charge, Ledger, epsilon_to_rho
from privrl.protocol import RunInfo
from privrl.run import Run, run_in_process
from privrl.worlds.model_spec import model_spec_of
from support.budget_sweep import EPSILONS, Outcome, cases, measure
from support.policy_eval import pe_config
from support.server import AUTH, Apps, claim, create, spec, user_report, world

DELTA = 1e-5


def config_of(algo: str, privacy: str, epsilon: float, episodes: int = 50_000,
              preset: str = "faithful", **knobs: object) -> RunConfig:
    """A Gaussian run of `algo` on its own world."""
    mdp = WorldSpec(registry.get(algo).default_world, None, {}).build()
    return RunConfig(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                     model=model_spec_of(mdp), episodes=episodes, privacy=privacy,
                     epsilon=epsilon, delta=DELTA, mechanism="gaussian", preset=preset,
                     knobs=knobs or None)


# -- the filter ----------------------------------------------------------------------------------


def test_the_filter_refuses_a_release_past_the_budget_and_records_nothing() -> None:
    ledger = Ledger(budget=Budget(1.0, DELTA))
    ledger.charge("a", epsilon=0.6, sensitivity=1.0, scale=1.0)
    with pytest.raises(BudgetExhausted, match=r"epsilon = 1\.1.*past the run's budget"):
        ledger.charge("b", epsilon=0.5, sensitivity=1.0, scale=1.0)
    both = [Charge("c", epsilon=0.3), Charge("d", epsilon=0.2)]  # one release: all or none
    with pytest.raises(BudgetExhausted):
        ledger.charge_all(both)
    assert len(ledger) == 1 and ledger.epsilon_pure == 0.6
    ledger.charge("e", epsilon=0.4, sensitivity=1.0, scale=1.0)  # exactly the budget fits
    assert ledger.totals(DELTA).epsilon == pytest.approx(1.0)


def test_the_filter_composes_zcdp_releases_by_their_rho() -> None:
    """Two halves of the rho that converts to epsilon fit; anything more is refused."""
    rho = epsilon_to_rho(1.0, DELTA)
    ledger = Ledger(budget=Budget(1.0, DELTA))
    ledger.charge("a", rho=rho / 2, sensitivity=1.0, scale=1.0)
    ledger.charge("b", rho=rho / 2, sensitivity=1.0, scale=1.0)
    with pytest.raises(BudgetExhausted):
        ledger.charge("c", rho=rho * 1e-3, sensitivity=1.0, scale=1.0)
    assert ledger.rho == pytest.approx(rho, rel=1e-12)


def _tabular(privacy: str, mechanism: str = "gaussian") -> RunConfig:
    mdp = WorldSpec("riverswim", 5, {}).build()
    central = {"counter": "smoothed", "schedule": "every"} if privacy == "jdp" else {}
    return RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=8, privacy=privacy,
                     epsilon=1.0, delta=DELTA if mechanism == "gaussian" else 0.0,
                     mechanism=mechanism, **central)  # the tree every episode


def test_a_run_ends_when_its_filter_refuses_and_nothing_is_counted_or_drawn() -> None:
    """The filter (here set to the spend of the first release) refuses the next one before the
    privatizer changes: the item is not counted, no noise is drawn, the ledger and the billboard
    are as before, and the run takes nothing more."""
    cfg = _tabular("jdp")
    mdp = WorldSpec("riverswim", 5, {}).build()
    run = Run(cfg, [4])
    assert run.ledger.budget == run_budget(cfg) == Budget(1.0, DELTA)
    run.play_and_ingest(mdp, [4], 0)
    spent = run.ledger.totals(DELTA).epsilon
    run.ledger.budget = Budget(spent * (1 + 1e-12), DELTA)
    board, entries = run.billboard(), len(run.ledger)
    drawn = {name: tree.t for name, tree in run.privatizer.trees.items()}
    with pytest.raises(BudgetExhausted, match="privacy budget exhausted: the release tree:"):
        run.play_and_ingest(mdp, [4], 1)  # item 2 opens tree level 1
    assert run.reported == 1 and len(run.ledger) == entries
    assert {name: tree.t for name, tree in run.privatizer.trees.items()} == drawn
    for name, arr in run.billboard().items():
        np.testing.assert_array_equal(arr, board[name])
    assert run.exhausted is not None and "past the run's budget" in run.exhausted
    with pytest.raises(BudgetExhausted):
        run.play_and_ingest(mdp, [4], 1)


def test_the_ldp_aggregator_admits_the_users_charge_before_summing() -> None:
    cfg = _tabular("ldp", "laplace")
    mdp = WorldSpec("riverswim", 5, {}).build()
    run = Run(cfg, [4])
    run.ledger.budget = Budget(0.5, 0.0)
    with pytest.raises(BudgetExhausted, match="local:"):
        run.play_and_ingest(mdp, [4], 0)
    assert run.reported == 0 and len(run.ledger) == 0
    assert not any(total.any() for total in run.privatizer.sums.values())


def test_lsvi_admits_its_release_round_before_storing_anything() -> None:
    cfg = config_of("lsvi-ucb-switching", "jdp", 1.0, episodes=6, preset="practical",
                    trigger="always")
    mdp = WorldSpec("lin-cube", None, {}).build()
    run = Run(cfg, [2])
    run.ledger.budget = Budget(1e-9, DELTA)
    with pytest.raises(BudgetExhausted):
        run.play_and_ingest(mdp, [2], 0)
    assert run.privatizer.items == 0 and not run.privatizer.history.phi_next.any()
    assert not run.privatizer.pending.any() and len(run.ledger) == 0


def test_policy_evaluation_admits_its_one_release_before_the_last_report() -> None:
    cfg = pe_config("dp-lsw", "jdp", 3, 5, epsilon=1.0, delta=DELTA)
    run = Run(cfg, [1])
    run.ledger.budget = Budget(0.5, DELTA)
    stats = {"visits": np.ones((1, 5)), "returns": np.zeros((1, 5))}
    run.privatizer.ingest(stats, run.ledger)
    run.privatizer.ingest(stats, run.ledger)
    with pytest.raises(BudgetExhausted):
        run.privatizer.ingest(stats, run.ledger)
    assert run.privatizer.items == 2 and len(run.ledger) == 0


# -- refusal at creation -------------------------------------------------------------------------


@pytest.mark.parametrize(("algo", "privacy", "epsilon", "knobs"), [
    ("ucrl-vtr", "ldp", 3000.0, {}),  # 1000 fits since the public-feature bounds
    ("linopt-vi", "jdp", 1000.0, {}),
    ("lsvi-ucb-switching", "jdp", 1.0, {"calibration": "paper"}),
    ("lsvi-ucb-switching", "jdp", 100.0, {"calibration": "paper"}),
    # no calibration at epsilon <= 1 (shares beyond exact sampling), fits at 3 to 100
    ("linopt-vi", "secagg", 1000.0, {}),
])
def test_the_known_overspends_are_refused_with_their_true_spend(
        algo: str, privacy: str, epsilon: float, knobs: dict[str, object]) -> None:
    """Issue 31's overspending presets: refused, the message giving the true spend of the plan
    and the budgets this calibration fits (checked: the bisection's bound fits, 1% more not)."""
    cfg = config_of(algo, privacy, epsilon, **knobs)
    spend = planned_totals(cfg).epsilon
    assert spend > epsilon
    with pytest.raises(OverspendingPlan) as info:
        Run(cfg, [0])
    message = str(info.value)
    assert f"would spend epsilon = {spend:.6g} " in message
    assert f"past its budget epsilon = {epsilon:g}" in message
    if "fits no budget" in message:
        assert algo == "lsvi-ucb-switching"
        assert not fits(cfg.model_copy(update={"epsilon": 1e-3}))
    else:
        bound = float(message.split("fits its budget up to epsilon = ")[1].split(" ")[0])
        assert 1e-3 < bound < epsilon
        assert fits(cfg.model_copy(update={"epsilon": bound}))
        assert not fits(cfg.model_copy(update={"epsilon": bound * 1.01}))


def test_run_in_process_refuses_an_overspending_preset() -> None:
    cfg = config_of("ucrl-vtr", "ldp", 3000.0, episodes=5)
    mdp = WorldSpec("lm-hard", None, {}).build()
    with pytest.raises(OverspendingPlan, match="choose a calibration that spends exactly"):
        run_in_process(cfg, mdp, [0])


# -- the sweep -----------------------------------------------------------------------------------


# the (algorithm, mode) pairs some preset or knob choice of which overspends at some epsilon of
# the sweep (K = 10,000); every other pair never does
OVERSPENDING = {("ucrl-vtr", "ldp"), ("ucrl-vtr-plus", "ldp"), ("linopt-vi", "jdp"),
                ("linopt-vi", "ldp"), ("linopt-po", "jdp"), ("linopt-po", "ldp"),
                ("lsvi-ucb-switching", "jdp"),
                # secure aggregation's faithful presets take their paper's LDP noise scale
                ("ucrl-vtr", "secagg"), ("ucrl-vtr-plus", "secagg"), ("linopt-vi", "secagg"),
                ("linopt-po", "secagg")}


def _check_plans(outcomes: list[Outcome]) -> None:
    """Refused exactly when the projected spend passes the budget; refused only for the pairs
    known to overspend."""
    assert {o.case.config.epsilon for o in outcomes} == set(EPSILONS)
    for o in outcomes:
        assert o.within, o.case.label
        assert (o.refused is None) == (o.projected <= o.case.config.epsilon * (1 + 1e-9))
        if o.refused:
            assert (o.case.config.algo, o.case.config.privacy) in OVERSPENDING, o.case.label


# policy evaluation warns above epsilon = 5 (its Lemma 1 states no range): the sweep goes there
QUIET = pytest.mark.filterwarnings("ignore:eps = .* > 5:UserWarning")


# seconds to tens of seconds of plan accounting each: long tests, in the slow tier; the others
# keep a cheap representative of the sweep in the fast tier
COSTLY_SWEEPS = {"dp-ucbvi", "linopt-po", "linopt-vi", "lsvi-ucb-batched", "lsvi-ucb-switching",
                 "ucrl-vtr", "ucrl-vtr-plus"}


@QUIET
@pytest.mark.parametrize("algo", [pytest.param(a, marks=pytest.mark.slow) if a in COSTLY_SWEEPS
                                  else a for a in registry.names()])
def test_every_preset_plan_is_refused_or_within_budget(algo: str) -> None:
    """Every creatable mode x mechanism x preset x epsilon in {0.1, 1, 10, 1e3, 1e5} of `algo`
    at K = 10,000: refused at creation, or projected within budget."""
    _check_plans([measure(c) for c in cases(10_000, algos=[algo], presets_only=True)])


@QUIET
@pytest.mark.slow
def test_every_plan_is_refused_or_within_budget() -> None:
    """The same over every knob choice too (`python -m support.budget_sweep` prints it)."""
    outcomes = [measure(c) for c in cases(10_000)]
    _check_plans(outcomes)
    assert {(o.case.config.algo, o.case.config.privacy) for o in outcomes
            if o.refused} == OVERSPENDING


def _actual(outcomes: list[Outcome]) -> None:
    """Admitted runs: the actual ledger within the projected one, within the budget."""
    for o in outcomes:
        assert o.within, o.case.label
        if o.refused is None and o.actual is not None:
            assert o.actual <= o.projected * (1 + 1e-9), o.case.label


@QUIET
@pytest.mark.slow  # a long test: a short run of every algorithm x mode x mechanism x preset
def test_short_runs_of_every_preset_stay_within_their_plan() -> None:
    """Actual ledgers after 6 episodes, every algorithm x mode x mechanism x preset, at
    epsilon 1 and 1e3."""
    _actual([measure(c, run=True) for c in cases(6, (1.0, 1e3), presets_only=True)])


@QUIET
@pytest.mark.slow
def test_short_runs_of_every_case_stay_within_their_plan() -> None:
    """The same for every knob choice and every epsilon of the sweep."""
    _actual([measure(c, run=True) for c in cases(6)])


# -- the server and the users --------------------------------------------------------------------


@pytest.fixture
def client(apps: Apps) -> TestClient:
    """One app on a fresh database."""
    return apps()


def test_the_server_refuses_an_overspending_run_with_422(client: TestClient) -> None:
    mdp = WorldSpec("lm-hard", None, {}).build()
    body = spec("ldp", algo="ucrl-vtr", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                model=model_spec_of(mdp), episodes=100, epsilon=3000.0, delta=DELTA,
                mechanism="gaussian", preset="faithful")
    resp = client.post("/v1/runs", json=body, headers=AUTH)
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert "would spend epsilon = " in detail and "past its budget epsilon = 3000" in detail


def test_a_served_run_ends_when_its_budget_is_exhausted(client: TestClient) -> None:
    """The filter (set to the first release's spend) refuses report 2: 409 with the reason, the
    run's public status says so, later claims are refused the same way, the ledger is as it
    was."""
    body = spec("jdp", mechanism="gaussian", delta=DELTA, episodes=8)
    run_id = create(client, body)
    mdp = world(body)
    first = claim(client, run_id)
    assert client.post(f"/v1/runs/{run_id}/reports",
                       json=user_report(first, body, mdp)).status_code == 200
    hosted = client.app.state.run_table.runs[run_id]
    spent = hosted.run.ledger.totals(DELTA).epsilon
    hosted.run.ledger.budget = Budget(spent * (1 + 1e-12), DELTA)
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    second = claim(client, run_id)
    resp = client.post(f"/v1/runs/{run_id}/reports", json=user_report(second, body, mdp))
    assert resp.status_code == 409 and resp.json()["code"] == "budget_exhausted"
    assert "privacy budget exhausted" in resp.json()["detail"]
    status = RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json()).status
    assert status.finished and status.reported == 1
    assert "past the run's budget" in (status.budget_exhausted or "")
    again = client.post(f"/v1/runs/{run_id}/claims")
    assert again.status_code == 409 and again.json()["code"] == "budget_exhausted"
    assert client.get(f"/v1/runs/{run_id}/ledger").json() == ledger


def test_a_user_stops_at_once_saying_why() -> None:
    """A 409 budget_exhausted ends the user (no waiting out its patience), with the reason."""
    cfg = _tabular("jdp")
    mdp = WorldSpec("riverswim", 5, {}).build()
    reason = "run r1 has ended at 1 reports: privacy budget exhausted: ..."

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(409, json={"detail": reason, "code": "budget_exhausted"})

    info = RunInfo.model_validate({
        "id": "r1", "config": cfg.model_dump(mode="json"), "created_at": 0.0,
        "status": {"episodes": 8, "claimed": 1, "outstanding": 0, "reported": 1,
                   "finished": False, "policy_version": 1}})

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer),
                                     base_url="http://server") as http:
            user = User(http, UserContext.create(info, mdp), UserState(5, None))
            with pytest.raises(BudgetExhaustedError, match="privacy budget exhausted"):
                await user.claim()

    asyncio.run(asyncio.wait_for(go(), timeout=30))
