"""The server as a real process (`python -m privrl.server`): flags, SIGKILL, limits, fuzz."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from support.server import (
    ADMIN,
    AUTH,
    REPO,
    LiveServer,
    create,
    snapshot,
    spec,
    user_report,
    world,
)

pytestmark = pytest.mark.slow  # every test here starts real server processes


def cycle(http: httpx.Client, run_id: str, config: dict[str, Any], mdp: Any) -> dict[str, Any]:
    """One honest user's claim + report; returns the report body and its Ack."""
    resp = http.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 200, resp.text
    body = user_report(resp.json(), config, mdp)
    resp = http.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 200, resp.text
    return {"body": body, "ack": resp.json()}


def test_command_line_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "privrl.server", "--help"], cwd=REPO, capture_output=True, text=True,
        timeout=60,
    )
    assert out.returncode == 0
    for flag in ("--host", "--port", "--db", "--claim-timeout", "--sequential"):
        assert flag in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "privrl.server", "--claim-timeout", "-3"], cwd=REPO,
        capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2 and "--claim-timeout" in bad.stderr


def test_sigkill_mid_run_loses_nothing_and_the_run_completes(tmp_path: Path) -> None:
    db, log = tmp_path / "privrl.db", tmp_path / "server.log"
    config = spec("jdp", episodes=40, n_states=5, horizon=6, seed=21)
    mdp = world(config)
    server = LiveServer(db, log).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            run_id = create(http, config)
            done = [cycle(http, run_id, config, mdp) for _ in range(15)]
            assert [d["ack"]["reported"] for d in done] == list(range(1, 16))
            before = snapshot(http.get, run_id)
        server.kill()
        assert server.proc is not None and server.proc.returncode == -9

        server = LiveServer(db, log).start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            after = snapshot(http.get, run_id)
            assert after == before  # same released values, ledger, policy log and versions
            assert after["status"]["reported"] == 15
            assert after["billboard"]["reported"] == 15
            for d in done:  # every acknowledged report is counted once, and known as such
                resp = http.post(f"/v1/runs/{run_id}/reports", json=d["body"])
                assert resp.json() == {**d["ack"], "duplicate": True}
            rest = [cycle(http, run_id, config, mdp) for _ in range(25)]
            assert rest[-1]["ack"]["reported"] == 40
            final = snapshot(http.get, run_id)
            assert final["status"]["finished"] is True
            assert final["ledger"]["epsilon"] == pytest.approx(1.0)
            served = final["policies"]["served"].values()
            assert sum(s["reported"] for s in served) == sum(s["claimed"] for s in served) == 40
            resp = http.post(f"/v1/runs/{run_id}/claims")
            assert resp.status_code == 410
    finally:
        server.stop()
    text = server.log()
    assert "rebuilt: 15 reports replayed" in text
    for d in done:
        assert d["body"]["ticket"] not in text


def test_limits_and_malformed_requests_over_real_http(tmp_path: Path) -> None:
    env = {"PRIVRL_MAX_BODY_BYTES": "65536"}
    server = LiveServer(tmp_path / "db.sqlite", tmp_path / "log", env=env)
    with server, httpx.Client(base_url=server.url, timeout=10) as http:
        config = spec("jdp")
        run_id = http.post("/v1/runs", json=config, headers=AUTH).json()["id"]
        ticket = http.post(f"/v1/runs/{run_id}/claims").json()
        body = user_report(ticket, config, world(config))
        before = snapshot(http.get, run_id)
        url = f"/v1/runs/{run_id}/reports"

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
            yield b'{"kind": "trajectory", "pad": "'
            for _ in range(100):
                yield b"x" * 1024
            yield b'"}'

        resp = http.post(url, content=chunks(), headers={"Content-Type": "application/json"})
        assert resp.status_code == 413 and "too large" in resp.json()["detail"]
        resp = http.post(url, content=b"{" + b" " * 70_000 + b"}",
                         headers={"Content-Type": "application/json"})
        assert resp.status_code == 413
        json_type = {"Content-Type": "application/json"}
        resp = http.post(url, content=b'{"kind": "traj', headers=json_type)
        assert resp.status_code == 400 and "malformed JSON" in resp.json()["detail"]
        assert snapshot(http.get, run_id) == before
        assert http.post(url, json=body).status_code == 200
        resp = http.get("/v1/nowhere")
        assert resp.status_code == 404 and resp.json() == {"detail": "Not Found"}
        resp = http.put(f"/v1/runs/{run_id}")
        assert resp.status_code == 405 and "detail" in resp.json()
        assert {"GET", "DELETE"} <= set(resp.headers["Allow"].split(", "))


