"""UCRL-VTR over HTTP: same numbers as in-process (JDP, LDP, none) with a real server and a real
`privrl users` process; bad input refused and changing nothing; SIGKILL and restart; the LDP
trust boundary (nothing raw leaves a user)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.evaluator import evaluate
from privrl.client.users import run_users
from privrl.config import RunConfig
from privrl.protocol import PolicyLog, RunRequest
from privrl.run import run_in_process
from privrl.wire import pack_floats, unpack_floats
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.client import create_run, reference_run, run_cli, start_server
from support.server import (
    AUTH,
    assert_refused_unchanged,
    claim,
    create,
    sigkill_round_trip,
    state,
    user_report,
)

SEED = 7
K = 40
HARD = make("lm-hard")


def linear_config(privacy: str, episodes: int = K, **kw: Any) -> RunConfig:
    """A small UCRL-VTR run on LM-Hard (practical preset, Gaussian)."""
    base = dict(algo="ucrl-vtr", n_states=HARD.S, n_actions=HARD.A, horizon=HARD.H,
                model=model_spec_of(HARD), episodes=episodes, privacy=privacy, epsilon=50.0,
                delta=1e-5 if privacy != "none" else 0.0, mechanism="gaussian")
    return RunConfig(**{**base, **kw})


def request_body(config: RunConfig, seed: int = 3) -> dict[str, Any]:
    """The POST /v1/runs body of a config with the server's seed."""
    return RunRequest(**config.model_dump(), seed=seed).model_dump(mode="json", exclude_none=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("linear-http"), sequential=True)
    yield proc
    proc.stop()


@pytest.mark.slow
@pytest.mark.parametrize("privacy", ["jdp", "ldp", "none"])
def test_sequential_http_run_matches_in_process(server, privacy: str) -> None:
    config = linear_config(privacy)
    run_id = create_run(server, config, seed=SEED)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--users", str(K),
                   "--concurrency", "1", "--seed", str(SEED), "--env", "lm-hard", "--quiet")
    assert done.returncode == 0, done.stderr
    assert f"{K} episodes reported" in done.stdout

    ref = reference_run(config, SEED, SEED, HARD)
    ref_run, messages = ref.run, ref.messages
    in_process = run_in_process(config, HARD, [SEED])
    ev = evaluate(server.url, run_id, HARD)
    with ServerAPI(server.url) as api:
        board, ledger, log = api.billboard(run_id), api.ledger(run_id), api.policies(run_id)
    for k in range(K):  # the public log serves exactly the in-process messages
        version = log.version_of(k)
        np.testing.assert_array_equal(np.asarray(log.versions[version]), messages[k]["actions"])
        np.testing.assert_array_equal(log.arrays[version]["values"].to_array(),
                                      messages[k]["values"])
    np.testing.assert_allclose(ev.regret, in_process.regret[0], rtol=0, atol=1e-12)
    expected = ref_run.billboard()
    assert board.shapes == {"gram": [HARD.H, 4, 4], "target": [HARD.H, 4]}
    for name, arr in expected.items():
        np.testing.assert_array_equal(np.asarray(board.arrays[name]), arr[0].ravel())
    assert board.radius == ref_run.radius()
    if privacy != "none":
        spent = in_process.ledger.totals(config.delta).epsilon
        assert ledger.epsilon == pytest.approx(spent, rel=1e-12)
        assert spent == pytest.approx(config.epsilon, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "privacy"), [("linopt-po", "jdp"), ("linopt-vi", "ldp")])
