"""Admission control, overload answers and coalesced planning (in process; the real-process load
tests are in test_server_load.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from privrl.protocol import TrajectoryReport
from privrl.server.admission import Admission, InFlight, Throughput
from privrl.server.errors import Refusal
from privrl.server.settings import Settings
from privrl.server.store import Store
from privrl.server.writer import Writer
from support.server import (
    Apps,
    claim,
    create,
    from_address,
    spec,
    state,
    user_report,
    world,
)


def test_throughput_counts_the_last_window_only() -> None:
    rate = Throughput(window=2.0)
    assert rate.rate(0.0) == 0.0
    for i in range(10):
        rate.add(100.0 + 0.1 * i)  # 10 events within one second
    assert rate.rate(100.9) == pytest.approx(10.0)  # young: divided by the 1 s observed
    assert rate.rate(102.0) == pytest.approx(4.5)  # the 9 events of the last 2 s
    assert rate.rate(103.0) == 0.0  # all older than the window


def test_the_window_halves_on_late_reports_and_widens_on_timely_ones() -> None:
    limits = Settings(claim_timeout=20.0, min_outstanding=2, max_outstanding=10,
                      queue_fraction=0.5).run_limits()
    adm = Admission(limits)  # target: a report within 10 s of its claim
    assert adm.limit(0.0) == 10 and adm.admits(9, 0.0) and not adm.admits(10, 0.0)  # open
    adm.reported(9.0, 1.0)  # on time: stays (capped at max_outstanding)
    assert adm.limit(1.0) == 10
    adm.reported(11.0, 2.0)  # late: half
    assert adm.limit(2.0) == 5
    adm.reported(12.0, 3.0)  # late again within target / 2 = 5 s: no second cut
    adm.narrow(4.0)  # a lapsed claim, same
    assert adm.limit(4.0) == 5
    adm.narrow(7.5)  # later: halved again
    assert adm.limit(7.5) == 2
    adm.narrow(13.0)  # never below min_outstanding
    assert adm.limit(13.0) == 2
    for i in range(3):
        adm.reported(1.0, 14.0 + i)  # timely: one wider each
    assert adm.limit(17.0) == 5
    refusal = adm.refusal("r", 5, 17.0)
    assert refusal.status == 429 and refusal.reason == "admission"
    assert 1 <= int(refusal.headers["Retry-After"]) <= 10


def test_lapsed_claims_narrow_their_source_not_the_run(apps: Apps) -> None:
    """A claim that lapses unreported halves its source's limit; the run's window, which every
    other client shares, stays as it was (a hoarder cannot shrink it for everyone)."""
    client = apps(claim_timeout=0.2, min_outstanding=2, max_outstanding=8,
                  max_claims_per_address=16)
    run_id = create(client, spec("jdp", episodes=50))
    hosted = client.app.state.run_table.get(run_id)
    hosted.admission.window = 8.0
    for _ in range(3):
        claim(client, run_id)  # never reported
    time.sleep(0.25)
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["outstanding"] == 0
    assert hosted.admission.limit(time.time()) == 8
    assert hosted.sources.cap("address:testclient") == 13  # one less per lapse


def test_in_flight_bound_gives_reports_twice_the_room() -> None:
    bound = InFlight(2)
    bound.enter(report=False)
    bound.enter(report=False)
    with pytest.raises(Refusal) as exc:
        bound.enter(report=False)
    assert exc.value.status == 503 and exc.value.headers["Retry-After"] == "1"
    bound.enter(report=True)
    bound.enter(report=True)
    with pytest.raises(Refusal):
        bound.enter(report=True)
    for _ in range(4):
        bound.leave()
    assert bound.count == 0


def test_claims_beyond_the_admission_limit_get_429_and_change_nothing(apps: Apps) -> None:
    client = apps(min_outstanding=2, max_outstanding=2)
    config = spec("jdp", episodes=10)
    run_id = create(client, config)
    tickets = [claim(client, run_id) for _ in range(2)]
    before = state(client, run_id)
    resp = client.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 429, resp.text
    assert resp.json()["code"] == "admission" and int(resp.headers["Retry-After"]) >= 1
    assert state(client, run_id) == before
    body = user_report(tickets[0], config, world(config))
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    assert claim(client, run_id)["episode"] == 2  # the report freed a slot
    metrics = client.get("/metrics").text
    assert 'privrl_claims_refused_total{reason="admission"} 1.0' in metrics


def test_no_waiting_room_means_an_immediate_429(apps: Apps) -> None:
    client = apps(min_outstanding=1, max_outstanding=1, max_waiting=0)
    run_id = create(client, spec("jdp", episodes=10))
    claim(client, run_id)
    resp = client.post(f"/v1/runs/{run_id}/claims", params={"wait": 5})
    assert resp.status_code == 429  # would wait, but no claim of this run may


def test_planning_is_coalesced_under_concurrency_and_replays(apps: Apps) -> None:
    """With claims outstanding, a run plans at most once per plan_interval: here never after the
    first claim. A restart replays the recorded planning points to the same policy log."""
    client = apps(plan_interval=3600.0)
    config = spec("jdp", episodes=8)
    run_id = create(client, config)
    mdp = world(config)
    first = claim(client, run_id)  # no claim outstanding: plans (version 1)
    held = claim(client, run_id)  # keeps a claim outstanding from here on
    versions = []
    ticket = first
    for _ in range(4):
        resp = client.post(f"/v1/runs/{run_id}/reports", json=user_report(ticket, config, mdp))
        assert resp.status_code == 200
        ticket = claim(client, run_id)
        versions.append(ticket["policy"]["version"])
    assert versions == [held["policy"]["version"]] * 4  # 4 reports, no new plan
    assert client.app.state.run_table.get(run_id).planned_at == 0  # never consulted after 0
    before = state(client, run_id)
    again = apps.reopen(client, plan_interval=3600.0)
    assert state(again, run_id) == before


def test_a_report_is_judged_by_its_arrival(apps: Apps) -> None:
    """A report that arrived before its claim lapsed is counted even if handled after."""
    client = apps()
    config = spec("jdp", episodes=4)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    hosted = client.app.state.run_table.get(run_id)
    claim_row = hosted.open[ticket["ticket"]]
    report = TrajectoryReport.model_validate(user_report(ticket, config, world(config)))
    assert hosted.n_outstanding(claim_row.expires_at + 1.0) == 0  # its turn came late: swept
    ack, rows = hosted.report(report, claim_row.expires_at - 0.001)  # but it arrived in time
    assert ack.reported == 1 and ack.episode == 0 and rows
    with from_address(client, "10.0.0.2"):  # the first source backs off from that lapse
        late = claim(client, run_id)
    late_report = TrajectoryReport.model_validate(user_report(late, config, world(config)))
    with pytest.raises(Refusal) as exc:
        hosted.report(late_report, hosted.open[late["ticket"]].expires_at + 0.001)
    assert exc.value.reason == "expired"


def test_the_writer_commits_queued_groups_together_in_order(tmp_path: Path) -> None:
    """50 changes queued while nothing is committing: a handful of transactions, in order."""
    store = Store(tmp_path / "w.db")
    store._write([("CREATE TABLE t (i INTEGER)", ())])

    async def main() -> tuple[int, int]:
        writer = Writer(store)
        writer.start()
        futures = [writer.submit([("INSERT INTO t VALUES (?)", (i,))], lambda: None)
                   for i in range(50)]
        await asyncio.gather(*futures)
        await writer.close()
        return writer.batches, writer.groups

    batches, groups = asyncio.run(main())
    assert groups == 50 and batches < 5
    assert [r[0] for r in store._read("SELECT i FROM t")] == list(range(50))
    store.close()


def test_a_failed_commit_fails_every_queued_group_and_marks_their_runs(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    marked: list[int] = []

    async def main() -> list[BaseException | None]:
        writer = Writer(store)
        writer.start()
        futures = [writer.submit([("INSERT INTO nowhere VALUES (?)", (i,))],
                                 lambda i=i: marked.append(i)) for i in range(3)]
        out = await asyncio.gather(*futures, return_exceptions=True)
        await writer.close()
        return out

    results = asyncio.run(main())
    assert all(isinstance(r, sqlite3.Error) for r in results) and sorted(marked) == [0, 1, 2]
    store.close()


def test_a_report_whose_commit_fails_is_not_counted_and_can_be_retried(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = apps()
    config = spec("ldp", episodes=4)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    before = state(client, run_id)
    store = client.app.state.store
    real = store.commit
    calls = []

    def failing_once():  # the disk is full, once: the staged rows are rolled back
        calls.append(1)
        if len(calls) == 1:
            store._conn.execute("ROLLBACK")
            store._lock.release()
            raise sqlite3.OperationalError("database or disk is full")
        return real()

    monkeypatch.setattr(store, "commit", failing_once)
    body = user_report(ticket, config, world(config))
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 503 and resp.json()["code"] == "store"
    assert state(client, run_id) == before  # rebuilt from the store: nothing counted
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
    assert resp.status_code == 200 and resp.json()["reported"] == 1
    assert not resp.json()["duplicate"]
    again = apps.reopen(client)
    assert again.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 1
