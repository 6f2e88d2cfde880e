"""Stalled uploads against a real server process: it closes them in time and its memory stays
bounded (`privrl.server.limits`; the full-size figure: scripts/load/stalled_uploads.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from privrl.client.load.stalled import stall_many
from privrl.client.procs import rss_bytes
from support.server import LiveServer, create, spec

pytestmark = pytest.mark.slow  # starts a real server process

CONNECTIONS = 40
DECLARED = 2_000_000  # each sends half: 40 MB in all, were the bodies kept
BUDGET = 4 * 1024 * 1024


def test_stalled_uploads_are_closed_and_hold_bounded_memory(tmp_path: Path) -> None:
    env = {"PRIVRL_BODY_TIMEOUT": "1", "PRIVRL_MAX_BODY_BUFFER_BYTES": str(BUDGET)}
    with LiveServer(tmp_path / "s.db", tmp_path / "s.log", env=env) as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        run_id = create(http, spec())
        http.get("/healthz").raise_for_status()
        before = rss_bytes(server.proc.pid)
        peak = [before]

        async def attack(path: str) -> list:
            async def sample() -> None:
                while True:
                    peak[0] = max(peak[0], rss_bytes(server.proc.pid))
                    await asyncio.sleep(0.05)

            sampler = asyncio.ensure_future(sample())
            try:
                return await stall_many("127.0.0.1", server.port, path, CONNECTIONS, DECLARED,
                                        DECLARED // 2, hold=30)
            finally:
                sampler.cancel()

        started = time.monotonic()
        # /v1/runs: only the global cap applies, so the budget and the timeout do the work
        ended = asyncio.run(attack("/v1/runs"))
        assert time.monotonic() - started < 60
        # a refusal at the headers (503: the budget is in use) closes a socket the client is
        # still writing to, so the client often sees a reset instead of the answer
        statuses = {e.status for e in ended}
        assert statuses <= {"408", "503", "reset"} and "408" in statuses, statuses
        assert all(e.after is not None and e.after < 30 for e in ended)
        assert peak[0] - before < 24 * 1024 * 1024, (before, peak[0])  # were bodies kept: 40 MB
        # a report of the run: refused at its headers (its run caps it far below 2 MB)
        ended = asyncio.run(attack(f"/v1/runs/{run_id}/reports"))
        assert {e.status for e in ended} <= {"413", "reset"}
        assert all(e.after is not None and e.after < 30 for e in ended)
        assert http.get("/healthz").status_code == 200
        assert rss_bytes(server.proc.pid) - before < 24 * 1024 * 1024
