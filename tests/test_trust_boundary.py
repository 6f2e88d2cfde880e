"""The trust boundary, checked from outside the server process.

LDP: every request body the users sent, every line the server logged and every byte and row it
persisted is compared with the users' raw statistics (recomputed here from the same seeds):
none of them appears. JDP: no GET endpoint returns a raw trajectory or a user's raw counts.
Randomness: tickets carry no seed, and the server's answers do not depend on the client seed.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.users import run_users
from privrl.protocol import Ticket
from privrl.seeding import user_generator
from privrl.wire import pack_floats, unpack_floats
from privrl.worlds import draw_uniforms, rollout
from support.client import (
    MDP,
    assert_no_get_returns,
    config_for,
    create_run,
    numeric_lists,
    reference_run,
    sequence_texts,
    start_server,
    walk,
)

pytestmark = pytest.mark.slow  # every test here starts a real server and users' processes

SEED = 11
K = 60


class Recorder:
    """httpx event hooks that keep every request body and every response body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        self.responses: list[tuple[str, str, int, bytes]] = []

    async def on_request(self, request: httpx.Request) -> None:
        self.requests.append((request.method, request.url.path, request.content))

    async def on_response(self, response: httpx.Response) -> None:
        await response.aread()
        req = response.request
        self.responses.append((req.method, req.url.path, response.status_code, response.content))

    @property
    def hooks(self) -> dict[str, list]:
        return {"request": [self.on_request], "response": [self.on_response]}


def swarm(server, run_id: str, seed: int, n_users: int | None, recorder: Recorder,
          concurrency: int = 1):
    return asyncio.run(run_users(server.url, run_id, n_users, concurrency, seed, MDP,
                                 progress=False, event_hooks=recorder.hooks,
                                 keep_outcomes=True))


