"""The ledger's view (issue 43 parts 2 and 6): epsilon at the run's delta and at a tenth of it,
and, where the spend depends on released data, the guarantee (the filter's budget) beside the
realized odometer, saying which is which: in process, over HTTP and in the text."""

from __future__ import annotations

import privrl
import pytest
from privrl.privacy.accountant import Budget, Ledger
from privrl.protocol import LedgerView
from support.server import Apps, create, play, spec


def test_the_ledger_states_epsilon_at_a_second_smaller_delta() -> None:
    ledger = Ledger()
    ledger.charge("gaussian", rho=0.01, sensitivity=1.0, scale=7.0)
    ledger.charge("laplace", epsilon=0.2, sensitivity=1.0, scale=5.0)
    view = LedgerView.of("x", ledger, 2e-6)
    assert view.smaller_delta == pytest.approx(2e-7)
    assert view.epsilon_at_smaller_delta == pytest.approx(ledger.totals(2e-7).epsilon)
    assert view.epsilon_at_smaller_delta > view.epsilon == ledger.totals(2e-6).epsilon
    assert "at delta = 2e-07" in view.spent_text()


def test_a_pure_ledger_has_the_same_epsilon_at_both_deltas() -> None:
    ledger = Ledger(budget=Budget(1.0, 1e-5))
    ledger.charge("laplace", epsilon=0.5, sensitivity=1.0, scale=2.0)
    view = LedgerView.of("x", ledger, 1e-5)
    assert view.epsilon == view.epsilon_at_smaller_delta == 0.5
    assert (view.budget_epsilon, view.budget_delta, view.guarantee) == (1.0, 1e-5, "spent")
    assert "guarantee: the spend, eps = 0.5" in view.guarantee_text()


def test_nothing_charged_and_no_budget_claims_nothing() -> None:
    view = LedgerView.of("x", Ledger(), 1e-5)
    assert view.guarantee == "none" and view.budget_epsilon is None


def test_switching_lsvi_shows_the_budget_as_guarantee_beside_the_odometer() -> None:
    res = privrl.simulate("lsvi-ucb-switching", epsilon=5.0, episodes=200, seeds=1)
    view = res.ledger
    assert view.data_dependent and view.guarantee == "budget"
    assert view.budget_epsilon == 5.0 and view.budget_delta == res.config.delta
    assert 0 < float(view.epsilon) < 5.0  # fewer rounds than planned: the odometer is below
    text = view.guarantee_text()
    assert "guarantee: the budget eps = 5" in text
    assert f"realized odometer: eps = {float(view.epsilon):.4g}" in text


def test_a_switch_after_every_leaf_is_not_data_dependent() -> None:
    res = privrl.simulate("lsvi-ucb-switching", epsilon=5.0, episodes=200, seeds=1,
                          knobs={"trigger": "always"})
    assert not res.ledger.data_dependent and res.ledger.guarantee == "spent"
    batched = privrl.simulate("lsvi-ucb-batched", epsilon=5.0, episodes=50, seeds=1)
    assert not batched.ledger.data_dependent and batched.ledger.guarantee == "spent"


def test_the_ledger_route_carries_both_deltas_and_the_budget(apps: Apps) -> None:
    client = apps()
    config = spec("jdp", mechanism="gaussian", episodes=4)
    assert config["delta"] == 0.02  # the population rule at K = 4
    run_id = create(client, config)
    play(client, run_id, config, 4)
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    assert ledger["delta"] == 0.02 and ledger["smaller_delta"] == pytest.approx(0.002)
    assert ledger["epsilon_at_smaller_delta"] > ledger["epsilon"]
    assert ledger["budget_epsilon"] == 1.0 and ledger["budget_delta"] == 0.02
    assert ledger["data_dependent"] is False and ledger["guarantee"] == "spent"


def test_the_run_table_states_the_second_delta_and_the_guarantee(
        capsys: pytest.CaptureFixture[str]) -> None:
    from privrl.client.lab_cli import print_table

    res = privrl.simulate("lsvi-ucb-switching", epsilon=5.0, episodes=200, seeds=1)
    print_table([res.record])
    out = capsys.readouterr().out
    assert "eps@δ/10" in out and f"{float(res.ledger.epsilon_at_smaller_delta):.4g}" in out
    assert "guarantee: the budget eps = 5" in out


def test_a_prefix_keeps_the_budget_and_the_data_dependence() -> None:
    ledger = Ledger(budget=Budget(2.0, 1e-6), data_dependent=True)
    for _ in range(3):
        ledger.charge("gaussian", rho=0.01, sensitivity=1.0, scale=7.0)
    first = ledger.prefix(2)
    assert len(first) == 2 and first.budget == ledger.budget and first.data_dependent
    assert LedgerView.of("x", first, 1e-6).guarantee == "budget"