def test_linopt_over_http_matches_in_process(server, algo: str, privacy: str) -> None:
    """LinOpt too; PO's policy is stochastic: users sample from the served probabilities."""
    e2 = make("zhou-mix")
    config = RunConfig(algo=algo, n_states=e2.S, n_actions=e2.A, horizon=e2.H,
                       model=model_spec_of(e2), episodes=30, privacy=privacy, epsilon=100.0,
                       delta=1e-5, mechanism="gaussian")
    run_id = create_run(server, config, seed=SEED)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--concurrency", "1",
                   "--seed", str(SEED), "--env", "zhou-mix", "--quiet")
    assert done.returncode == 0, done.stderr
    messages = reference_run(config, SEED, SEED, e2).messages
    in_process = run_in_process(config, e2, [SEED])
    ev = evaluate(server.url, run_id, e2)
    with ServerAPI(server.url) as api:
        log = api.policies(run_id)
    for k in range(30):
        for name, arr in log.arrays[log.version_of(k)].items():
            np.testing.assert_array_equal(arr.to_array(), messages[k][name])
    np.testing.assert_allclose(ev.regret, in_process.regret[0], rtol=0, atol=1e-12)
    if algo == "linopt-po":
        assert "probs" in log.arrays[log.version_of(29)]


def _ldp_run(apps) -> tuple[Any, str, RunConfig, dict[str, Any]]:
    client = apps()
    config = linear_config("ldp", episodes=6)
    run_id = create(client, request_body(config))
    ticket = claim(client, run_id)
    return client, run_id, config, ticket


def test_bad_ldp_reports_are_refused_and_change_nothing(apps) -> None:
    client, run_id, config, ticket = _ldp_run(apps)
    body = request_body(config)
    good = user_report(ticket, body, HARD)
    arrays = good["arrays"]
    assert set(arrays) == {"gram", "target"}
    assert ticket["randomizer"]["symmetric"] == ["gram"]
    assert set(ticket["policy"]["arrays"]) == {"values"}
    gram = np.asarray(arrays["gram"]).reshape(HARD.H, 4, 4)
    asym = gram.copy()
    asym[1, 0, 2] += 1.0
    cases = [
        ("short gram", {**good, "arrays": {**arrays, "gram": arrays["gram"][:-1]}},
         "must have 80 entries"),
        ("target as a matrix", {**good, "arrays": {**arrays, "target": arrays["gram"]}},
         "must have 20 entries"),
        ("not symmetric", {**good, "arrays": {**arrays, "gram": asym.ravel().tolist()}},
         "must hold symmetric matrices"),
        ("absurd value", {**good, "arrays": {**arrays, "target": [1e12] + arrays["target"][1:]}},
         "is outside"),
        ("missing family", {**good, "arrays": {"gram": arrays["gram"]}}, "missing ['target']"),
        ("raw statistics", {**good, "arrays": {**arrays, "X": [0.0] * 4}}, "unexpected ['X']"),
        ("a trajectory", {"kind": "trajectory", "ticket": good["ticket"], "states": [0] * 6,
                          "actions": [0] * 5, "rewards": [0.0] * 5}, "accepts only kind='noisy'"),
    ]
    assert_refused_unchanged(client, run_id, cases)
    url = f"/v1/runs/{run_id}/reports"
    before = state(client, run_id)
    for token in ("NaN", "Infinity"):
        text = json.dumps(good).replace(json.dumps(arrays["gram"][0]), token, 1)
        resp = client.post(url, content=text, headers={"Content-Type": "application/json"})
        assert resp.status_code == 422 and "finite number" in resp.json()["detail"]
        assert state(client, run_id) == before
    assert client.post(url, json=good).status_code == 200


def test_bad_runs_and_jdp_reports_are_refused(apps) -> None:
    client = apps()
    config = linear_config("jdp", episodes=6)
    body = request_body(config)
    for bad, fragment in (
        ({k: v for k, v in body.items() if k != "model"}, "needs a public linear-mixture model"),
        ({**body, "model": {"name": "zhou-mix", "params": {"horizon": 5}}}, "(S, A, H)"),
        ({**body, "model": {"name": "zhou-mix", "params": {}}}, "missing 1 required"),
        ({**body, "model": {"name": "nope"}}, "unknown public model"),
    ):
        resp = client.post("/v1/runs", json=bad, headers=AUTH)
        assert resp.status_code == 422, resp.text
        assert fragment in resp.text
    run_id = create(client, body)
    ticket = claim(client, run_id)
    good = user_report(ticket, body, HARD)
    wrong = dict(good, actions=[(a + 1) % HARD.A for a in good["actions"]])
    before = state(client, run_id)
    resp = client.post(f"/v1/runs/{run_id}/reports", json=wrong)
    assert resp.status_code == 422 and "not the action" in resp.json()["detail"]
    assert state(client, run_id) == before
    assert client.post(f"/v1/runs/{run_id}/reports", json=good).status_code == 200