def db_cells(path: Path) -> Iterator[tuple[str, Any]]:
    """Every cell of every table of the SQLite file (read-only)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in con.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    yield table, cell
    finally:
        con.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("trust"), sequential=True)
    yield proc
    proc.stop()


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_ldp_nothing_raw_reaches_the_server(tmp_path_factory, mechanism: str) -> None:
    tmp = tmp_path_factory.mktemp(f"ldp-{mechanism}")
    server = start_server(tmp, sequential=True)
    try:
        config = config_for("ldp", mechanism, episodes=K)
        run_id = create_run(server, config, seed=SEED)
        rec = Recorder()
        result = swarm(server, run_id, SEED, K, rec)
        assert result.reported == K
        with ServerAPI(server.url) as api:
            log = api.policies(run_id)
            api.get_run(run_id), api.billboard(run_id), api.ledger(run_id)
    finally:
        server.stop()
    ref = reference_run(config, SEED, SEED)
    sizes = {f: int(np.prod(a.shape)) for f, a in ref.raw[0].items()}

    # what the users sent: only tickets and dense noisy arrays, never raw keys or values
    reports = [json.loads(body) for m, path, body in rec.requests if path.endswith("/reports")]
    assert len(reports) == K
    assert len({len(body) for m, path, body in rec.requests if path.endswith("/reports")}) == 1
    for _, path, body in rec.requests:
        if path.endswith("/claims"):
            assert body in (b"", b"{}")
    by_ticket = {json.loads(b)["ticket"]: json.loads(b) for _, p, status, b in rec.responses
                 if p.endswith("/claims") and status == 200}
    for report in reports:
        assert set(report) == {"kind", "ticket", "arrays"} and report["kind"] == "noisy"
        episode = by_ticket[report["ticket"]]["episode"]
        raw, noisy = ref.raw[episode], ref.noisy[episode]
        assert noisy is not None and set(report["arrays"]) == set(noisy)
        for name, values in report["arrays"].items():
            sent = unpack_floats(values)  # packed: base64 of float64, lossless
            assert sent.size == sizes[name]
            np.testing.assert_array_equal(sent, noisy[name].ravel())  # the randomizer's output
            assert not np.isin(sent, (0.0, 1.0)).all()
            # noise on every entry: a sent value equals the clean one only where an integer draw
            # is 0, which has probability about 1 / (2 b), b the scale in grid units
            assert np.mean(sent == raw[name].ravel()) < 0.05
        keys = {k for k, _ in walk(report) if k is not None}
        assert not keys & {"states", "actions", "rewards", "trajectory", "return", "seed"}
    # the policy log is public: the test reads the served policies from it
    for k in range(K):
        np.testing.assert_array_equal(np.asarray(log.versions[log.version_of(k)]),
                                      ref.policies[k])

    # forbidden material: raw sequences as text, raw count arrays as JSON text and as bytes
    texts, blobs = [], []
    for traj, raw in zip(ref.trajectories, ref.raw, strict=True):
        texts += sequence_texts(traj.states[0].tolist()) + sequence_texts(traj.actions[0].tolist())
        for arr in raw.values():
            flat = arr.ravel()
            if not flat.any():  # an all-zero array (no reward: Bernoulli 0s) is in every
                continue  # zero-filled page; its bytes identify nothing
            texts += [json.dumps(flat.tolist()), json.dumps(flat.astype(int).tolist()),
                      pack_floats(flat)]
            blobs += [flat.tobytes(), flat.astype(np.float32).tobytes()]
    raw_arrays = [a.ravel() for raw in ref.raw for a in raw.values()]

    def assert_clean(where: str, text: str, data: bytes) -> None:
        for t in texts:
            assert t not in text, f"a raw statistic appears in {where}"
        for b in blobs:
            assert b not in data, f"raw count bytes appear in {where}"

    sent = [body for _, _, body in rec.requests]
    for body in sent:
        assert_clean("a request body", body.decode(), body)
    log_text = (tmp / "server.log").read_text(errors="replace")
    assert_clean("the server log", log_text, log_text.encode())
    for name in ("privrl.db", "privrl.db-wal"):
        path = tmp / name
        if path.exists():
            data = path.read_bytes()
            assert_clean(name, data.decode("latin-1"), data)
    cells = 0
    for table, cell in db_cells(tmp / "privrl.db"):
        cells += 1
        if isinstance(cell, bytes):
            assert_clean(f"table {table}", cell.decode("latin-1"), cell)
            if len(cell) % 8 == 0 and len(cell) // 8 in sizes.values():
                arr = np.frombuffer(cell, dtype=np.float64)
                assert not np.isin(arr, (0.0, 1.0)).all(), f"an indicator array in {table}"
        elif isinstance(cell, str):
            assert_clean(f"table {table}", cell, cell.encode())
            try:
                doc = json.loads(cell)
            except json.JSONDecodeError:
                continue
            for key, _ in walk(doc):
                assert key not in {"states", "actions", "rewards"} or table == "policies", table
            for arr in numeric_lists(doc):
                if arr.size in sizes.values():
                    assert not np.isin(arr, (0.0, 1.0)).all(), f"an indicator array in {table}"
                    assert not any(arr.shape == r.shape and np.array_equal(arr, r)
                                   for r in raw_arrays), f"a raw array in {table}"
    assert cells > 0


def test_jdp_no_endpoint_returns_raw_reports(server) -> None:
    config = config_for("jdp", "gaussian", episodes=K)
    run_id = create_run(server, config, seed=SEED)
    result = swarm(server, run_id, SEED, K, Recorder())
    assert result.reported == K
    ref = reference_run(config, SEED, SEED)
    sequences = [t.states[0].tolist() for t in ref.trajectories]
    sequences += [t.actions[0].tolist() for t in ref.trajectories]
    sequences += [t.rewards[0].tolist() for t in ref.trajectories]
    raw_arrays = [a.ravel() for raw in ref.raw for a in raw.values()]
    exact = {name: sum(raw[name] for raw in ref.raw).ravel() for name in ref.raw[0]}

    seen = assert_no_get_returns(server, run_id, sequences, raw_arrays + list(exact.values()))
    assert seen >= 6


def test_server_never_sends_user_randomness(server) -> None:
    # the ticket's schema has no field that could carry a seed or a noise stream
    assert not any(re.search("seed|rng|noise|state", f) for f in Ticket.model_fields)
    openapi = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    assert "seed" not in json.dumps(openapi["components"]["schemas"]["Ticket"]).lower()

    config = config_for("jdp", "laplace", episodes=5)
    answers, trajectories = [], []
    for client_seed in (1, 2):
        run_id = create_run(server, config, seed=SEED)  # two identical runs, same server seed
        rec = Recorder()
        result = swarm(server, run_id, client_seed, 1, rec)
        out = result.outcomes[0]
        claim = next(json.loads(b) for m, p, s, b in rec.responses if p.endswith("/claims"))
        assert not re.search("seed|rng", json.dumps(claim).lower())
        for volatile in ("ticket", "run_id", "expires_in"):
            claim.pop(volatile)
        answers.append(claim)
        trajectories.append(out.trajectory.states[0])
        # the trajectory is a function of the client seed, the episode and the policy only
        policy = np.asarray(claim["policy"]["actions"])[None]
        rng = user_generator(client_seed, claim["episode"])
        expected = rollout(MDP, policy, draw_uniforms([rng], MDP.H))
        np.testing.assert_array_equal(out.trajectory.states, expected.states)
    assert answers[0] == answers[1]  # the server's answers up to the rollout are identical
    assert not np.array_equal(trajectories[0], trajectories[1])
