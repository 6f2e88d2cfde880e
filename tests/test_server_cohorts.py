"""Cohorts (`privrl.server.cohorts`): a boundary with `cohort_size` B > 1 has its reports counted
B at a time, each cohort's combined inputs one item of the release, atomically with respect to
a restart; a cohort below its exchange's threshold is aborted."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl import trust
from privrl.server.cohorts import Cohorts
from privrl.trust.base import CohortExchange
from support.server import Apps, claim, create, spec, state, user_report, world


class TwoOfThree(CohortExchange):
    """Completes a cohort of three from any two survivors."""

    def threshold(self, size: int) -> int:
        return size - 1


def one(value: float) -> dict[str, np.ndarray]:
    return {"x": np.full((1, 2), value)}


def test_a_cohort_completes_from_its_survivors_or_is_aborted() -> None:
    cohorts = Cohorts(3, TwoOfThree())
    lapsed = {1, 4, 5}
    gone = lapsed.__contains__
    assert cohorts.reported(0, one(1.0), gone) is None  # member 2 has not reported yet
    assert cohorts.held == 1
    inputs = cohorts.reported(2, one(5.0), gone)  # 1 lapsed: 2 of 3 survived
    assert inputs is not None and [x["x"][0, 0] for x in inputs] == [1.0, 5.0]
    assert TwoOfThree().combine(inputs)["x"].tolist() == [[6.0, 6.0]]
    assert cohorts.reported(3, one(2.0), gone) is None  # 4 and 5 lapsed: aborted
    assert cohorts.held == 0 and not cohorts.open


def test_a_replay_completes_a_cohort_where_the_stored_ack_says() -> None:
    cohorts = Cohorts(2, CohortExchange())
    assert cohorts.replayed(0, one(1.0), completed=False) is None
    inputs = cohorts.replayed(1, one(2.0), completed=True)
    assert inputs is not None and len(inputs) == 2 and not cohorts.open


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy cohort boundary, registered for this test only."""
    trust.names()  # load the built-ins first: the copy restored after the test holds them
    monkeypatch.setattr(trust, "_registry", dict(trust._registry))
    monkeypatch.delitem(sys.modules, "support.toy_cohort", raising=False)
    importlib.import_module("support.toy_cohort")


def report(client: TestClient, run_id: str, ticket: dict[str, Any], config: dict[str, Any]
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Post an honest user's report of `ticket`: (its body, the Ack)."""
    body = user_report(ticket, config, world(config))
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 200, resp.text
    return body, resp.json()


def board(client: TestClient, run_id: str) -> tuple[int, dict[str, list[float]]]:
    """The billboard's report count and arrays."""
    got = client.get(f"/v1/runs/{run_id}/billboard").json()
    return got["reported"], got["arrays"]


def test_reports_count_by_cohort_and_a_restart_never_splits_one(toy: None, apps: Apps) -> None:
    config = spec("toy-cohort", episodes=6, epsilon=2.0)
    client = apps()
    run_id = create(client, config)
    tickets = [claim(client, run_id) for _ in range(3)]
    bodies = []
    for ticket in tickets[:2]:
        body, ack = report(client, run_id, ticket, config)
        bodies.append(body)
        assert ack["reported"] == 0  # held: the cohort is not complete
    assert state(client, run_id)["status"]["reported"] == 0
    assert board(client, run_id)[0] == 0
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    assert ledger["charges"] == []  # nothing released, nothing spent

    client = apps.reopen(client)  # a restart with a partial cohort: still held, not counted
    assert state(client, run_id)["status"]["reported"] == 0
    body, ack = report(client, run_id, tickets[2], config)  # its claim survived the restart
    bodies.append(body)
    assert ack["reported"] == 3
    reported, arrays = board(client, run_id)
    assert reported == 3
    for name in bodies[0]["arrays"]:  # the release is the cohort's sum, one item
        summed = np.sum([b["arrays"][name] for b in bodies], axis=0)
        np.testing.assert_allclose(arrays[name], summed)

    client = apps.reopen(client)  # replayed: the cohort counts once
    assert state(client, run_id)["status"]["reported"] == 3
    assert board(client, run_id) == (reported, arrays)
    retry = client.post(f"/v1/runs/{run_id}/reports", json=bodies[0])
    assert retry.status_code == 200 and retry.json()["duplicate"]


def test_held_reports_leave_no_room_for_claims_past_k(toy: None, apps: Apps) -> None:
    config = spec("toy-cohort", episodes=3, epsilon=2.0)
    client = apps()
    run_id = create(client, config)
    tickets = [claim(client, run_id) for _ in range(3)]
    for ticket in tickets[:2]:
        report(client, run_id, ticket, config)
    refused = client.post(f"/v1/runs/{run_id}/claims")
    assert refused.status_code == 409 and refused.json()["code"] == "full"
    assert report(client, run_id, tickets[2], config)[1]["reported"] == 3
    assert client.post(f"/v1/runs/{run_id}/claims").status_code == 410