def test_restart_serves_and_replays_the_value_tables(apps) -> None:
    client = apps()
    config = linear_config("jdp", episodes=8)
    body = request_body(config)
    run_id = create(client, body)
    for _ in range(5):
        ticket = claim(client, run_id)
        resp = client.post(f"/v1/runs/{run_id}/reports", json=user_report(ticket, body, HARD))
        assert resp.status_code == 200
    pending = claim(client, run_id)  # outstanding across the restart
    before = state(client, run_id)
    client = apps.reopen(client)
    assert state(client, run_id) == before
    log = PolicyLog.model_validate(before["policies"])
    assert set(log.arrays) == set(log.versions)
    resp = client.post(f"/v1/runs/{run_id}/reports", json=user_report(pending, body, HARD))
    assert resp.status_code == 200


@pytest.mark.slow
def test_sigkill_mid_run_loses_nothing(tmp_path: Path) -> None:
    config = linear_config("ldp", episodes=20)
    trip = sigkill_round_trip(tmp_path, request_body(config, seed=21), HARD, 9, 11)
    assert trip.restarted == trip.before
    final = trip.final
    assert final["status"]["finished"] and final["status"]["reported"] == 20
    assert final["ledger"]["epsilon"] == pytest.approx(config.epsilon, rel=1e-6)
    assert "rebuilt: 9 reports replayed" in trip.log


@pytest.mark.slow
def test_ldp_nothing_raw_leaves_a_user(tmp_path: Path) -> None:
    server = start_server(tmp_path, sequential=True)
    config = linear_config("ldp", episodes=15)
    requests: list[bytes] = []

    async def keep(request: httpx.Request) -> None:
        requests.append(request.content)

    try:
        run_id = create_run(server, config, seed=SEED)
        result = asyncio.run(run_users(server.url, run_id, None, 1, SEED, HARD, progress=False,
                                       event_hooks={"request": [keep]}))
        assert result.reported == 15
    finally:
        server.stop()
    ref = reference_run(config, SEED, SEED, HARD)
    raws, noisies = ref.statistics, ref.noisy
    reports = [json.loads(b) for b in requests if b and b not in (b"{}",) and b"arrays" in b]
    assert len(reports) == 15
    sizes = {len(r) for r in (b for b in requests if b"arrays" in b)}
    assert len(sizes) == 1  # the body's size never depends on the trajectory
    for report, raw, noisy in zip(reports, raws, noisies, strict=True):
        assert set(report) == {"kind", "ticket", "arrays"}
        for name, values in report["arrays"].items():
            sent = unpack_floats(values)  # packed: base64 of float64, lossless
            np.testing.assert_array_equal(sent, noisy[name].ravel())
            assert np.all(sent != raw[name].ravel())  # noise on every entry, the zeros too
        gram = unpack_floats(report["arrays"]["gram"]).reshape(HARD.H, 4, 4)
        np.testing.assert_array_equal(gram, np.swapaxes(gram, -1, -2))
    texts = [json.dumps(a.ravel().tolist()) for raw in raws for a in raw.values()]
    texts += [pack_floats(a.ravel()) for raw in raws for a in raw.values()]
    blobs = [a.ravel().tobytes() for raw in raws for a in raw.values()]
    data = b"".join(requests) + (tmp_path / "server.log").read_bytes()
    for name in ("privrl.db", "privrl.db-wal"):
        if (tmp_path / name).exists():
            data += (tmp_path / name).read_bytes()
    text = data.decode("latin-1")
    for t in texts:
        assert t not in text
    for b in blobs:
        assert not b.strip(b"\x00") or b not in data
    assert not any(np.isnan(unpack_floats(a)).any() for r in reports for a in r["arrays"].values())
