"""One client cannot hoard a run: outstanding claims are capped per source (a user credential,
or the client's address), and claims a source lets lapse lower its own cap, not the run's, and
refuse it claims for a backoff that doubles with its lapses (so it cannot stall a sequential
run). Many addresses do not help a client that holds one credential; in a run without
credentials they do (such runs are for local simulation)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient
from privrl.protocol import CredentialList, RunInfo
from privrl.server.errors import Refusal
from privrl.server.ops.sources import BACKOFF_RATIO, MAX_DOUBLINGS, Sources
from support.server import AUTH, Apps, create, from_address, spec, user_report, world


def credentials(client: TestClient, run_id: str, count: int) -> list[str]:
    """`count` credentials of a run (admin)."""
    resp = client.post(f"/v1/runs/{run_id}/credentials", params={"count": count}, headers=AUTH)
    assert resp.status_code == 201, resp.text
    issued = CredentialList.model_validate(resp.json())
    assert issued.run_id == run_id and len(set(issued.credentials)) == count
    return issued.credentials


def claim_as(client: TestClient, run_id: str, token: str | None) -> object:
    """A claim with a user credential (or none)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return client.post(f"/v1/runs/{run_id}/claims", headers=headers)


def test_a_run_that_requires_credentials_refuses_claims_without_a_valid_one(apps: Apps) -> None:
    client = apps()
    config = spec("jdp", episodes=20)
    run_id = create(client, config, "?credentials=true")
    other = create(client, config, "?credentials=true")
    info = RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json())
    assert info.credentials is True
    [good] = credentials(client, run_id, 1)
    [foreign] = credentials(client, other, 1)
    resp = claim_as(client, run_id, None)
    assert resp.status_code == 401 and resp.json()["code"] == "no_credential"
    forged = good[: good.rindex(".") + 1] + ("A" if good[-1] != "A" else "B") * 43
    renamed = good.replace(run_id, other)  # the tag no longer matches
    for bad in (forged, renamed, "nonsense", foreign, AUTH["Authorization"].split()[1]):
        resp = claim_as(client, run_id, bad)
        assert resp.status_code == 403 and resp.json()["code"] == "bad_credential", bad
    assert "another run" in claim_as(client, run_id, foreign).json()["detail"]
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["claimed"] == 0
    resp = claim_as(client, run_id, good)
    assert resp.status_code == 200, resp.text
    body = user_report(resp.json(), config, world(config))  # reports need only the ticket
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    client = apps.reopen(client)  # credentials and the requirement survive a restart
    assert claim_as(client, run_id, None).status_code == 401
    assert claim_as(client, run_id, good).status_code == 200


def test_outstanding_claims_are_capped_per_credential(apps: Apps) -> None:
    client = apps(max_claims_per_credential=2)
    config = spec("jdp", episodes=50)
    run_id = create(client, config, "?credentials=true")
    alice, bob = credentials(client, run_id, 2)
    held = [claim_as(client, run_id, alice) for _ in range(2)]
    assert all(r.status_code == 200 for r in held)
    refused = claim_as(client, run_id, alice)
    assert refused.status_code == 429 and refused.json()["code"] == "source"
    assert 1 <= int(refused.headers["Retry-After"]) <= 30
    refused = client.post(f"/v1/runs/{run_id}/claims?wait=5",
                          headers={"Authorization": f"Bearer {alice}"})
    assert refused.status_code == 429  # its own limit is not waited out
    assert claim_as(client, run_id, bob).status_code == 200  # another source still claims
    body = user_report(held[0].json(), config, world(config))
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    assert claim_as(client, run_id, alice).status_code == 200  # a report frees its slot
    metrics = client.get("/metrics").text
    assert 'privrl_claims_refused_total{reason="source"} 2.0' in metrics


