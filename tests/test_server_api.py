"""Server routes in-process (FastAPI TestClient): auth, run life cycle, claims, reports, refusals.

Every refused request is checked to leave the billboard, ledger, policy log and counters exactly
as they were (contract 5).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.privacy.calibration import calibrate
from privrl.protocol import Ack, PolicyLog, RunInfo, RunList
from privrl.run import Run, user_episode
from server_support import (
    ADMIN,
    AUTH,
    Apps,
    claim,
    create,
    play,
    public,
    spec,
    state,
    user_report,
    world,
)

ClientFactory = Apps


@pytest.fixture
def client(apps: ClientFactory) -> TestClient:
    """One app with the default settings."""
    return apps()


# -- admin token ------------------------------------------------------------------------------


def test_admin_routes_need_the_token(client: TestClient) -> None:
    config = spec()
    resp = client.post("/v1/runs", json=config)
    assert resp.status_code == 401
    assert "missing admin token" in resp.json()["detail"]
    assert resp.headers["WWW-Authenticate"] == "Bearer"
    resp = client.post("/v1/runs", json=config, headers={"Authorization": "Bearer nope"})
    assert resp.status_code == 403
    assert resp.json() == {"detail": "wrong admin token", "code": "bad_token"}
    resp = client.post("/v1/runs", json=config, headers={"Authorization": f"Basic {ADMIN}"})
    assert resp.status_code == 401
    run_id = create(client, config)
    assert client.delete(f"/v1/runs/{run_id}").status_code == 401
    resp = client.delete(f"/v1/runs/{run_id}", headers={"Authorization": "Bearer x"})
    assert resp.status_code == 403
    assert client.get("/v1/runs").json()["runs"][0]["id"] == run_id


def test_admin_routes_answer_503_without_a_configured_token(apps: ClientFactory) -> None:
    client = apps(admin_token=None)
    resp = client.post("/v1/runs", json=spec(), headers=AUTH)
    assert resp.status_code == 503
    assert "PRIVRL_ADMIN_TOKEN" in resp.json()["detail"]
    assert client.delete("/v1/runs/abc", headers=AUTH).status_code == 503
    assert client.get("/v1/runs").status_code == 200  # public routes still work


# -- run life cycle ---------------------------------------------------------------------------


def test_create_list_show_delete(client: TestClient) -> None:
    config = spec("ldp", epsilon=2.0)
    resp = client.post("/v1/runs", json=config, headers=AUTH)
    assert resp.status_code == 201
    info = RunInfo.model_validate_json(resp.content)
    assert info.config == public(config)
    assert "seed" not in resp.json()["config"]
    assert info.status.model_dump() == {
        "episodes": 10, "claimed": 0, "outstanding": 0, "reported": 0, "finished": False,
        "policy_version": 1,
    }
    assert info.sequential is False
    other = create(client, spec("none"))
    listed = RunList.model_validate_json(client.get("/v1/runs").content)
    assert [r.id for r in listed.runs] == [info.id, other]
    assert RunInfo.model_validate_json(client.get(f"/v1/runs/{info.id}").content) == info

    resp = client.delete(f"/v1/runs/{info.id}", headers=AUTH)
    assert resp.status_code == 204 and resp.content == b""
    resp = client.get(f"/v1/runs/{info.id}")
    assert resp.status_code == 404 and "was deleted" in resp.json()["detail"]
    assert client.post(f"/v1/runs/{info.id}/claims").status_code == 404
    assert client.delete(f"/v1/runs/{info.id}", headers=AUTH).status_code == 404
    assert [r["id"] for r in client.get("/v1/runs").json()["runs"]] == [other]
    resp = client.get("/v1/runs/no-such-run/billboard")
    assert resp.status_code == 404 and "no run with id" in resp.json()["detail"]


def test_infinite_epsilon_round_trips(client: TestClient) -> None:
    config = spec("jdp", epsilon=float("inf"))
    headers = {**AUTH, "Content-Type": "application/json"}
    resp = client.post("/v1/runs", content=json.dumps(config), headers=headers)  # Infinity
    assert resp.status_code == 201, resp.text
    assert resp.json()["config"]["epsilon"] == "Infinity"
    info = RunInfo.model_validate_json(resp.content)
    assert info.config.epsilon == float("inf")
    play(client, info.id, config, 2)
    ledger = client.get(f"/v1/runs/{info.id}/ledger").json()
    assert ledger["epsilon"] == "inf"


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({**spec(), "n_states": 0}, 422, "n_states"),
        ({**spec(), "colour": "red"}, 422, "colour"),
        ({**spec(), "mechanism": "gaussian"}, 422, "delta"),
        (spec(n_states=200, n_actions=10, horizon=50), 422, "PRIVRL_MAX_CELLS"),
        (spec("ldp", n_states=60, n_actions=5, horizon=10), 422, "PRIVRL_MAX_BODY_BYTES"),
        ("{not json", 400, "malformed JSON"),
        ([1, 2], 422, "invalid request"),
    ],
)
def test_create_refuses_bad_specs(
    client: TestClient, body: Any, status: int, fragment: str
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    resp = client.post(
        "/v1/runs", content=content, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert resp.status_code == status, resp.text
    assert fragment in resp.json()["detail"]
    assert client.get("/v1/runs").json()["runs"] == []


# -- the claim / report cycle -----------------------------------------------------------------


@pytest.mark.parametrize("privacy", ["none", "jdp", "ldp"])
def test_full_cycle(client: TestClient, privacy: str) -> None:
    config = spec(privacy, episodes=6)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    assert ticket["episode"] == 0 and ticket["policy"]["version"] == 1
    assert ticket["expires_in"] == 30.0
    if privacy == "ldp":
        cal = calibrate(public(config))
        assert ticket["randomizer"] == {
            "mechanism": "laplace",
            "scale": cal.mechanism.scale,
            "families": {f.name: list(f.shape) for f in cal.families},
            "scales": {f.name: cal.mechanism.scale for f in cal.families},
            "symmetric": [],
        }
    else:
        assert ticket["randomizer"] is None
    body = user_report(ticket, config, world(config))
    assert body["kind"] == ("noisy" if privacy == "ldp" else "trajectory")
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 200
    assert Ack.model_validate(resp.json()) == Ack(run_id=run_id, episode=0, reported=1)

    acks = play(client, run_id, config, 5)
    assert [a["reported"] for a in acks] == [2, 3, 4, 5, 6]
    assert [a["episode"] for a in acks] == [1, 2, 3, 4, 5]
    resp = client.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 410 and "finished" in resp.json()["detail"]

    snap = state(client, run_id)
    assert snap["status"]["finished"] and snap["status"]["reported"] == 6
    assert snap["billboard"]["reported"] == 6
    assert set(snap["billboard"]["shapes"]) == {"sas", "sa", "r"}
    assert snap["billboard"]["shapes"]["sas"] == [5, 4, 2, 4]
    assert len(snap["billboard"]["arrays"]["sas"]) == 5 * 4 * 2 * 4
    if privacy == "none":
        assert snap["ledger"]["epsilon"] == 0.0 and snap["billboard"]["radius"] == 0.0
        assert sum(snap["billboard"]["arrays"]["sa"]) == 6 * 5  # exact counts: H per episode
    else:
        assert snap["ledger"]["epsilon"] == pytest.approx(1.0)
        assert snap["ledger"]["delta"] == 0.0 and snap["ledger"]["charges"]
    log = PolicyLog.model_validate(snap["policies"])
    assert len(log.episodes) == 6 and log.outcomes == ["reported"] * 6
    assert max(log.versions) == snap["policy"]["version"] == snap["status"]["policy_version"]
    assert log.versions[snap["policy"]["version"]] == snap["policy"]["actions"]


def test_gaussian_ledger_reports_delta(client: TestClient) -> None:
    config = spec("jdp", mechanism="gaussian", delta=1e-6, episodes=4)
    run_id = create(client, config)
    play(client, run_id, config, 4)
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    assert ledger["delta"] == 1e-6
    assert ledger["epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert ledger["rho"] > 0 and ledger["epsilon_pure"] == 0.0


def test_http_run_reproduces_the_in_process_run(client: TestClient) -> None:
    """Sequential HTTP episodes = the in-process sequence (same seeds, same numbers)."""
    for privacy in ("jdp", "ldp"):
        config = spec(privacy, episodes=12, seed=5)
        cfg = public(config)
        mdp = world(config)
        run = Run(cfg, [5])
        expected = []
        for k in range(cfg.episodes):
            message = run.message()
            expected.append(message["actions"][0].tolist())
            traj, noisy = user_episode(mdp, message, [5], k, run.algorithm, run.calibration)
            if noisy is None:
                run.ingest_trajectories(traj, message)
            else:
                run.ingest_noisy(noisy)
        run_id = create(client, config)
        for k in range(cfg.episodes):
            ticket = claim(client, run_id)
            assert ticket["episode"] == k
            assert ticket["policy"]["actions"] == expected[k]
            body = user_report(ticket, config, mdp, client_seed=5)
            assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
        board = client.get(f"/v1/runs/{run_id}/billboard").json()
        for name, arr in run.billboard().items():
            assert board["arrays"][name] == arr[0].ravel().tolist()
        assert board["radius"] == run.radius()
        ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
        assert ledger["epsilon"] == run.ledger.totals(1e-5).epsilon
        assert len(ledger["charges"]) == len(run.ledger.entries)


# -- refusals change nothing --------------------------------------------------------------------


def _jdp_cases(good: dict[str, Any], horizon: int) -> list[tuple[str, dict, int, str]]:
    """(name, body, status, detail fragment) of bad JDP reports derived from a good one."""
    policy_action = good["actions"][0]
    return [
        ("noisy kind", {"kind": "noisy", "ticket": good["ticket"], "arrays": {}}, 422,
         "accepts only kind='trajectory'"),
        ("unknown ticket", {**good, "ticket": "A" * 32}, 404, "unknown ticket"),
        ("bad ticket format", {**good, "ticket": "short"}, 422, "ticket"),
        ("short states", {**good, "states": good["states"][:-1]}, 422, "states must have H+1"),
        ("long actions", {**good, "actions": good["actions"] + [0]}, 422,
         f"actions must have H (a_1..a_H) = {horizon}"),
        ("short rewards", {**good, "rewards": good["rewards"][:-1]}, 422, "rewards must have H"),
        ("state too big", {**good, "states": [4] + good["states"][1:]}, 422,
         "states[0] is outside [0, S) = [0, 4)"),
        ("negative state", {**good, "states": [-1] + good["states"][1:]}, 422,
         "greater than or equal to 0"),
        ("action too big", {**good, "actions": [2] + good["actions"][1:]}, 422,
         "actions[0] is outside [0, A) = [0, 2)"),
        ("off-policy action", {**good, "actions": [1 - policy_action] + good["actions"][1:]},
         422, "not the action that policy version"),
        ("reward above 1", {**good, "rewards": [1.5] + good["rewards"][1:]}, 422,
         "less than or equal to 1"),
        ("negative reward", {**good, "rewards": [-0.25] + good["rewards"][1:]}, 422,
         "greater than or equal to 0"),
        ("string state", {**good, "states": ["x"] + good["states"][1:]}, 422, "valid integer"),
        ("extra field", {**good, "user": "alice"}, 422, "Extra inputs are not permitted"),
        ("missing kind", {k: v for k, v in good.items() if k != "kind"}, 422, "kind"),
        ("missing ticket", {k: v for k, v in good.items() if k != "ticket"}, 422, "ticket"),
    ]


def _raw_cases(good: dict[str, Any]) -> list[tuple[str, str, int, str]]:
    """(name, raw body, status, detail fragment): bodies that are not plain JSON numbers."""
    dumped = json.dumps(good)
    rewards = json.dumps(good["rewards"])
    tail = rewards[rewards.index(","):] if "," in rewards else "]"
    states = json.dumps(good["states"])
    return [
        ("malformed", dumped[:-5], 400, "malformed JSON"),
        ("empty", "", 422, "request body is missing"),
        ("NaN reward", dumped.replace(rewards, "[NaN" + tail), 422, "finite number"),
        ("Infinity reward", dumped.replace(rewards, "[Infinity" + tail), 422, "finite number"),
        ("overflowing reward", dumped.replace(rewards, "[1e400" + tail), 422, "finite number"),
        ("huge state", dumped.replace(states, "[" + "9" * 40 + states[states.index(","):]), 422,
         "states[0] is outside"),
        ("array body", "[1, 2, 3]", 422, "invalid request"),
        ("null body", "null", 422, "invalid request"),
    ]


def test_bad_jdp_reports_are_refused_and_change_nothing(client: TestClient) -> None:
    config = spec("jdp", episodes=5)
    run_id = create(client, config)
    play(client, run_id, config, 2)
    ticket = claim(client, run_id)
    good = user_report(ticket, config, world(config))
    before = state(client, run_id)
    url = f"/v1/runs/{run_id}/reports"
    for name, body, status, fragment in _jdp_cases(good, config["horizon"]):
        resp = client.post(url, json=body)
        assert resp.status_code == status, (name, resp.text)
        assert fragment in resp.json()["detail"], (name, resp.json())
        assert state(client, run_id) == before, name
    for name, raw, status, fragment in _raw_cases(good):
        resp = client.post(url, content=raw, headers={"Content-Type": "application/json"})
        assert resp.status_code == status, (name, resp.text)
        assert fragment in resp.json()["detail"], (name, resp.json())
        assert state(client, run_id) == before, name
    # The claim is still usable: the good report is accepted afterwards.
    resp = client.post(url, json=good)
    assert resp.status_code == 200 and resp.json()["reported"] == 3
    metrics = client.get("/metrics").text
    assert 'privrl_reports_refused_total{reason="invalid"}' in metrics
    assert 'privrl_reports_refused_total{reason="schema"}' in metrics
    assert 'privrl_reports_refused_total{reason="malformed"}' in metrics


def test_bad_ldp_reports_are_refused_and_change_nothing(client: TestClient) -> None:
    config = spec("ldp", episodes=5)
    run_id = create(client, config)
    play(client, run_id, config, 1)
    ticket = claim(client, run_id)
    mdp = world(config)
    good = user_report(ticket, config, mdp)
    arrays = good["arrays"]
    scale = ticket["randomizer"]["scale"]
    traj = user_report(
        {**ticket, "policy": ticket["policy"]}, spec("jdp", episodes=5), mdp
    )
    cases = [
        ("raw trajectory", {**traj, "ticket": good["ticket"]}, 422,
         "accepts only kind='noisy'"),
        ("missing family", {**good, "arrays": {"sas": arrays["sas"]}}, 422, "missing ['r']"),
        ("extra family", {**good, "arrays": {**arrays, "states": [0.0]}}, 422,
         "unexpected ['states']"),
        ("short array", {**good, "arrays": {**arrays, "r": arrays["r"][:-1]}}, 422,
         "arrays['r'] must have 40 entries"),
        ("long array", {**good, "arrays": {**arrays, "sas": arrays["sas"] + [0.0]}}, 422,
         "arrays['sas'] must have 160 entries"),
        ("absurd value", {**good, "arrays": {**arrays, "r": [1e6 * scale] + arrays["r"][1:]}},
         422, "arrays['r'][0] is outside"),
        ("string value", {**good, "arrays": {**arrays, "r": ["a"] + arrays["r"][1:]}}, 422,
         "valid number"),
        ("unknown ticket", {**good, "ticket": "B" * 40}, 404, "unknown ticket"),
    ]
    assert set(arrays) == {"sas", "r"}  # practical preset: N(s,a) is derived, not released
    url = f"/v1/runs/{run_id}/reports"
    before = state(client, run_id)
    for name, body, status, fragment in cases:
        resp = client.post(url, json=body)
        assert resp.status_code == status, (name, resp.text)
        assert fragment in resp.json()["detail"], (name, resp.json())
        assert state(client, run_id) == before, name
    nan_body = json.dumps(good).replace(json.dumps(arrays["r"][0]), "NaN", 1)
    resp = client.post(url, content=nan_body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 422 and "finite number" in resp.json()["detail"]
    assert state(client, run_id) == before
    assert client.post(url, json=good).status_code == 200


def test_retried_report_returns_the_stored_ack_and_counts_once(client: TestClient) -> None:
    config = spec("jdp", episodes=4)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    body = user_report(ticket, config, world(config))
    url = f"/v1/runs/{run_id}/reports"
    first = client.post(url, json=body).json()
    after_first = state(client, run_id)
    for _ in range(3):
        resp = client.post(url, json=body)
        assert resp.status_code == 200
        assert resp.json() == {**first, "duplicate": True}
    # Same content, different key order and float spelling: still the same report.
    reordered = {k: body[k] for k in reversed(list(body))}
    assert client.post(url, json=reordered).json()["duplicate"] is True
    assert state(client, run_id) == after_first
    other = {**body, "rewards": [1.0 - r for r in body["rewards"]]}
    resp = client.post(url, json=other)
    assert resp.status_code == 409 and "single-use" in resp.json()["detail"]
    assert state(client, run_id) == after_first
    metrics = client.get("/metrics").text
    assert f'privrl_reports_accepted_total{{run="{run_id}"}} 1.0' in metrics
    assert f'privrl_reports_duplicate_total{{run="{run_id}"}} 4.0' in metrics
    assert 'privrl_reports_refused_total{reason="conflict"} 1.0' in metrics


def test_report_to_another_runs_ticket_is_unknown(client: TestClient) -> None:
    config = spec("jdp")
    run_a, run_b = create(client, config), create(client, config)
    ticket = claim(client, run_a)
    body = user_report(ticket, config, world(config))
    resp = client.post(f"/v1/runs/{run_b}/reports", json=body)
    assert resp.status_code == 404 and "unknown ticket" in resp.json()["detail"]
    assert client.post(f"/v1/runs/{run_a}/reports", json=body).status_code == 200


# -- claims: slots, expiry, sequential mode -----------------------------------------------------


def test_expired_claims_free_their_slots_and_the_run_completes(
    apps: ClientFactory,
) -> None:
    client = apps(claim_timeout=0.3)
    config = spec("jdp", episodes=3)
    run_id = create(client, config)
    tickets = [claim(client, run_id) for _ in range(3)]
    resp = client.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 409 and "claimed" in resp.json()["detail"]
    assert int(resp.headers["Retry-After"]) >= 1
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["outstanding"] == 3
    mdp = world(config)
    url = f"/v1/runs/{run_id}/reports"
    assert client.post(url, json=user_report(tickets[0], config, mdp)).status_code == 200
    time.sleep(0.35)
    status = client.get(f"/v1/runs/{run_id}").json()["status"]
    assert status["outstanding"] == 0 and status["claimed"] == 3 and status["reported"] == 1
    before = state(client, run_id)
    late = user_report(tickets[1], config, mdp)
    resp = client.post(url, json=late)
    assert resp.status_code == 410 and "expired" in resp.json()["detail"]
    assert resp.json()["code"] == "expired"  # for programs: claim again
    assert state(client, run_id) == before
    client2 = apps.reopen(client, claim_timeout=30.0)  # finish without racing expiry
    acks = play(client2, run_id, config, 2)
    assert [a["episode"] for a in acks] == [3, 4]
    assert client2.get(f"/v1/runs/{run_id}").json()["status"]["finished"] is True
    resp = client2.post(url, json=user_report(tickets[2], config, mdp))
    assert resp.status_code == 410 and "finished" in resp.json()["detail"]
    assert resp.json()["code"] == "finished"
    log = client2.get(f"/v1/runs/{run_id}/policies").json()
    assert log["outcomes"] == ["reported", "expired", "expired", "reported", "reported"]


def test_sequential_runs_have_one_outstanding_claim(apps: ClientFactory) -> None:
    client = apps()
    config = spec("jdp", episodes=3)
    run_id = create(client, config, "?sequential=true")
    assert client.get(f"/v1/runs/{run_id}").json()["sequential"] is True
    ticket = claim(client, run_id)
    resp = client.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 409 and "sequential" in resp.json()["detail"]
    assert resp.json()["code"] == "busy"
    assert "Retry-After" in resp.headers
    body = user_report(ticket, config, world(config))
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    assert claim(client, run_id)["episode"] == 1
    # The server-wide default applies to runs created without the query parameter.
    seq_client = apps.reopen(client, sequential=True)
    run2 = create(seq_client, config)
    run3 = create(seq_client, config, "?sequential=false")
    assert seq_client.get(f"/v1/runs/{run2}").json()["sequential"] is True
    assert seq_client.get(f"/v1/runs/{run3}").json()["sequential"] is False
    assert seq_client.get(f"/v1/runs/{run_id}").json()["sequential"] is True  # persisted


def test_claim_wait_returns_when_the_outstanding_claim_lapses(
    apps: ClientFactory,
) -> None:
    client = apps(claim_timeout=0.3)
    run_id = create(client, spec("jdp"), "?sequential=true")
    claim(client, run_id)
    started = time.monotonic()
    ticket = claim(client, run_id, wait=5)
    assert 0.2 < time.monotonic() - started < 3.0
    assert ticket["episode"] == 1
    resp = client.post(f"/v1/runs/{run_id}/claims", params={"wait": -1})
    assert resp.status_code == 422


# -- limits, documentation, metrics, logs --------------------------------------------------------


def test_oversized_body_is_refused_with_413(apps: ClientFactory) -> None:
    client = apps(max_body_bytes=64 * 1024)
    config = spec("jdp")
    run_id = create(client, config)
    ticket = claim(client, run_id)
    before = state(client, run_id)
    body = {**user_report(ticket, config, world(config)), "pad": "x" * 100_000}
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 413
    assert "too large" in resp.json()["detail"] and "65536" in resp.json()["detail"]
    assert state(client, run_id) == before
    assert 'privrl_reports_refused_total{reason="too_large"} 1.0' in client.get("/metrics").text


def test_openapi_documents_every_error(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    expect = {
        ("/v1/runs", "post"): {"201", "400", "401", "403", "413", "422", "503"},
        ("/v1/runs/{run_id}", "delete"): {"204", "401", "403", "404"},
        ("/v1/runs/{run_id}/claims", "post"): {"200", "404", "409", "410", "422"},
        ("/v1/runs/{run_id}/reports", "post"): {"200", "400", "404", "409", "410", "413", "422"},
        ("/v1/runs/{run_id}/billboard", "get"): {"200", "404"},
        ("/v1/runs/{run_id}/ledger", "get"): {"200", "404"},
        ("/v1/runs/{run_id}/policies", "get"): {"200", "404"},
        ("/v1/runs/{run_id}/policy", "get"): {"200", "404"},
    }
    for (path, method), codes in expect.items():
        responses = paths[path][method]["responses"]
        assert codes <= set(responses), (path, method, set(responses))
        for code in codes - {"200", "201", "204"}:
            ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorBody")
    report_body = paths["/v1/runs/{run_id}/reports"]["post"]["requestBody"]
    assert "discriminator" in json.dumps(report_body) or "oneOf" in json.dumps(report_body)
    assert {"/healthz", "/readyz", "/metrics"} <= set(paths)


def test_metrics_count_claims_reports_and_privacy(client: TestClient) -> None:
    config = spec("ldp", episodes=3)
    run_id = create(client, config)
    play(client, run_id, config, 2)
    client.post(f"/v1/runs/{run_id}/reports", json={"kind": "noisy", "ticket": "C" * 20,
                                                     "arrays": {}})
    text = client.get("/metrics").text
    assert f'privrl_claims_total{{run="{run_id}"}} 2.0' in text
    assert f'privrl_reports_accepted_total{{run="{run_id}"}} 2.0' in text
    assert 'privrl_reports_refused_total{reason="unknown_ticket"} 1.0' in text
    assert f'privrl_epsilon_spent{{run="{run_id}"}} 1.0' in text
    assert f'privrl_policy_version{{run="{run_id}"}}' in text
    assert f'privrl_episodes_reported{{run="{run_id}"}} 2.0' in text
    assert 'route="/v1/runs/{run_id}/reports"' in text
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json()["ready"] is True


def test_logs_and_errors_never_carry_report_contents(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = spec("jdp", episodes=3)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    policy = np.asarray(ticket["policy"]["actions"])
    states = [3, 2, 1, 0, 1, 2]
    actions = [int(policy[h, states[h]]) for h in range(5)]
    marker = 0.7316421
    body = {"kind": "trajectory", "ticket": ticket["ticket"], "states": states,
            "actions": actions, "rewards": [marker] * 5}
    bad = {**body, "rewards": [1.7316421] * 5}
    resp = client.post(f"/v1/runs/{run_id}/reports", json=bad)
    assert resp.status_code == 422 and "1.7316421" not in resp.text
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    ldp = spec("ldp", episodes=3)
    ldp_id = create(client, ldp)
    ldp_ticket = claim(client, ldp_id)
    noisy = user_report(ldp_ticket, ldp, world(ldp))
    noisy["arrays"]["r"][0] = 0.9137712
    assert client.post(f"/v1/runs/{ldp_id}/reports", json=noisy).status_code == 200
    text = caplog.text
    assert "accepted" in text and run_id in text
    for secret in ("0.7316421", "1.7316421", "0.9137712", str(states), ticket["ticket"]):
        assert secret not in text