def test_a_waiting_claim_is_woken_by_the_report(tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "db.sqlite", tmp_path / "log", "--sequential")
    with server, httpx.Client(base_url=server.url, timeout=30) as http:
        config = spec("ldp")
        created = http.post("/v1/runs", json=config, headers=AUTH).json()
        assert created["sequential"] is True
        run_id = created["id"]
        first = http.post(f"/v1/runs/{run_id}/claims").json()
        result: dict[str, Any] = {}

        def waiter() -> None:
            started = time.monotonic()
            with httpx.Client(base_url=server.url, timeout=30) as other:
                result["resp"] = other.post(f"/v1/runs/{run_id}/claims", params={"wait": 20})
            result["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.4)
        assert "resp" not in result  # still waiting: episode 0 is outstanding
        body = user_report(first, config, world(config))
        assert http.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
        thread.join(timeout=10)
        assert result["resp"].status_code == 200
        assert result["resp"].json()["episode"] == 1
        assert 0.3 < result["seconds"] < 5


def test_admin_routes_without_a_configured_token(tmp_path: Path) -> None:
    env = {"PRIVRL_ADMIN_TOKEN": ""}
    with LiveServer(tmp_path / "db.sqlite", tmp_path / "log", env=env) as server:
        resp = httpx.post(f"{server.url}/v1/runs", json=spec(), headers=AUTH)
        assert resp.status_code == 503 and "PRIVRL_ADMIN_TOKEN" in resp.json()["detail"]
        assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}


# -- schemathesis: no request the OpenAPI allows (or nearly allows) yields a 5xx ----------------


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server for fuzzing, holding three real runs (none, JDP, LDP) with many free slots."""
    base = tmp_path_factory.mktemp("fuzz")
    env = {"PRIVRL_MAX_CELLS": "20000", "PRIVRL_CLAIM_TIMEOUT": "5"}
    with LiveServer(base / "db.sqlite", base / "log", env=env) as server:
        server.run_ids = [
            httpx.post(f"{server.url}/v1/runs", json=spec(p, episodes=100_000), headers=AUTH)
            .json()["id"]
            for p in ("none", "jdp", "ldp")
        ]
        yield server
    assert "Traceback" not in server.log(), server.log()[-3000:]


# Every schemathesis check runs. One needs telling about the API: `positive_data_acceptance`
# expects every request the schema allows to be accepted (2xx) or refused for state (401, 403,
# 404, 409, 429). Two operations refuse schema-valid requests, with 422 and a `code` naming the
# rule, by rules no static JSON Schema can state: creating a run whose H*S*A*S exceeds the
# server's cell limit (a product of fields: `too_large`) or that breaks its algorithm's own rules
# across fields (e.g. feature groups larger than S, a weight per state: `invalid_run`), a report
# that does not fit the run it is sent to (that run's H, S, A, served policy and privacy mode:
# `invalid`, `wrong_kind`), and the regret view of a public world whose (S, A) is not the run's
# (`world`: it depends on the run the id names, as a report's fit does). What a schema can state
# (the algorithm's privacy modes and knobs) is in the served schema and refused as `schema`.
# For those operations 422 is one more expected status of positive data, and the extra check
# `refused_only_by_rules_beyond_the_schema` keeps the rest of the check's power: on any operation,
# a schema-valid request gets a 400/422 only with one of those codes, never `schema` (refused by
# request validation).
RULES_BEYOND_THE_SCHEMA = {"too_large", "invalid_run", "invalid", "wrong_kind", "world"}
POSITIVE_STATUSES = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
BEYOND_THE_SCHEMA = [("/v1/runs", "POST"), ("/v1/runs/{run_id}/reports", "POST"),
                     ("/v1/runs/{run_id}/regret", "GET")]
FUZZ_CONFIG = {
    # The admin token through the schema's own security scheme, so that schemathesis knows which
    # cases leave it out on purpose (a header added to every call would hide that).
    "auth": {"openapi": {"AdminToken": {"bearer": ADMIN}}},
    "operations": [
        {
            "include-path": path,
            "include-method": method,
            "checks": {
                "positive_data_acceptance": {"expected-statuses": [*POSITIVE_STATUSES, "422"]}
            },
        }
        for path, method in BEYOND_THE_SCHEMA
    ]
}


def refused_only_by_rules_beyond_the_schema(ctx: Any, response: Any, case: Any) -> None:
    """A schema-valid (positive) request gets 400/422 only for a rule the schema cannot state."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    if response.status_code in (400, 422):
        code = response.json().get("code")
        assert code in RULES_BEYOND_THE_SCHEMA, (
            f"a schema-valid request was refused ({response.status_code}): {response.text[:500]}"
        )