def test_lapsed_claims_count_against_their_source_not_the_run(apps: Apps) -> None:
    # timings long enough for a loaded machine: the refusal must come within the backoff
    client = apps(claim_timeout=1.0, max_claims_per_credential=4, min_outstanding=2,
                  max_outstanding=8)
    run_id = create(client, spec("jdp", episodes=50), "?credentials=true")
    hoarder, honest = credentials(client, run_id, 2)
    hosted = client.app.state.run_table.get(run_id)
    assert all(claim_as(client, run_id, hoarder).status_code == 200 for _ in range(4))
    time.sleep(1.05)  # all four lapse unreported, within one backoff: 4 * 1 s / 8 slots
    refused = claim_as(client, run_id, hoarder)  # sweeps them: cap 4 -> 1, backing off
    assert refused.status_code == 429 and refused.json()["code"] == "source"
    assert "lapse" in refused.json()["detail"] and refused.headers["Retry-After"] == "1"
    deadline = time.monotonic() + 5  # the backoff of the burst: 0.5 s, not doubled by its
    while claim_as(client, run_id, hoarder).status_code == 429:  # other lapses
        assert time.monotonic() < deadline, "the backoff of one burst outlasted 5 s"
        time.sleep(0.02)
    refused = claim_as(client, run_id, hoarder)
    assert refused.status_code == 429 and refused.json()["code"] == "source"
    assert hosted.admission.limit(time.time()) == 8  # the run's window is untouched
    assert all(claim_as(client, run_id, honest).status_code == 200 for _ in range(4))


def test_without_credentials_the_cap_is_per_address(apps: Apps) -> None:
    client = apps(max_claims_per_address=3)
    run_id = create(client, spec("jdp", episodes=50))
    assert client.get(f"/v1/runs/{run_id}").json()["credentials"] is False
    assert all(claim_as(client, run_id, None).status_code == 200 for _ in range(3))
    refused = claim_as(client, run_id, None)
    assert refused.status_code == 429 and refused.json()["code"] == "source"
    assert claim_as(client, run_id, "anything").status_code == 429  # a token changes nothing


def test_issuing_credentials(apps: Apps) -> None:
    client = apps()
    open_run = create(client, spec("jdp"))
    resp = client.post(f"/v1/runs/{open_run}/credentials", headers=AUTH)
    assert resp.status_code == 409 and resp.json()["code"] == "open_run"
    run_id = create(client, spec("jdp"), "?credentials=true")
    assert client.post(f"/v1/runs/{run_id}/credentials").status_code == 401
    for count in (0, 10_001):
        resp = client.post(f"/v1/runs/{run_id}/credentials", params={"count": count},
                           headers=AUTH)
        assert resp.status_code == 422
    assert client.post("/v1/runs/nope/credentials", headers=AUTH).status_code == 404
    tokens = credentials(client, run_id, 3)
    assert all(t.split(".")[1] == run_id for t in tokens)


@pytest.mark.parametrize("key", [None, "a-separate-credential-key"])
def test_the_key_signs_credentials(apps: Apps, key: str | None) -> None:
    """Credentials of one key are refused under another (rotating the key revokes them)."""
    client = apps(credential_key=key)
    run_id = create(client, spec("jdp"), "?credentials=true")
    [token] = credentials(client, run_id, 1)
    assert claim_as(client, run_id, token).status_code == 200
    client = apps.reopen(client, credential_key="rotated")
    assert claim_as(client, run_id, token).status_code == 403


def test_claims_and_reports_never_wait_for_a_worker_thread_to_check_their_source(
        apps: Apps, monkeypatch: pytest.MonkeyPatch) -> None:
    """The auth dependencies are async: FastAPI runs a sync one in a worker thread per call."""
    client = apps()
    config = spec("jdp", episodes=20)
    run_id = create(client, config, "?credentials=true")
    [token] = credentials(client, run_id, 1)
    hopped: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def recording(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        inner = getattr(fn, "func", fn)  # Starlette hands over a functools.partial
        hopped.append(f"{inner.__module__}.{inner.__qualname__}")
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recording)
    resp = claim_as(client, run_id, token)
    assert resp.status_code == 200, resp.text
    body = user_report(resp.json(), config, world(config))
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    assert credentials(client, run_id, 1)  # the admin check too
    assert not [name for name in hopped if name.startswith("privrl.server.auth")], hopped


