"""Public reads answer from the run's published snapshot, never waiting for the run's lock;
the policy log is paged by version."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from privrl.protocol import PolicyLog
from server_support import Apps, claim, create, play, spec, state, user_report, world

PUBLIC = ("", "/billboard", "/policy", "/ledger", "/policies", "/regret?world=riverswim")


@pytest.fixture
def client(apps: Apps) -> TestClient:
    """One app with the default settings."""
    return apps()


def test_public_reads_answer_while_the_run_lock_is_held(client: TestClient) -> None:
    config = spec("jdp", episodes=10, n_states=6, n_actions=2)
    run_id = create(client, config)
    play(client, run_id, config, 3)
    before = {path: client.get(f"/v1/runs/{run_id}{path}") for path in PUBLIC}
    assert all(r.status_code == 200 for r in before.values()), before
    hosted = client.app.state.registry.get(run_id)
    client.portal.call(hosted.lock.acquire)  # the run's writer is busy (e.g. a slow plan)
    try:
        assert hosted.lock.locked()
        for path in PUBLIC:
            resp = client.get(f"/v1/runs/{run_id}{path}")
            assert resp.status_code == 200, (path, resp.text)
            assert resp.json() == before[path].json(), path
        assert client.get("/v1/runs").status_code == 200
    finally:
        client.portal.call(hosted.lock.release)
    play(client, run_id, config, 1)  # the run goes on; the next read shows the new commit
    assert client.get(f"/v1/runs/{run_id}/billboard").json()["reported"] == 4


def test_a_snapshot_is_published_only_after_its_commit(client: TestClient) -> None:
    """A report counted in memory but not yet committed is not visible to readers."""
    config = spec("jdp", episodes=10)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    writer = client.app.state.writer
    blocked: list[Any] = []
    commit = writer.store.commit

    def held_commit() -> None:
        blocked.append(True)
        gate.wait(10)
        commit()

    gate = threading.Event()
    writer.store.commit = held_commit
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(client.post(
        f"/v1/runs/{run_id}/reports", json=user_report(ticket, config, world(config)))))
    worker.start()
    try:
        for _ in range(200):
            if blocked:
                break
            worker.join(0.01)
        assert blocked, "the report never reached its commit"
        assert client.get(f"/v1/runs/{run_id}/billboard").json()["reported"] == 0
        assert client.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 0
    finally:
        gate.set()
        worker.join(10)
        writer.store.commit = commit
    assert done[0].status_code == 200, done[0].text
    assert client.get(f"/v1/runs/{run_id}/billboard").json()["reported"] == 1


def test_policies_are_paged_by_version(client: TestClient) -> None:
    config = spec("jdp", episodes=40, epsilon=100.0)
    run_id = create(client, config)
    play(client, run_id, config, 40)
    whole = PolicyLog.model_validate(client.get(f"/v1/runs/{run_id}/policies").json())
    versions = sorted(whole.versions)
    assert len(versions) >= 3, versions  # enough versions to page through
    assert whole.next_after is None
    assert sum(s.reported for s in whole.served.values()) == 40
    pages, after = [], 0
    while True:
        resp = client.get(f"/v1/runs/{run_id}/policies", params={"after": after, "limit": 2})
        assert resp.status_code == 200, resp.text
        page = PolicyLog.model_validate(resp.json())
        assert len(page.versions) <= 2 and min(page.versions) > after
        pages.append(page)
        if page.next_after is None:
            break
        after = page.next_after
    assert len(pages) == (len(versions) + 1) // 2
    merged = pages[0]
    for page in pages[1:]:
        merged = merged.merged(page)
    assert merged == whole
    firsts = [whole.served[v].first_episode for v in versions]  # contiguous episode ranges
    assert firsts[0] == 0 and firsts == sorted(firsts)
    for v, nxt in zip(versions, versions[1:], strict=False):
        assert whole.served[v].first_episode + whole.served[v].claimed == whole.served[
            nxt].first_episode
    for bad in ({"limit": 0}, {"limit": 100_000}, {"after": -1}):
        assert client.get(f"/v1/runs/{run_id}/policies", params=bad).status_code == 422
    last = client.get(f"/v1/runs/{run_id}/policies", params={"after": versions[-1]}).json()
    assert last["versions"] == {} and last["next_after"] is None


def test_the_log_counts_lapsed_claims_and_survives_a_restart(apps: Apps) -> None:
    client = apps(claim_timeout=0.2)
    config = spec("jdp", episodes=10)
    run_id = create(client, config)
    play(client, run_id, config, 2)
    claim(client, run_id)  # never reported
    time.sleep(0.3)
    log = PolicyLog.model_validate(client.get(f"/v1/runs/{run_id}/policies").json())
    assert sum(s.expired for s in log.served.values()) == 1
    assert sum(s.claimed for s in log.served.values()) == 3
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["outstanding"] == 0
    before = state(client, run_id)
    client = apps.reopen(client, claim_timeout=0.2)
    assert state(client, run_id) == before