@pytest.fixture(scope="module")
def api_schema(live_server: LiveServer) -> Any:
    """The live server's OpenAPI document."""
    config = SchemathesisConfig.from_dict(FUZZ_CONFIG)
    return schemathesis.openapi.from_url(f"{live_server.url}/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("api_schema")
FUZZ_COUNTER = iter(range(10**9))


def aim_at_real_runs(case: Any, server: LiveServer) -> None:
    """Point two cases in three at a real run, and give generated reports a real fresh ticket.

    Random ids and tickets only ever reach the 404 branches; this sends generated bodies through
    the ticket, kind, shape and range checks of real runs too.
    """
    n = next(FUZZ_COUNTER)
    params = case.path_parameters or {}
    if "run_id" not in params or case.method == "DELETE" or n % 3 == 0:
        return
    run_id = server.run_ids[n % len(server.run_ids)]
    params["run_id"] = run_id
    if case.path.endswith("/reports") and isinstance(case.body, dict) and "ticket" in case.body:
        resp = httpx.post(f"{server.url}/v1/runs/{run_id}/claims", timeout=30)
        if resp.status_code == 200:
            case.body["ticket"] = resp.json()["ticket"]


@schema.parametrize()
@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_openapi_fuzz_finds_no_server_error(case: Any, live_server: LiveServer) -> None:
    """Every schemathesis check passes: no 5xx; every answer documented (status, content type,
    body schema, headers); schema-valid requests accepted, schema-violating ones refused; etc."""
    aim_at_real_runs(case, live_server)
    case.call_and_validate(timeout=30, additional_checks=[refused_only_by_rules_beyond_the_schema])


def test_concurrent_users_with_abandoned_claims_and_retries(tmp_path: Path) -> None:
    """32 users at once behind one address; some abandon their claim (the address then backs
    off: 429 `source`), every report is sent twice. K = reported."""
    import asyncio

    config = spec("jdp", episodes=120, n_states=5, horizon=6, seed=4)
    mdp = world(config)
    server = LiveServer(tmp_path / "db.sqlite", tmp_path / "log", "--claim-timeout", "0.5")
    with server:
        run_id = httpx.post(f"{server.url}/v1/runs", json=config, headers=AUTH).json()["id"]

        async def user(http: httpx.AsyncClient, index: int) -> list[int]:
            statuses, walked_away = [], index % 8 != 0
            while True:
                resp = await http.post(f"/v1/runs/{run_id}/claims", params={"wait": 5})
                statuses.append(resp.status_code)
                if resp.status_code == 410:
                    return statuses
                if resp.status_code == 429:  # the address let a claim lapse: it backs off
                    assert resp.json()["code"] == "source", resp.text
                    await asyncio.sleep(float(resp.headers["Retry-After"]))
                    continue
                assert resp.status_code == 200, resp.text
                ticket = resp.json()
                if not walked_away:  # four users walk away once: their claims expire
                    walked_away = True
                    continue
                body = user_report(ticket, config, mdp, client_seed=index)
                for _ in range(2):  # the second post is a retry after a lost Ack
                    resp = await http.post(f"/v1/runs/{run_id}/reports", json=body)
                    statuses.append(resp.status_code)
                    if resp.status_code == 410:  # this claim expired (or the run finished)
                        assert resp.json()["code"] in ("expired", "finished")
                        break
                    assert resp.status_code == 200, resp.text

        async def swarm() -> list[list[int]]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                return await asyncio.gather(*(user(http, i) for i in range(32)))

        statuses = [s for per_user in asyncio.run(swarm()) for s in per_user]
        assert max(statuses) < 500
        with httpx.Client(base_url=server.url, timeout=10) as http:
            # a claim handed out just before the last report lapses 0.5 s later: compare the
            # settled run (a restarted server finds it lapsed)
            deadline = time.monotonic() + 10
            while (http.get(f"/v1/runs/{run_id}").json()["status"]["outstanding"]
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            before = snapshot(http.get, run_id)
            status = before["status"]
            assert status["finished"] and status["reported"] == 120 and not status["outstanding"]
            log = before["policies"]
            served = log["served"].values()
            assert sum(s["reported"] for s in served) == 120
            assert sum(s["expired"] for s in served) >= 4
            assert status["claimed"] == sum(s["claimed"] for s in served) >= 120
            metrics = http.get("/metrics").text
            assert f'privrl_reports_accepted_total{{run="{run_id}"}} 120.0' in metrics
    with LiveServer(tmp_path / "db.sqlite", tmp_path / "log2") as server, httpx.Client(
        base_url=server.url, timeout=10
    ) as http:
        assert snapshot(http.get, run_id) == before  # concurrent planning points replay too


def test_idle_connection_outlives_the_clients_keepalive(tmp_path: Path) -> None:
    """An idle keep-alive connection stays open past uvicorn's 5 s default, and clients drop
    theirs before the server would: no client sends just as the server closes (a ReadError)."""
    import http.client

    from privrl.protocol import CLIENT_KEEPALIVE_SECONDS, SERVER_KEEPALIVE_SECONDS

    assert CLIENT_KEEPALIVE_SECONDS + 5 <= SERVER_KEEPALIVE_SECONDS
    with LiveServer(tmp_path / "db.sqlite", tmp_path / "log") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        sockets = []
        for pause in (0.0, 6.5):
            time.sleep(pause)
            conn.request("GET", "/healthz")  # a closed connection fails here or on the answer
            resp = conn.getresponse()
            assert resp.status == 200 and not resp.will_close, (pause, resp.status)
            resp.read()
            sockets.append(conn.sock)
        conn.close()
        assert sockets[0] is sockets[1]  # the same connection both times


@pytest.mark.slow
def test_a_client_gone_mid_body_is_a_refused_report_without_a_traceback(tmp_path: Path) -> None:
    """Headers announcing 1,000 bytes, 60 sent, then the socket closes: the server drops the
    request without handing it to the report route (nothing counted, its buffer released:
    `privrl.server.limits`), logs no traceback and serves on."""
    import socket

    server = LiveServer(tmp_path / "db.sqlite", tmp_path / "log")
    with server, httpx.Client(base_url=server.url, timeout=10) as http:
        run_id = http.post("/v1/runs", json=spec("jdp"), headers=AUTH).json()["id"]
        http.post(f"/v1/runs/{run_id}/claims").raise_for_status()
        head = (f"POST /v1/runs/{run_id}/reports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(head + b'{"kind": "trajectory", "ticket": "' + b"x" * 25 + b'"')
        time.sleep(0.5)  # the server sees the disconnect
        assert 'privrl_reports_refused_total{reason=' not in http.get("/metrics").text
        status = http.get(f"/v1/runs/{run_id}").json()["status"]
        assert status["reported"] == 0 and status["outstanding"] == 1
        http.post(f"/v1/runs/{run_id}/claims").raise_for_status()  # it serves on
    assert "Traceback" not in server.log(), server.log()


@pytest.mark.slow
def test_a_hoarding_address_is_capped_while_another_still_claims(tmp_path: Path) -> None:
    """Over real sockets: a client at 127.0.0.2 holding claims it never reports gets 429
    (`code` "source", with Retry-After) beyond its address's cap; 127.0.0.1 still claims."""
    env = {"PRIVRL_MAX_CLAIMS_PER_ADDRESS": "3"}
    server = LiveServer(tmp_path / "db.sqlite", tmp_path / "log", env=env)
    hoarder = httpx.HTTPTransport(local_address="127.0.0.2")
    with server, httpx.Client(base_url=server.url, timeout=10) as http, httpx.Client(
            base_url=server.url, timeout=10, transport=hoarder) as other:
        config = spec("jdp", episodes=20)
        run_id = http.post("/v1/runs", json=config, headers=AUTH).json()["id"]
        url = f"/v1/runs/{run_id}/claims"
        assert [other.post(url).status_code for _ in range(3)] == [200] * 3
        refused = other.post(url)
        assert refused.status_code == 429 and refused.json()["code"] == "source"
        assert 1 <= int(refused.headers["Retry-After"]) <= 30
        cycle(http, run_id, config, world(config))  # another address plays on
        assert http.get(f"/v1/runs/{run_id}").json()["status"]["outstanding"] == 3
