"""Helpers of the server tests: run specs, users' reports, in-process apps, a live server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient
from privrl.algorithms import bind, configure, effective
from privrl.client.procs import free_port
from privrl.config import RunConfig
from privrl.protocol import PolicyPayload, RunInfo, RunRequest, Ticket
from privrl.run import user_episode
from privrl.server.app import create_app
from privrl.server.ops.highwater import HighWater
from privrl.server.settings import Settings
from privrl.worlds.tabular import TabularMDP, riverswim

REPO = Path(__file__).resolve().parents[2]
ADMIN = "test-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def default_sigint() -> None:
    """`preexec_fn` of a child a test stops with SIGINT: the default disposition, as a
    terminal's foreground process has. A suite started in the background by a non-interactive
    shell (`.ci/run &`) runs with SIGINT ignored, and a child would inherit that (POSIX)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spec(privacy: str = "jdp", **overrides: Any) -> dict[str, Any]:
    """A small RiverSwim run (S=4, A=2, H=5) as a POST /v1/runs body: the public config plus
    the server's secret seed (3 unless overridden; seed=None leaves it to the server)."""
    base = dict(n_states=4, n_actions=2, horizon=5, episodes=10, privacy=privacy, seed=3)
    base.update(overrides)
    return RunRequest(**base).model_dump(mode="json", exclude_none=True)


def public(config: dict[str, Any]) -> RunConfig:
    """The public part of a run spec as runs use it (the preset's schedule filled in): what
    GET /v1/runs/{id} shows."""
    return effective(configure(RunRequest.model_validate(config).public()))


def world(config: dict[str, Any]) -> TabularMDP:
    """The users' private world matching a spec (RiverSwim of the config's size)."""
    return riverswim(horizon=config["horizon"], n_states=config["n_states"])


def user_report(
    ticket: dict[str, Any], config: dict[str, Any], mdp: TabularMDP, client_seed: int = 11
) -> dict[str, Any]:
    """What an honest user posts for a Ticket: its trajectory (JDP/none) or noisy arrays (LDP)."""
    cfg = public(config)
    message = PolicyPayload.model_validate(ticket["policy"]).message()
    traj, noisy = user_episode(  # nonce: a fresh user that claims episodes in order
        mdp, message, [client_seed], ticket["episode"], bind(cfg), bind(cfg).calibration(),
        nonces=[ticket["episode"]],
    )
    if noisy is None:
        return {
            "kind": "trajectory",
            "ticket": ticket["ticket"],
            "states": traj.states[0].tolist(),
            "actions": traj.actions[0].tolist(),
            "rewards": traj.rewards[0].tolist(),
        }
    return {
        "kind": "noisy",
        "ticket": ticket["ticket"],
        "arrays": {name: arr[0].ravel().tolist() for name, arr in noisy.items()},
    }


def snapshot(get: Callable[[str], httpx.Response], run_id: str) -> dict[str, Any]:
    """Everything public about a run (billboard, ledger, policy, log, status) as JSON."""
    out = {}
    for name in ("billboard", "ledger", "policy", "policies"):
        resp = get(f"/v1/runs/{run_id}/{name}")
        assert resp.status_code == 200, resp.text
        out[name] = resp.json()
    resp = get(f"/v1/runs/{run_id}")
    assert resp.status_code == 200, resp.text
    out["status"] = resp.json()["status"]
    return out


