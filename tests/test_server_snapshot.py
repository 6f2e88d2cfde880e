"""Public reads answer from the run's published snapshot, never waiting for the run's lock;
the policy log is paged by version."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.protocol import PolicyLog
from support.server import Apps, claim, create, play, spec, state, user_report, world

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
    hosted = client.app.state.run_table.get(run_id)
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


def test_a_page_as_json_is_the_page() -> None:
    """The JSON a /policies page is assembled from (per-version JSON built once) is exactly
    the PolicyLog page, arrays included."""
    import numpy as np
    from privrl.protocol import ArrayPayload
    from privrl.server.snapshot import LogView, VersionEntry

    entries = [VersionEntry(v, 3 * v, [[v, 0], [1, v % 2]],
                            {"values": ArrayPayload.of(np.array([0.5 * v, -1.25]))} if v % 2
                            else {})
               for v in range(1, 8)]
    served = np.array([[3, 2, 1]] * 7, dtype=np.int64)
    log = LogView(entries, 6, served)  # the 7th version is newer than this snapshot
    for after, limit in ((0, 100), (0, 2), (2, 3), (5, 1), (6, 4), (99, 1)):
        page = log.page("r", after, limit)
        assert PolicyLog.model_validate_json(log.page_json("r", after, limit)) == \
            PolicyLog.model_validate(page.model_dump(mode="json"))
    assert log.page("r", 0, 4).next_after == 4 and log.page("r", 4, 4).next_after is None
    assert 7 not in log.page("r", 0, 100).versions


def test_public_reads_are_bounded_per_address() -> None:
    """At most `limit` reads of one address are answered at once; the next waits its turn,
    another address does not, and an address with nothing in progress is forgotten."""
    import asyncio

    from privrl.server.admission import ReadSlots

    async def scenario() -> list[str]:
        slots, order = ReadSlots(2, 1000.0), []
        release = asyncio.Event()

        async def read(key: str, name: str) -> None:
            async with slots.held(key):
                order.append(name)
                await release.wait()

        tasks = [asyncio.create_task(read("a", f"a{i}")) for i in range(3)]
        tasks.append(asyncio.create_task(read("b", "b0")))
        await asyncio.sleep(0.01)
        assert sorted(order) == ["a0", "a1", "b0"]  # a2 waits for a slot of its own address
        release.set()
        await asyncio.gather(*tasks)
        assert slots.slots == {}
        return order

    assert asyncio.run(scenario())[-1] == "a2"


def test_public_reads_are_paced_per_address() -> None:
    """Beyond its burst, an address's reads are spaced 1 / rate apart; another address keeps
    its own burst, and time refills it."""
    from privrl.server.admission import ReadSlots

    slots = ReadSlots(2, 50.0)  # bursts of 100
    assert [slots._delay("a", 0.0) for _ in range(100)] == [0.0] * 100
    waits = [slots._delay("a", 0.0) for _ in range(3)]
    assert waits == pytest.approx([0.02, 0.04, 0.06])
    assert slots._delay("b", 0.0) == 0.0
    assert slots._delay("a", 10.0) == 0.0  # refilled


def test_a_busy_runs_reader_gets_the_newest_committed_board() -> None:
    from privrl.server.snapshot import BoardArrays, Boards

    def board(reported: int) -> BoardArrays:
        return BoardArrays("r", reported, {"x": np.full((1, 2), float(reported))}, 0.0, 0.0)

    live: list[BoardArrays | None] = [None]  # the run is busy: nothing built from it
    boards = Boards(lambda: live[0])
    boards.add(board(0))
    boards.committed(0)
    boards.add(board(5))  # the planner's, at 5 reports, not committed yet
    assert boards.at(3).reported == 0  # a snapshot of 3 reports never sees the board of 5
    boards.committed(5)
    assert boards.at(5).reported == 5 and not boards.has(0)  # 0 is no longer needed
    assert boards.at(4).reported == 5  # an old snapshot read late: a committed board
    live[0] = board(7)  # quiet again: the reader builds the live one
    assert boards.at(7).json == board(7).json
