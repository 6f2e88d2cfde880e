"""The rollback drill on a real server process: SIGKILL, delete the `-wal`, restart.

The store goes back to what was last checkpointed; the run is held (503, /readyz not ready)
until an admin acts through `privrl runs continue|stop`, and no count is ever published twice
with different data under the same noise: at every count published in both lives the two
billboards differ by more than integers (the noise did not cancel).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from support.server import (
    ADMIN,
    REPO,
    LiveServer,
    create,
    damage_marks,
    spec,
    user_report,
    world,
)

pytestmark = pytest.mark.slow


def report(http: httpx.Client, run_id: str, config: dict[str, Any], client_seed: int) -> dict:
    """One honest user's episode; the billboard published right after it."""
    ticket = http.post(f"/v1/runs/{run_id}/claims")
    assert ticket.status_code == 200, ticket.text
    body = user_report(ticket.json(), config, world(config), client_seed)
    assert http.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    board = http.get(f"/v1/runs/{run_id}/billboard").json()
    return board


def lose_the_wal(server: LiveServer) -> None:
    """SIGKILL the server and delete its `-wal` (and `-shm`): the store goes back."""
    server.kill()
    wal = Path(f"{server.db}-wal")
    assert wal.exists() and wal.stat().st_size > 0
    wal.unlink()
    Path(f"{server.db}-shm").unlink(missing_ok=True)


def cli(server: LiveServer, *args: str) -> subprocess.CompletedProcess:
    """`privrl runs ...` against the server, with the admin token."""
    env = {**os.environ, "PRIVRL_ADMIN_TOKEN": ADMIN,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "privrl.client.cli", "runs", *args,
                           "--server", server.url], env=env, capture_output=True, text=True,
                          timeout=60)


def cancelled(a: dict, b: dict) -> int:
    """Entries of two billboards where the noise cancelled: a noisy (non-integer) value of one
    minus the other's is an integer (post-processing, e.g. clipping, leaves other entries)."""
    count = 0
    for name, values in a["arrays"].items():
        x, y = np.asarray(values), np.asarray(b["arrays"][name])
        noisy = np.abs(x - np.round(x)) > 1e-6
        d = x - y
        count += int(np.sum(noisy & (np.abs(d - np.round(d)) < 1e-9)))
    return count