class LiveServer:
    """`python -m privrl.server` as a real child process on a free loopback port."""

    def __init__(self, db: Path, log: Path, *args: str, env: dict[str, str] | None = None):
        self.db, self.log_path, self.args = db, log, list(args)
        self.extra_env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.run_ids: list[str] = []

    def start(self, timeout: float = 30.0, ready: bool = True) -> LiveServer:
        """Start and wait until /readyz answers 200 (`ready` False: until the runs are
        rebuilt, ready or not)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env["PRIVRL_ADMIN_TOKEN"] = ADMIN
        env.update(self.extra_env)
        cmd = [sys.executable, "-m", "privrl.server", "--host", "127.0.0.1",
               "--port", str(self.port), "--db", str(self.db), *self.args]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}):\n{self.log()}")
            try:
                resp = httpx.get(f"{self.url}/readyz", timeout=1.0)
                if resp.status_code == 200 or (
                        not ready and "rebuilding" not in resp.json()["detail"]):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.log()}")

    def log(self) -> str:
        """Everything the server wrote."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class KillRoundTrip:
    """What `sigkill_round_trip` saw: the public state before the kill, after the restart (before
    anything new), at the end, and the restarted server's log."""

    before: dict[str, Any]
    restarted: dict[str, Any]
    final: dict[str, Any]
    log: str


def sigkill_round_trip(tmp_path: Path, body: dict[str, Any], mdp: TabularMDP, first: int,
                       rest: int) -> KillRoundTrip:
    """A real server: create the run, report `first` honest episodes, SIGKILL, restart on the
    same database, re-send every report (each must be answered as a duplicate with its stored
    Ack), report `rest` more."""
    db, log_path = tmp_path / "privrl.db", tmp_path / "server.log"
    server = LiveServer(db, log_path).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            run_id = create(http, body)
            sent = []
            for _ in range(first):
                ticket = http.post(f"/v1/runs/{run_id}/claims").json()
                report = user_report(ticket, body, mdp)
                ack = http.post(f"/v1/runs/{run_id}/reports", json=report).json()
                sent.append((report, ack))
            before = snapshot(http.get, run_id)
        server.kill()
        server = LiveServer(db, log_path).start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            restarted = snapshot(http.get, run_id)
            for report, ack in sent:
                resp = http.post(f"/v1/runs/{run_id}/reports", json=report)
                assert resp.json() == {**ack, "duplicate": True}
            for _ in range(rest):
                ticket = http.post(f"/v1/runs/{run_id}/claims").json()
                resp = http.post(f"/v1/runs/{run_id}/reports",
                                 json=user_report(ticket, body, mdp))
                assert resp.status_code == 200, resp.text
            final = snapshot(http.get, run_id)
    finally:
        server.stop()
    return KillRoundTrip(before, restarted, final, server.log())


class Apps:
    """Opens apps on one database file (closing them at the end); `reopen` simulates a restart."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.opened: list[TestClient] = []

    def __call__(self, **overrides: Any) -> TestClient:
        # a test is not a flood of public reads: their pacing is tested on its own
        fields: dict[str, Any] = {"admin_token": ADMIN, "db": self.db,
                                  "max_reads_per_second": 1e6}
        fields.update(overrides)
        client = TestClient(create_app(Settings(**fields)))
        client.__enter__()
        self.opened.append(client)
        deadline = time.monotonic() + 10
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, client.get("/readyz").text
            time.sleep(0.01)
        return client

    def close(self, client: TestClient) -> None:
        """Shut one app down (its lifespan ends, the store closes)."""
        self.opened.remove(client)
        client.__exit__(None, None, None)

    def reopen(self, client: TestClient, **overrides: Any) -> TestClient:
        """Close `client` and start a new app on the same database."""
        self.close(client)
        return self(**overrides)


@contextmanager
def from_address(client: TestClient, host: str) -> Iterator[TestClient]:
    """`client`'s requests come from `host` meanwhile: the ASGI scope's client address, which
    the server keys anonymous claims by (Starlette's test transport sets it per client; the
    app, its event loop and its writer stay the same)."""
    transport = client._transport  # the one place the test transport keeps the address
    before = transport.client
    transport.client = (host, 50000)
    try:
        yield client
    finally:
        transport.client = before


def create(client: TestClient | httpx.Client, config: dict[str, Any], query: str = "") -> str:
    """Create a run (admin) and return its id."""
    resp = client.post(f"/v1/runs{query}", json=config, headers=AUTH)
    assert resp.status_code == 201, resp.text
    return RunInfo.model_validate(resp.json()).id


def create_at(url: str, config: dict[str, Any]) -> str:
    """Create a run (admin) on the real server at `url` and return its id."""
    with httpx.Client(base_url=url, timeout=30) as http:
        return create(http, config)


def claim(client: TestClient, run_id: str, **params: Any) -> dict[str, Any]:
    """A successful claim's Ticket JSON."""
    resp = client.post(f"/v1/runs/{run_id}/claims", params=params)
    assert resp.status_code == 200, resp.text
    Ticket.model_validate(resp.json())
    return resp.json()


