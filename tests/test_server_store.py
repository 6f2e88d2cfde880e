"""Persistence: a restarted server rebuilds every run exactly (contract 2) from its SQLite store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from privrl.server.store import Store
from privrl.wire import unpack_floats
from support.server import (
    AUTH,
    Apps,
    claim,
    create,
    interleaved,
    play,
    spec,
    state,
    user_report,
    world,
)


def comparable(snap: dict[str, Any]) -> dict[str, Any]:
    """A snapshot without what legitimately differs between two servers (run id)."""
    text = json.dumps(snap, sort_keys=True)
    run_id = snap["billboard"]["run_id"]
    return json.loads(text.replace(run_id, "RUN"))


@pytest.mark.parametrize("privacy", [pytest.param("jdp", marks=pytest.mark.slow), "ldp"])  # long
def test_restart_mid_run_continues_exactly_like_an_uninterrupted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, privacy: str
) -> None:
    """Two servers get the same traffic; one restarts midway. Every public number agrees."""
    for name in ("ADMIN_TOKEN", "DB", "CLAIM_TIMEOUT", "SEQUENTIAL"):
        monkeypatch.delenv(f"PRIVRL_{name}", raising=False)
    config = spec(privacy, episodes=40, n_states=5, horizon=6, seed=9)
    steady_apps, restarted_apps = Apps(tmp_path / "a.db"), Apps(tmp_path / "b.db")
    try:
        steady, restarted = steady_apps(), restarted_apps()
        run_a, run_b = create(steady, config), create(restarted, config)
        interleaved(steady, run_a, config, 6, seed=1)
        interleaved(restarted, run_b, config, 6, seed=1)
        before = state(restarted, run_b)
        restarted = restarted_apps.reopen(restarted)
        assert state(restarted, run_b) == before  # rebuilt exactly: same released values
        assert comparable(before) == comparable(state(steady, run_a))
        interleaved(steady, run_a, config, 5, seed=2)
        interleaved(restarted, run_b, config, 5, seed=2)
        assert comparable(state(steady, run_a)) == comparable(state(restarted, run_b))
        assert state(restarted, run_b)["status"]["policy_version"] > 1
    finally:
        for factory in (steady_apps, restarted_apps):
            for client in list(factory.opened):
                factory.close(client)


def test_outstanding_claims_and_acks_survive_a_restart(apps: Apps) -> None:
    client = apps()
    config = spec("jdp", episodes=4)
    run_id = create(client, config)
    mdp = world(config)
    done = claim(client, run_id)
    done_body = user_report(done, config, mdp)
    first_ack = client.post(f"/v1/runs/{run_id}/reports", json=done_body).json()
    pending = claim(client, run_id)
    client = apps.reopen(client)
    resp = client.post(f"/v1/runs/{run_id}/reports", json=done_body)
    assert resp.json() == {**first_ack, "duplicate": True}
    resp = client.post(f"/v1/runs/{run_id}/reports", json=user_report(pending, config, mdp))
    assert resp.status_code == 200 and resp.json()["reported"] == 2
    assert claim(client, run_id)["episode"] == 2  # the claim counter is persisted too


def test_deleted_runs_stay_deleted_and_their_reports_are_purged(apps: Apps) -> None:
    client = apps()
    config = spec("jdp", episodes=4)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    client.post(f"/v1/runs/{run_id}/reports", json=user_report(ticket, config, world(config)))
    assert client.delete(f"/v1/runs/{run_id}", headers=AUTH).status_code == 204
    client = apps.reopen(client)
    assert client.get(f"/v1/runs/{run_id}").status_code == 404
    with sqlite3.connect(apps.db) as conn:
        for table in ("reports", "claims", "policies"):
            count = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,))
            assert count.fetchone()[0] == 0, table
        assert conn.execute("SELECT deleted FROM runs WHERE id = ?", (run_id,)).fetchone() == (1,)


def test_ldp_store_holds_only_noisy_arrays(apps: Apps) -> None:
    client = apps()
    config = spec("ldp", episodes=3)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    body = user_report(ticket, config, world(config))
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    with sqlite3.connect(apps.db) as conn:
        kind, payload = conn.execute("SELECT kind, payload FROM reports").fetchone()
    assert kind == "noisy"
    assert set(json.loads(payload)) == {"arrays"}
    stored = json.loads(payload)["arrays"]  # packed (base64 float64): the same numbers, compact
    assert {k: unpack_floats(v).tolist() for k, v in stored.items()} == body["arrays"]


def test_a_run_whose_log_does_not_replay_is_not_served(apps: Apps) -> None:
    client = apps()
    config = spec("jdp", episodes=6)
    run_id = create(client, config)
    healthy = create(client, config)
    mdp = world(config)
    for _ in range(3):
        ticket = claim(client, run_id)
        client.post(f"/v1/runs/{run_id}/reports", json=user_report(ticket, config, mdp))
    apps.close(client)
    with sqlite3.connect(apps.db) as conn:  # tamper with the public policy log
        conn.execute(
            "UPDATE policies SET actions = ? WHERE run_id = ? AND version = 1",
            (json.dumps([[9] * config["n_states"]] * config["horizon"]), run_id),
        )
    client = apps()
    resp = client.get(f"/v1/runs/{run_id}/billboard")
    assert resp.status_code == 503 and "could not be rebuilt" in resp.json()["detail"]
    assert "could not be rebuilt" in client.get("/readyz").json()["detail"]
    assert client.get(f"/v1/runs/{healthy}").status_code == 200
    assert client.delete(f"/v1/runs/{run_id}", headers=AUTH).status_code == 204
    assert client.get(f"/v1/runs/{run_id}").status_code == 404


def test_store_uses_wal_and_commits_each_write(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    try:
        with sqlite3.connect(tmp_path / "s.db") as other:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert {r[0] for r in other.execute("SELECT name FROM sqlite_master")} >= {
                "runs", "claims", "reports", "policies"
            }
    finally:
        store.close()
    with pytest.raises(FileNotFoundError):
        Store(tmp_path / "missing" / "s.db")


def test_databases_with_public_seeds_are_migrated(tmp_path: Path, apps: Apps) -> None:
    """A database from before seeds were secret: the seed moves out of the public config, and
    the run keeps the noise it already published (same seed, same billboard)."""
    seed = 987654321987
    config = spec("jdp", episodes=6, seed=seed)
    first = apps()
    run_id = create(first, config)
    play(first, run_id, config, 3)
    before = state(first, run_id)
    apps.close(first)
    with sqlite3.connect(tmp_path / "privrl.db") as db:  # rewrite the row the old way
        (text,) = db.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()
        old = {**json.loads(text), "seed": seed}
        db.execute("ALTER TABLE runs DROP COLUMN seed")
        db.execute("UPDATE runs SET config = ? WHERE id = ?", (json.dumps(old), run_id))
    rows = Store(tmp_path / "privrl.db").runs()
    assert rows[0].seed == seed and "seed" not in json.loads(rows[0].config)
    assert str(seed) not in repr(rows[0])
    again = apps()
    assert state(again, run_id) == before
    assert "seed" not in again.get(f"/v1/runs/{run_id}").json()["config"]
