"""GET /v1/runs/{id}/cohorts (`privrl.server.cohort_view`): a secure-aggregation run's cohorts
forming and its assumptions, for the dashboard and the demo. Counts only: no member's key,
ticket or message, no seed; a run without cohorts has none to show."""

from __future__ import annotations

import numpy as np
from privrl.protocol import CohortsView
from privrl.trust.secagg.protocol import CohortSetup, UserSession
from privrl.trust.secagg.wire import b64
from support.server import Apps, claim, create, spec

SETUP = CohortSetup(b"view", size=4, min_survivors=3, length=5, bits=32, degree=3)


def test_a_cohort_forming_is_shown_by_counts_with_the_runs_assumptions(apps: Apps) -> None:
    client = apps()
    config = spec("secagg", episodes=8, epsilon=1.0, mechanism="gaussian", delta=1e-5,
                  schedule="batch:4", dropout=0.25, seed=424242)
    run_id = create(client, config)
    empty = CohortsView.model_validate(client.get(f"/v1/runs/{run_id}/cohorts").json())
    assert empty.cohorts == [] and set(empty.counts.values()) == {0}
    tickets, keys = [], []
    for _ in range(2):  # two of cohort 0's four members join
        ticket = claim(client, run_id)["ticket"]
        ad = UserSession(SETUP, 0, np.zeros(5)).advertise()
        keys += [b64(ad.cipher_key), b64(ad.mask_key)]
        joined = client.post(f"/v1/runs/{run_id}/cohorts/0/keys", json={
            "ticket": ticket, "cipher_key": keys[-2], "mask_key": keys[-1]})
        assert joined.status_code == 200, joined.text
        tickets.append(ticket)
    resp = client.get(f"/v1/runs/{run_id}/cohorts")
    assert resp.status_code == 200
    view = CohortsView.model_validate(resp.json())
    # B = 4, dropout 0.25: 3 inputs to release; collusion 0.1 (the default): 1 colluder
    assert (view.size, view.dropout, view.collusion) == (4, 0.25, 0.1)
    assert (view.min_survivors, view.honest_shares, view.noise) == (3, 2, "skellam")
    assert view.assumptions.startswith("cohorts of 4, dropout <= 0.25, collusion <= 0.1")
    assert view.counts == {"released": 0, "refused": 0, "aborted": 0, "in_flight": 1}
    (state,) = view.cohorts
    assert (state.cohort, state.members, state.round, state.survivors, state.outcome) == (
        0, 2, "keys", 0, None)
    for secret in (*tickets, *keys, "424242"):  # nothing of a member, nothing of the seed
        assert secret not in resp.text


def test_a_run_without_cohorts_has_none_to_show(apps: Apps) -> None:
    client = apps()
    run_id = create(client, spec("jdp", epsilon=1.0))
    resp = client.get(f"/v1/runs/{run_id}/cohorts")
    assert resp.status_code == 404 and resp.json()["code"] == "no_cohorts"
    boundaries = {b["name"]: b["cohorts"] for b in client.get("/v1/trust").json()}
    assert boundaries == {"none": False, "jdp": False, "ldp": False, "secagg": True}