def play(client: TestClient, run_id: str, config: dict[str, Any], episodes: int,
         mdp: TabularMDP | Any = None) -> list[dict]:
    """Claim and report `episodes` episodes as honest users of `mdp` (default: the config's
    RiverSwim); the Acks."""
    mdp, acks = world(config) if mdp is None else mdp, []
    for _ in range(episodes):
        ticket = claim(client, run_id)
        resp = client.post(f"/v1/runs/{run_id}/reports", json=user_report(ticket, config, mdp))
        assert resp.status_code == 200, resp.text
        acks.append(resp.json())
    return acks


def state(client: TestClient, run_id: str) -> dict[str, Any]:
    """Public snapshot of a run."""
    return snapshot(client.get, run_id)


def assert_refused_unchanged(client: TestClient, run_id: str,
                             cases: list[tuple[str, dict[str, Any], str]]) -> None:
    """Each (name, bad report, fragment) is a 422 naming the fragment and changes nothing."""
    url = f"/v1/runs/{run_id}/reports"
    before = state(client, run_id)
    for name, bad, fragment in cases:
        resp = client.post(url, json=bad)
        assert resp.status_code == 422, (name, resp.text)
        assert fragment in resp.json()["detail"], (name, resp.json())
        assert state(client, run_id) == before, name


def interleaved(
    client: TestClient, run_id: str, config: dict[str, Any], rounds: int, seed: int
) -> None:
    """Concurrent-style traffic: several claims out at once, reported in a shuffled order."""
    rng = np.random.default_rng(seed)
    mdp = world(config)
    for _ in range(rounds):
        tickets = [claim(client, run_id) for _ in range(int(rng.integers(1, 4)))]
        for i in rng.permutation(len(tickets)):
            body = user_report(tickets[i], config, mdp, client_seed=7)
            resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
            assert resp.status_code == 200, resp.text


# How the high-water mark beside a database is lost, and the 503 code a run it held answers.
MARK_DAMAGE = {"deleted": "mark_missing", "truncated": "mark_missing",
               "garbage": "mark_unreadable", "bad_checksum": "mark_unreadable",
               "foreign": "mark_foreign"}


def damage_marks(db: Path, how: str) -> None:
    """Lose the high-water mark of `db` as `how` (a key of MARK_DAMAGE) says: both files
    deleted, truncated to 0 bytes, overwritten with garbage, their checksums wrong, or the same
    marks written for another database."""
    highwater = HighWater.beside(db)
    marks, paths = dict(highwater.marks), highwater.paths
    assert marks and highwater.state == "ok", "nothing to damage"
    for path in paths:
        if how == "truncated":
            path.write_bytes(b"")
        elif how == "garbage":
            path.write_bytes(b"\x00not a mark\xff")
        elif how == "bad_checksum" and path.stat().st_size:
            data = json.loads(path.read_text())
            path.write_text(json.dumps({**data, "crc": data["crc"] ^ 1}))
        elif how in ("deleted", "foreign"):
            path.unlink(missing_ok=True)
    if how == "foreign":
        other = HighWater.beside(db, "another database")
        for run_id, mark in marks.items():
            other.set(run_id, mark)
        other.close()