def test_many_addresses_do_not_widen_one_credentials_cap(apps: Apps) -> None:
    """A client with 256 source addresses and one credential holds at most the credential's
    cap; honest users with their own credentials are served beside it."""
    client = apps(max_claims_per_credential=4, max_outstanding=1024)
    run_id = create(client, spec("jdp", episodes=10_000), "?credentials=true")
    sybil, honest = credentials(client, run_id, 2)
    codes: dict[int, int] = {}
    for i in range(256):
        with from_address(client, f"127.1.{i // 250}.{i % 250 + 1}"):
            for _ in range(2):
                status = claim_as(client, run_id, sybil).status_code
                codes[status] = codes.get(status, 0) + 1
    assert codes == {200: 4, 429: 508}
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["outstanding"] == 4
    assert all(claim_as(client, run_id, honest).status_code == 200 for _ in range(4))


def test_without_credentials_many_addresses_take_the_window(apps: Apps) -> None:
    """What a run without credentials cannot stop: each address is a source of its own."""
    client = apps(max_claims_per_address=2, max_outstanding=8, min_outstanding=8)
    run_id = create(client, spec("jdp", episodes=50))
    for i in range(4):
        with from_address(client, f"127.2.0.{i + 1}"):
            assert all(claim_as(client, run_id, None).status_code == 200 for _ in range(2))
    resp = claim_as(client, run_id, None)  # an honest user at yet another address
    assert resp.status_code == 429 and resp.json()["code"] == "admission"


def test_a_source_that_stalls_a_sequential_run_backs_off(apps: Apps) -> None:
    """Its lapse refuses it claims for BACKOFF_RATIO claim timeouts while another source plays."""
    client = apps(claim_timeout=0.2)
    config = spec("jdp", episodes=50)
    run_id = create(client, config, "?sequential=true")
    with from_address(client, "127.3.0.1"):
        assert claim_as(client, run_id, None).status_code == 200  # never reported
    time.sleep(0.25)
    for _ in range(3):  # an honest user plays on while the staller is refused
        resp = claim_as(client, run_id, None)
        assert resp.status_code == 200, resp.text
        body = user_report(resp.json(), config, world(config))
        assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    with from_address(client, "127.3.0.1"):
        refused = claim_as(client, run_id, None)
    assert refused.status_code == 429 and refused.json()["code"] == "source"
    assert "lapse" in refused.json()["detail"] and int(refused.headers["Retry-After"]) >= 1


def test_the_backoff_doubles_per_lapse_once_per_burst_and_reports_halve_it() -> None:
    sources = Sources(limit=2, target=1.0, hold=10.0)  # a sequential run, 10 s claims
    first = BACKOFF_RATIO * 10.0
    sources.claimed("a", "t1", 10.0)
    sources.claimed("a", "t2", 10.5)
    sources.lapsed("a", "t1", 10.0)
    sources.lapsed("a", "t2", 10.5)  # the same burst: no doubling
    with pytest.raises(Refusal) as refused:
        sources.check("a", 10.0 + first - 0.5)
    assert refused.value.headers == {"Retry-After": "1"}
    sources.check("a", 10.0 + first)  # the backoff is over
    sources.check("b", 10.0)  # other sources were never held back
    at = 10.0 + first
    for backoff in (2 * first, 4 * first):
        sources.claimed("a", "t", at)
        sources.lapsed("a", "t", at)
        with pytest.raises(Refusal):
            sources.check("a", at + backoff - 0.5)
        at += backoff
    for i in range(4):  # `limit` = 2 timely reports halve it: 4 * first -> first
        sources.claimed("a", f"r{i}", at + 10.0)
        sources.reported("a", f"r{i}", 0.5)
    sources.claimed("a", "t", at)
    sources.lapsed("a", "t", at)
    sources.check("a", at + 2 * first)  # doubled from first
    with pytest.raises(Refusal):
        sources.check("a", at + 2 * first - 0.5)
    many = Sources(limit=1, target=1.0, hold=1.0)
    for i in range(3 * MAX_DOUBLINGS):
        many.claimed("a", "t", 100.0 * 2**i)
        many.lapsed("a", "t", 100.0 * 2**i)
    assert many.by_key["a"].backoff == BACKOFF_RATIO * 2**MAX_DOUBLINGS  # bounded
