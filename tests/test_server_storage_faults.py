"""Storage faults on a real server process: an unusable `-shm` or a `-wal` that cannot grow is
answered (503 and a log line), never a crash, and /readyz is not ready while writes fail."""

from __future__ import annotations

import resource
import sqlite3
from pathlib import Path

import httpx
import pytest
from support.server import AUTH, LiveServer, spec, user_report, world

pytestmark = pytest.mark.slow


def episode(http: httpx.Client, run_id: str, config: dict) -> httpx.Response:
    """Claim and report one honest episode; the report's answer (or the refused claim's)."""
    ticket = http.post(f"/v1/runs/{run_id}/claims")
    if ticket.status_code != 200:
        return ticket
    return http.post(f"/v1/runs/{run_id}/reports",
                     json=user_report(ticket.json(), config, world(config)))


def test_an_unusable_shm_never_kills_the_server(tmp_path: Path) -> None:
    db, log = tmp_path / "privrl.db", tmp_path / "server.log"
    shm = Path(f"{db}-shm")
    shm.mkdir()  # a -shm nobody can open, map or extend
    config = spec("jdp", episodes=20)
    server = LiveServer(db, log).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            run_id = http.post("/v1/runs", json=config, headers=AUTH).json()["id"]
            for _ in range(5):
                assert episode(http, run_id, config).status_code == 200
            shm.rmdir()
            shm.write_bytes(b"")  # an empty, read-only -shm appears mid-run (a mapped one
            shm.chmod(0o444)      # truncated under a running server is a SIGBUS)
            for _ in range(5):
                assert episode(http, run_id, config).status_code == 200
            assert http.get("/readyz").status_code == 200
            assert http.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 10
        assert server.proc is not None and server.proc.poll() is None
        assert shm.stat().st_size == 0  # the server never used it: its WAL index is in memory
        with pytest.raises(sqlite3.OperationalError, match="locked"):  # the only process on it
            sqlite3.connect(db, timeout=0.1).execute("SELECT COUNT(*) FROM runs").fetchall()
    finally:
        server.stop()
    server = LiveServer(db, log).start()  # and the WAL it wrote recovers as usual
    try:
        reported = httpx.get(f"{server.url}/v1/runs/{run_id}").json()["status"]["reported"]
        assert reported == 10
    finally:
        server.stop()


def test_a_wal_that_cannot_grow_is_answered_503_until_it_can(tmp_path: Path) -> None:
    db, log = tmp_path / "privrl.db", tmp_path / "server.log"
    config = spec("jdp", episodes=40)
    server = LiveServer(db, log).start()
    try:
        assert server.proc is not None
        pid = server.proc.pid
        with httpx.Client(base_url=server.url, timeout=10) as http:
            run_id = http.post("/v1/runs", json=config, headers=AUTH).json()["id"]
            for _ in range(3):
                assert episode(http, run_id, config).status_code == 200
            wal = Path(f"{db}-wal").stat().st_size
            # no file of the server may grow past the -wal's size now (EFBIG, as a full disk)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (wal, resource.RLIM_INFINITY))
            try:
                refused = [episode(http, run_id, config) for _ in range(3)]
                assert all(r.status_code == 503 for r in refused), [r.text for r in refused]
                assert all(r.json()["code"] == "store" for r in refused)
                ready = http.get("/readyz")
                assert ready.status_code == 503, ready.text
                assert "writes to the store fail" in ready.json()["detail"]
                assert http.get(f"/v1/runs/{run_id}/billboard").json()["reported"] == 3
            finally:
                resource.prlimit(pid, resource.RLIMIT_FSIZE,
                                 (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            assert server.proc.poll() is None  # never a crash
            assert http.get("/readyz").status_code == 200  # a probe write succeeds again
            assert episode(http, run_id, config).json()["reported"] == 4
    finally:
        server.stop()
    assert "a grouped commit of" in server.log() and "failed" in server.log()
