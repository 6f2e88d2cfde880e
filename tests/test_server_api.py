"""Server routes in-process (FastAPI TestClient): auth, run life cycle, claims, reports, refusals.

Every refused request is checked to leave the billboard, ledger, policy log and counters exactly
as they were (contract 5).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator
from privrl import trust
from privrl.algorithms import bind, effective, get
from privrl.config import RunConfig, population_delta
from privrl.protocol import Ack, PolicyLog, RunInfo, RunList
from privrl.run import Run, user_episode
from privrl.server.limits import max_report_bytes
from pydantic import ValidationError
from support.server import (
    ADMIN,
    AUTH,
    Apps,
    claim,
    create,
    from_address,
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
        "policy_version": 1, "budget_exhausted": None,
    }
    assert info.sequential is False
    other = create(client, spec("none"))
    listed = RunList.model_validate_json(client.get("/v1/runs").content)
    assert [r.id for r in listed.runs] == [info.id, other]
    assert RunInfo.model_validate_json(client.get(f"/v1/runs/{info.id}").content) == info

    play(client, info.id, config, 1)
    series = f'{{run="{info.id}"}}'
    assert f"privrl_claims_total{series} 1.0" in client.get("/metrics").text
    resp = client.delete(f"/v1/runs/{info.id}", headers=AUTH)
    assert resp.status_code == 204 and resp.content == b""
    assert series not in client.get("/metrics").text  # its labelled series are gone
    resp = client.get(f"/v1/runs/{info.id}")
    assert resp.status_code == 404 and "was deleted" in resp.json()["detail"]
    assert client.post(f"/v1/runs/{info.id}/claims").status_code == 404
    assert client.delete(f"/v1/runs/{info.id}", headers=AUTH).status_code == 404
    assert [r["id"] for r in client.get("/v1/runs").json()["runs"]] == [other]
    resp = client.get("/v1/runs/no-such-run/billboard")
    assert resp.status_code == 404 and "no run with id" in resp.json()["detail"]


def test_a_run_created_without_a_mechanism_gets_the_algorithms(client: TestClient) -> None:
    """Neither mechanism nor delta in the body: the algorithm's across the boundary (the
    frontier's row), its delta then the population rule's; a delta of 0 given alone keeps the
    schema's default, Laplace."""
    bare = {"n_states": 4, "n_actions": 2, "horizon": 5, "episodes": 50_000, "privacy": "jdp"}
    resp = client.post("/v1/runs", json=bare, headers=AUTH)
    assert resp.status_code == 201, resp.text
    info = RunInfo.model_validate_json(resp.content)
    expected = get("dp-ucbvi").mechanism_for(trust.get("jdp"))
    assert expected == "gaussian" and info.config.mechanism == expected
    assert info.config.delta == population_delta(50_000)
    resp = client.post("/v1/runs", json={**bare, "delta": 0.0}, headers=AUTH)
    assert RunInfo.model_validate_json(resp.content).config.mechanism == "laplace", resp.text
    laplace = client.post("/v1/runs", json={**bare, "mechanism": "laplace"}, headers=AUTH)
    assert RunInfo.model_validate_json(laplace.content).config.mechanism == "laplace"


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


