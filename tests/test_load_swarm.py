"""Swarms at scale: the bounded metered transport, shares over processes, and a real
multi-process `privrl users --processes` run whose report matches the server's count."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from privrl.client.api import ServerAPI
from privrl.client.load.meter import BoundedTransport, Meter, endpoint_of
from privrl.client.load.report import latency, one_line, swarm_report
from privrl.client.load.swarm import shares, split
from privrl.client.users import Backoff
from support.client import MDP, config_for, create_run, run_cli, start_server


def test_split_and_shares_keep_every_user_and_the_users_seed() -> None:
    assert split(10, 3) == [4, 3, 3] and sum(split(1000, 7)) == 1000
    parts = shares("http://x", "r", 101, 1000, 4, 16, 99, MDP, Backoff(), None)
    assert [p.index for p in parts] == [0, 1, 2, 3]
    assert sum(p.users for p in parts) == 101 and sum(p.concurrency for p in parts) == 1000
    assert {p.seed for p in parts} == {99}  # user k draws from (99, 'user', k) in any process
    assert shares("http://x", "r", None, 3, 8, 16, 1, MDP, Backoff(), None)[-1].index == 2
    assert all(p.connections == 2 for p in shares("http://x", "r", None, 4, 2, 16, 1, MDP,
                                                  Backoff(), None))


def test_endpoint_names() -> None:
    assert endpoint_of("/v1/runs/abc/claims") == "claim"
    assert endpoint_of("/v1/runs/abc/reports") == "report"
    assert endpoint_of("/healthz") == "healthz"
    assert endpoint_of("/v1/runs/abc") == "other"


def test_bounded_transport_caps_requests_in_flight_per_kind() -> None:
    in_flight = {"claim": 0, "other": 0}
    peak = {"claim": 0, "other": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        kind = "claim" if request.url.path.endswith("/claims") else "other"
        in_flight[kind] += 1
        peak[kind] = max(peak[kind], in_flight[kind])
        await asyncio.sleep(0.002)
        in_flight[kind] -= 1
        status = 409 if kind == "claim" else (410 if "bad" in request.url.path else 200)
        return httpx.Response(status, json={})

    meter = Meter()
    transport = BoundedTransport(3, meter, inner=httpx.MockTransport(handler))

    async def main() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            await asyncio.gather(*(http.post(p) for p in ["/v1/runs/r/claims"] * 40
                                   + ["/v1/runs/r/reports"] * 30 + ["/v1/runs/bad/reports"] * 5))

    asyncio.run(main())
    assert peak == {"claim": 3, "other": 3}
    samples = meter.arrays()
    assert samples["seconds"].size == 75 and (samples["seconds"] >= 0.002).all()
    assert dict(meter.errors) == {"claim 409": 40, "report 410": 5}


def test_latency_percentiles_are_ordered() -> None:
    import numpy as np

    lat = latency(np.linspace(0.001, 1.0, 1000))
    assert lat["count"] == 1000
    assert lat["p50_ms"] < lat["p95_ms"] < lat["p99_ms"] < lat["max_ms"] == pytest.approx(1000)


@pytest.mark.slow
@pytest.mark.parametrize("privacy", ["ldp"])
def test_multi_process_swarm_reports_what_the_server_counted(tmp_path: Path,
                                                            privacy: str) -> None:
    episodes = 120
    server = start_server(tmp_path / "srv")  # started: stop it, do not `with` it (starts again)
    try:
        run_id = create_run(server, config_for(privacy, episodes=episodes), seed=1)
        report, png = tmp_path / "report.json", tmp_path / "swarm.png"
        done = run_cli("users", "--server", server.url, "--run", run_id, "--processes", "2",
                       "--concurrency", "12", "--connections", "3", "--seed", "3",
                       "--report", str(report), "--plot", str(png), timeout=180)
        assert done.returncode == 0, done.stderr
        with ServerAPI(server.url) as api:
            status = api.get_run(run_id).status
    finally:
        server.stop()
    body = json.loads(report.read_text())
    assert status.finished and status.reported == episodes
    assert body["acknowledged"] == episodes and body["duplicates"] == 0
    assert body["processes"] == 2 and body["concurrency"] == 12 and body["finished"]
    assert body["errors"] == 0 and body["errors_by_kind"] == {}, body["errors_by_kind"]
    assert body["claims_after_finish_410"] >= 1  # every user stopped on the finished run
    for name in ("claim", "report"):
        lat = body["latency_ms"][name]
        assert lat["count"] >= episodes and 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"]
    assert sum(body["timeline"]["episodes_per_second"]) == episodes  # 1-second buckets
    for name in ("claim", "report"):  # what users waited: the slot and retries included
        user = body["user_latency_ms"][name]
        assert user["count"] == episodes and 0 < user["p50_ms"] <= user["p99_ms"]
    assert body["requests"] == sum(v["count"] for v in body["latency_ms"].values())
    assert f"{episodes} episodes acknowledged" in done.stdout
    assert f"{episodes}/{episodes} acknowledged" in done.stderr  # the aggregated progress line
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_swarm_report_adds_up_the_processes() -> None:
    import numpy as np

    def part(acked: int, start: float) -> dict:
        n = 2 * acked
        return {"summary": {"run_id": "r", "reported": acked, "duplicates": 0, "refused": 0,
                            "finished": False, "started_at": start, "ended_at": start + 4.0,
                            "report_bytes_max": 10, "errors": []},
                "meter": {"ended": np.linspace(start + 0.1, start + 3.9, n),
                          "endpoint": np.tile([0, 1], acked), "status": np.full(n, 200),
                          "seconds": np.full(n, 0.01)},
                "errors": {"report 410": 1, "claim 409": 2}}

    report = swarm_report([part(10, 100.0), part(6, 101.0)], {"processes": 2})
    assert report["acknowledged"] == 16 and report["seconds"] == pytest.approx(5.0)
    assert report["episodes_per_second"] == pytest.approx(16 / 5.0)
    assert report["errors_by_kind"] == {"report 410": 2} and report["claim_waits_409"] == 4
    assert sum(report["timeline"]["episodes_per_second"]) == 16
    assert report["requests_per_second"] == pytest.approx(2 * 16 / 5.0)


def test_refused_claims_are_errors_and_the_line_says_what_users_waited() -> None:
    """Ten claims of which four refused with 429: throughput counts the six answered ones; the
    summary line gives what the users waited (retries included) beside the wire latency."""
    import numpy as np

    status = np.array([200, 429, 200, 429, 200, 429, 200, 429, 200, 200, 200, 200])
    endpoint = np.array([0] * 10 + [1] * 2)
    part = {"summary": {"run_id": "r", "reported": 2, "duplicates": 0, "refused": 0,
                        "finished": False, "started_at": 0.0, "ended_at": 2.0, "retries": 4,
                        "claim_seconds": [1.5, 2.0], "report_seconds": [0.01, 0.02],
                        "report_bytes_max": 10, "errors": []},
            "meter": {"ended": np.linspace(0.1, 1.9, 12), "endpoint": endpoint,
                      "status": status, "seconds": np.full(12, 0.01)},
            "errors": {"claim 429": 4}}
    report = swarm_report([part], {"processes": 1, "concurrency": 2})
    assert report["requests"] == 12 and report["errors"] == 4
    assert report["requests_per_second"] == pytest.approx(8 / 2.0)  # the 429s are not in it
    assert sum(report["timeline"]["errors_per_second"]) == 4
    line = one_line(report)
    assert "8 answered requests/s" not in line and "4 answered requests/s" in line
    assert "users waited p50/p99 claim 1750.0/1995.0 ms" in line and "(4 retries" in line
    assert "on the wire p50/p99 claim 10.0/10.0 ms" in line