def test_a_lost_wal_holds_the_run_until_an_admin_acts(tmp_path: Path) -> None:
    db, log = tmp_path / "privrl.db", tmp_path / "server.log"
    config = spec("jdp", episodes=40, n_states=5, horizon=6, seed=21, counter="smoothed",
                  schedule="every")
    server = LiveServer(db, log).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            run_id = create(http, config)
        server.stop()  # a clean stop checkpoints: the run itself is in the main file
        server = LiveServer(db, log).start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            first = {n: report(http, run_id, config, 11) for n in range(1, 13)}
            assert first[12]["reported"] == 12
        lose_the_wal(server)

        server = LiveServer(db, log).start(ready=False)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503 and run_id in ready.json()["detail"]
            assert "12 reports" in ready.json()["detail"]
            resp = http.get(f"/v1/runs/{run_id}/billboard")
            assert resp.status_code == 503 and resp.json()["code"] == "rolled_back"
            assert http.post(f"/v1/runs/{run_id}/claims").status_code == 503
            done = cli(server, "continue", run_id)
            assert done.returncode == 0, done.stderr
            assert "fresh noise" in done.stdout
            assert http.get("/readyz").status_code == 200
            second = {n: report(http, run_id, config, 1000 + n) for n in range(1, 13)}
            ledger = http.get(f"/v1/runs/{run_id}/ledger").json()
        assert ledger["epsilon"] <= 1.0 + 1e-9
        for n in range(1, 13):  # the same counts, other data: the noise must not cancel
            assert second[n]["reported"] == n
            assert cancelled(first[n], second[n]) == 0, n

        server.stop()  # checkpoint at 12 reports of epoch 1, then lose 5 more
        server = LiveServer(db, log).start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            for n in range(13, 18):
                report(http, run_id, config, 2000 + n)
        lose_the_wal(server)

        server = LiveServer(db, log).start(ready=False)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/readyz").status_code == 503
            refused = cli(server, "continue", run_id)  # 12 counted users: a third tree
            assert refused.returncode != 0 and "budget" in refused.stderr, refused.stderr
            stopped = cli(server, "stop", run_id)
            assert stopped.returncode == 0 and "stopped at 12" in stopped.stdout, stopped.stderr
            assert http.get("/readyz").status_code == 200
            assert http.get(f"/v1/runs/{run_id}/billboard").json() == second[12]
            assert http.post(f"/v1/runs/{run_id}/claims").json()["code"] == "stopped"
    finally:
        server.stop()
    assert "store went back" in server.log()


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_a_lost_wal_and_a_lost_mark_publish_nothing_until_an_admin_acts(
    tmp_path: Path, how: str
) -> None:
    """The security review's drill: the store goes back and the mark files are deleted or
    truncated to 0 bytes. Run `kept` has 6 reports in the store (12 were published), run
    `empty` none (5 were). Both are held; not one billboard is served until an admin acts;
    `empty` continues under a new noise epoch (its counts again, other data, noise that does
    not cancel), `kept` cannot (its mark is lost: charged to its end) and is stopped at the
    billboard already published at 6. Prints the figure (pytest -s)."""
    db, log = tmp_path / "privrl.db", tmp_path / "server.log"
    config = spec("jdp", episodes=40, n_states=5, horizon=6, seed=21, counter="smoothed",
                  schedule="every")
    server = LiveServer(db, log).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            kept, empty = create(http, config), create(http, config)
            first = {n: report(http, kept, config, 11) for n in range(1, 7)}
        server.stop()  # checkpointed: both runs and 6 reports of `kept` are in the main file
        server = LiveServer(db, log).start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            first |= {n: report(http, kept, config, 11) for n in range(7, 13)}
            lost = {n: report(http, empty, config, 11) for n in range(1, 6)}
        lose_the_wal(server)
        damage_marks(db, how)

        server = LiveServer(db, log).start(ready=False)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503 and "mark is lost" in ready.json()["detail"]
            served, codes = 0, set()
            for run_id in (kept, empty):
                for _ in range(12):  # users and readers come back: every answer is a 503
                    for resp in (http.post(f"/v1/runs/{run_id}/claims"),
                                 http.get(f"/v1/runs/{run_id}/billboard")):
                        served += resp.status_code == 200
                        codes.add((resp.status_code, resp.json()["code"]))
            assert served == 0 and codes == {(503, "mark_missing")}, codes

            refused = cli(server, "continue", kept)
            assert refused.returncode != 0 and "its mark is lost" in refused.stderr
            assert cli(server, "stop", kept).returncode == 0
            assert http.get(f"/v1/runs/{kept}/billboard").json() == first[6]  # as published
            done = cli(server, "continue", empty)
            assert done.returncode == 0, done.stderr
            assert http.get("/readyz").status_code == 200
            again = {n: report(http, empty, config, 1000 + n) for n in range(1, 6)}
            ledger = http.get(f"/v1/runs/{empty}/ledger").json()
        assert ledger["epsilon"] <= 1.0 + 1e-9
        cancelling = sum(cancelled(lost[n], again[n]) for n in range(1, 6))
        assert all(again[n]["reported"] == n for n in range(1, 6)) and cancelling == 0
    finally:
        server.stop()
    print(f"\nmark files {how}, store back from 12 to 6 reports and from 5 to 0: both runs"
          f" held ({sorted(codes)}, /readyz {ready.status_code}); {served} billboards"
          f" re-published of {2 * 12 * 2} claims and reads; after `runs stop` the 6-report"
          f" billboard is the one published; after `runs continue` (epoch 1, epsilon"
          f" {ledger['epsilon']:.4g}) {cancelling} entries cancel over 5 counts published"
          " twice")