@pytest.mark.parametrize(
    ("field", "value", "where", "got"),
    [
        ("episodes", "10", "body.episodes", "a string"),
        ("episodes", True, "body.episodes", "a boolean"),
        ("n_states", "4", "body.n_states", "a string"),
        ("epsilon", "1.0", "body.epsilon", "a string"),
        ("epsilon", "inf", "body.epsilon", "a string"),
        ("epsilon", True, "body.epsilon", "a boolean"),
        ("beta", False, "body.beta", "a boolean"),
        ("tree_smoothing", "true", "body.tree_smoothing", "a string"),
    ],
)
def test_create_refuses_values_of_the_wrong_json_type(
    client: TestClient, field: str, value: Any, where: str, got: str
) -> None:
    """Strict input: a string, boolean or number where another JSON type belongs is a 422."""
    resp = client.post("/v1/runs", json={**spec(), field: value}, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert resp.json()["code"] == "schema"
    detail = resp.json()["detail"]
    assert where in detail and f"got {got}" in detail and "never converted" in detail
    assert client.get("/v1/runs").json()["runs"] == []


@pytest.mark.parametrize(
    ("knobs", "fragment"),
    [
        ({"bonus_scale": "1"}, "bonus_scale: Input should be a valid number"),
        ({"clip_previous": 1}, "clip_previous: Input should be a valid boolean"),
        ({"pooled": 0}, "pooled: Input should be a valid boolean"),
        ({"no_such_knob": 1}, "no_such_knob: unknown knob. Valid knobs, as preset"),
    ],
)
def test_create_refuses_knobs_the_algorithm_does_not_have(
    client: TestClient, knobs: dict, fragment: str
) -> None:
    """Knobs are checked by the algorithm, strictly (no conversion), and named in the error."""
    resp = client.post("/v1/runs", json={**spec(), "knobs": knobs}, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert resp.json()["code"] == "schema"
    assert "knobs of 'dp-ucbvi'" in resp.json()["detail"] and fragment in resp.json()["detail"]
    assert client.get("/v1/runs").json()["runs"] == []


def test_create_refuses_an_algorithm_or_mode_the_registry_lacks(client: TestClient) -> None:
    """The registry's check, made where the server makes runs: a 422 that names the problem."""
    for changes, says in [({"algo": "nope"}, "unknown algorithm 'nope'; registered: "),
                          ({"algo": "lsvi-ucb-batched", "privacy": "ldp"},
                           "does not support privacy='ldp'")]:
        resp = client.post("/v1/runs", json={**spec(), **changes}, headers=AUTH)
        assert resp.status_code == 422, resp.text
        assert resp.json()["code"] == "schema" and says in resp.json()["detail"]
    assert client.get("/v1/runs").json()["runs"] == []


def test_openapi_states_each_algorithms_modes_and_knobs(client: TestClient) -> None:
    """The create body's schema names the registered algorithms, their modes and their knobs."""
    body = client.get("/openapi.json").json()["paths"]["/v1/runs"]["post"]["requestBody"]
    rules = body["content"]["application/json"]["schema"]["allOf"][2]
    assert "dp-ucbvi" in rules["properties"]["algo"]["enum"]
    ucbvi = next(r for r in rules["allOf"] if "anyOf" in r["if"])  # the default algorithm
    assert ucbvi["then"]["properties"]["privacy"]["enum"] == ["none", "jdp", "ldp", "secagg"]
    knobs = ucbvi["then"]["properties"]["knobs"]["anyOf"][0]
    assert knobs["additionalProperties"] is False and "pair_counts" in knobs["properties"]


def test_create_takes_what_json_schema_calls_an_integer(client: TestClient) -> None:
    """JSON has one number type: 10.0 is the integer 10 (and ints are fine in float fields)."""
    body = {**spec(), "episodes": 10.0, "n_states": 4.0, "epsilon": 2, "beta": 0.25}
    resp = client.post("/v1/runs", json=body, headers=AUTH)
    assert resp.status_code == 201, resp.text
    config = resp.json()["config"]
    assert config["episodes"] == 10 and isinstance(config["episodes"], int)
    assert config["epsilon"] == 2.0
    resp = client.post("/v1/runs", json={**spec(), "episodes": 10.5}, headers=AUTH)
    assert resp.status_code == 422 and "body.episodes" in resp.json()["detail"]


def test_the_run_spec_schema_and_the_model_agree() -> None:
    """The JSON schema states every rule RunConfig enforces (types, ranges, delta rules)."""
    validator = Draft202012Validator(RunConfig.model_json_schema())
    base = {"n_states": 4, "n_actions": 2, "horizon": 5, "episodes": 10}
    absent = object()
    grid = itertools.product(
        (absent, "none", "jdp", "ldp"),
        (absent, "laplace", "gaussian"),
        (absent, 1, 2.5, "Infinity", 1e-7, "1.0"),
        (absent, 0, 0.0, 1e-5, 1, "0"),
        ({}, {"n_states": 4.0}, {"n_states": "4"}, {"pooled": 0}, {"beta": 1e-13}),
    )
    for privacy, mechanism, epsilon, delta, extra in grid:
        picked = {"privacy": privacy, "mechanism": mechanism, "epsilon": epsilon, "delta": delta}
        body = {**base, **{k: v for k, v in picked.items() if v is not absent}, **extra}
        try:
            RunConfig.model_validate_json(json.dumps(body))
            accepted = True
        except ValidationError:
            accepted = False
        assert validator.is_valid(body) == accepted, body


def test_the_client_librarys_infinite_epsilon_is_accepted(client: TestClient) -> None:
    """model_dump(mode="json") (what client.api sends, via httpx) carries inf as "Infinity"."""
    config = RunConfig(n_states=4, n_actions=2, horizon=5, episodes=4, epsilon=float("inf"))
    body = config.model_dump(mode="json")
    assert body["epsilon"] == "Infinity"
    resp = client.post("/v1/runs", json=body, headers=AUTH)
    assert resp.status_code == 201, resp.text
    assert RunInfo.model_validate_json(resp.content).config == effective(config)


# -- the claim / report cycle -----------------------------------------------------------------


@pytest.mark.parametrize("privacy", ["none", "jdp", "ldp"])
def test_full_cycle(client: TestClient, privacy: str) -> None:
    config = spec(privacy, episodes=6)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    assert ticket["episode"] == 0 and ticket["policy"]["version"] == 1
    assert ticket["expires_in"] == 30.0
    if privacy == "ldp":
        cal = bind(public(config)).calibration()
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
    assert sum(s.reported for s in log.served.values()) == 6 and log.next_after is None
    assert sum(s.claimed for s in log.served.values()) == 6
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


@pytest.mark.parametrize("inline_entries", [16_384, 0], ids=["on-the-loop", "in-a-thread"])
def test_http_run_reproduces_the_in_process_run(apps: ClientFactory, inline_entries: int) -> None:
    """Sequential HTTP episodes = the in-process sequence (same seeds, same numbers), whether
    claims and reports run on the event loop (small runs) or in a worker thread (large ones)."""
    client = apps(inline_entries=inline_entries)
    for privacy in ("jdp", "ldp"):
        config = spec(privacy, episodes=12, seed=5)
        cfg = public(config)
        mdp = world(config)
        run = Run(cfg, [5])
        expected = []
        for k in range(cfg.episodes):
            message = run.message()
            expected.append(message["actions"][0].tolist())
            traj, noisy = user_episode(mdp, message, [5], k, run.algorithm, run.calibration,
                                       nonces=[k])
            if noisy is None:
                run.ingest_trajectories(traj, message)
            else:
                run.ingest_noisy(noisy)
        run_id = create(client, config)
        assert client.app.state.run_table.runs[run_id].inline == (inline_entries > 0)
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
         "states[0] is outside [0, S) = [0, 4)"),
        ("action too big", {**good, "actions": [2] + good["actions"][1:]}, 422,
         "actions[0] is outside [0, A) = [0, 2)"),
        ("off-policy action", {**good, "actions": [1 - policy_action] + good["actions"][1:]},
         422, "not the action that policy version"),
        ("reward above 1", {**good, "rewards": [1.5] + good["rewards"][1:]}, 422,
         "rewards[0] is not a number in [0, 1]"),
        ("negative reward", {**good, "rewards": [-0.25] + good["rewards"][1:]}, 422,
         "rewards[0] is not a number in [0, 1]"),
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
    marked = {**good, "arrays": {**arrays, "r": ["NAN-HERE", *arrays["r"][1:]]}}
    nan_body = json.dumps(marked).replace('"NAN-HERE"', "NaN")  # exactly r[0], nothing else
    resp = client.post(url, content=nan_body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 422 and "finite number" in resp.json()["detail"]
    assert state(client, run_id) == before
    assert client.post(url, json=good).status_code == 200


def test_report_values_of_the_wrong_json_type_are_refused(client: TestClient) -> None:
    """Strict input: a state "0", an action true, a reward "0.5" are 422s, never conversions."""
    config = spec("jdp", episodes=3)
    run_id = create(client, config)
    good = user_report(claim(client, run_id), config, world(config))
    before = state(client, run_id)
    url = f"/v1/runs/{run_id}/reports"
    for name, value, got in (
        ("states", str(good["states"][0]), "a string"),
        ("states", False, "a boolean"),
        ("actions", True, "a boolean"),
        ("rewards", "0.5", "a string"),
        ("rewards", True, "a boolean"),
    ):
        body = {**good, name: [value] + good[name][1:]}
        resp = client.post(url, json=body)
        assert resp.status_code == 422, (name, value, resp.text)
        assert resp.json()["code"] == "schema"
        detail = resp.json()["detail"]
        assert f"body.trajectory.{name}[0]" in detail and f"got {got}" in detail, detail
    assert state(client, run_id) == before
    as_floats = {**good, "states": [float(x) for x in good["states"]]}  # 2.0 is the integer 2
    assert client.post(url, json=as_floats).status_code == 200


def test_a_report_without_kind_is_refused_with_a_clear_message(client: TestClient) -> None:
    config = spec("jdp", episodes=3)
    run_id = create(client, config)
    good = user_report(claim(client, run_id), config, world(config))
    before = state(client, run_id)
    body = {k: v for k, v in good.items() if k != "kind"}
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 422
    assert resp.json() == {
        "detail": "invalid request: body.kind: field required: the report kind the run's trust"
        " boundary takes, one of 'trajectory' (raw trajectories (states, actions, rewards)),"
        " 'noisy' (locally randomized arrays), 'returns' (first-visit returns"
        " [[state, return], ...])",
        "code": "schema",
    }
    assert state(client, run_id) == before


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
    log = PolicyLog.model_validate(client2.get(f"/v1/runs/{run_id}/policies").json())
    counts = [(s.claimed, s.reported, s.expired) for s in log.served.values()]
    assert tuple(map(sum, zip(*counts, strict=True))) == (5, 3, 2)


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
    with from_address(client, "10.0.0.2"):  # another user
        ticket = claim(client, run_id, wait=5)
    assert 0.2 < time.monotonic() - started < 3.0
    assert ticket["episode"] == 1
    resp = client.post(f"/v1/runs/{run_id}/claims")  # the first one let its claim lapse
    assert resp.status_code == 429 and resp.json()["code"] == "source"
    resp = client.post(f"/v1/runs/{run_id}/claims", params={"wait": -1})
    assert resp.status_code == 422


def test_unknown_query_parameters_are_refused(client: TestClient) -> None:
    """Like unknown body fields: a typo (?wiat=) is a 422 on the v1 API, never ignored."""
    run_id = create(client, spec("jdp"))
    for method, url in (
        ("POST", f"/v1/runs/{run_id}/claims?wiat=5"),
        ("GET", f"/v1/runs/{run_id}/billboard?version=2"),
        ("GET", "/v1/runs?limit=3"),
    ):
        resp = client.request(method, url)
        assert resp.status_code == 422, (url, resp.text)
        name = url.rsplit("?", 1)[1].split("=")[0]
        assert resp.json() == {
            "detail": f"invalid request: query.{name}: Extra inputs are not permitted (this route"
            " takes no such query parameter)",
            "code": "schema",
        }
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["claimed"] == 0
    assert client.post(f"/v1/runs/{run_id}/claims?wait=0").status_code == 200
    assert client.get("/healthz?probe=1").status_code == 200  # probes and scrapers: lenient


def test_a_claim_wait_above_the_servers_bound_is_capped_not_refused(
    apps: ClientFactory,
) -> None:
    client = apps(max_claim_wait=0.2)
    run_id = create(client, spec("jdp"), "?sequential=true")
    claim(client, run_id)
    started = time.monotonic()
    resp = client.post(f"/v1/runs/{run_id}/claims", params={"wait": 30})
    assert resp.status_code == 409 and resp.json()["code"] == "busy"
    assert 0.15 < time.monotonic() - started < 10.0  # capped at 0.2 s, far from 30 (a busy CI)
    resp = client.post(f"/v1/runs/{run_id}/claims", params={"wait": 601})  # the schema's maximum
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
    assert resp.status_code == 413 and resp.headers["connection"] == "close"
    cap = max_report_bytes(public(config))  # a report's own cap: far below the server's
    assert f"at most {cap} bytes for a report of run {run_id}" in resp.json()["detail"]
    assert state(client, run_id) == before
    assert 'privrl_reports_refused_total{reason="too_large"} 1.0' in client.get("/metrics").text
    resp = client.post("/v1/runs", json={**config, "pad": "x" * 70_000}, headers=AUTH)
    assert resp.status_code == 413
    assert "at most 65536 bytes for any request (PRIVRL_MAX_BODY_BYTES)" in resp.json()["detail"]


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


def test_openapi_states_the_configured_limits(apps: ClientFactory) -> None:
    """Max cells and max claim wait appear with this server's values, where they are enforced."""
    client = apps(max_cells=12_345, max_claim_wait=7.5)
    doc = client.get("/openapi.json").json()
    assert "12345 entries" in doc["info"]["description"]
    assert "at most 7.5 s" in doc["info"]["description"]
    create_op = doc["paths"]["/v1/runs"]["post"]
    assert create_op["x-privrl-max-cells"] == 12_345
    assert "12345" in create_op["description"]
    refused = create_op["responses"]["422"]["description"]
    assert '"too_large"' in refused and "H*S*A*S <= 12345" in refused
    body = create_op["requestBody"]["content"]["application/json"]["schema"]
    assert body["allOf"][0] == {"$ref": "#/components/schemas/RunRequest"}
    maxima = body["allOf"][1]["properties"]
    assert maxima == {"n_states": {"maximum": 111}, "n_actions": {"maximum": 50}}  # isqrt(12345)
    # ... and the server really refuses beyond them (S = 112 needs 112^2 > 12345 cells).
    assert create(client, spec(n_states=111, n_actions=1, horizon=1))
    resp = client.post("/v1/runs", json=spec(n_states=112, n_actions=1, horizon=1), headers=AUTH)
    assert resp.status_code == 422 and resp.json()["code"] == "too_large"
    params = doc["paths"]["/v1/runs/{run_id}/claims"]["post"]["parameters"]
    wait = next(p for p in params if p["name"] == "wait")
    assert wait["x-privrl-max-claim-wait"] == 7.5
    assert "(this server: 7.5 s)" in wait["description"] and wait["schema"]["maximum"] == 600


def test_openapi_schemas_use_only_json_schema_keywords(client: TestClient) -> None:
    """No pydantic-only constraint names ("ge", "lt", ...) leak in, where validators ignore them."""
    doc = client.get("/openapi.json").json()

    def leaks(node: Any) -> list[str]:
        if isinstance(node, list):
            return [leak for item in node for leak in leaks(item)]
        if not isinstance(node, dict):
            return []
        own = sorted({"ge", "gt", "le", "lt"} & set(node)) if "type" in node else []
        return own + [leak for value in node.values() for leak in leaks(value)]

    assert leaks(doc) == []
    report = doc["components"]["schemas"]["TrajectoryReport"]
    assert "kind" in report["required"]
    array, packed = report["properties"]["states"]["anyOf"]  # JSON array or base64 int32s
    assert array["items"] == {"type": "integer", "minimum": 0} and "pattern" in packed


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
    config = spec("jdp", episodes=3, noise="float")  # float: any reward in [0, 1] is taken
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
    ldp = spec("ldp", episodes=3, noise="float")  # float: an off-grid value is taken
    ldp_id = create(client, ldp)
    ldp_ticket = claim(client, ldp_id)
    noisy = user_report(ldp_ticket, ldp, world(ldp))
    noisy["arrays"]["r"][0] = 0.9137712
    assert client.post(f"/v1/runs/{ldp_id}/reports", json=noisy).status_code == 200
    text = caplog.text
    assert "accepted" in text and run_id in text
    for secret in ("0.7316421", "1.7316421", "0.9137712", str(states), ticket["ticket"]):
        assert secret not in text
