"""`privrl audit proxy`: a real proxy process between real users and a real server (loopback).

Honest JDP and LDP traffic passes (JDP trajectories are expected: the server is the trusted
curator); a JDP-style trajectory sent to an LDP run, and an LDP report whose arrays are clean
0/1 counts (which the server itself accepts), are flagged, and the proxy exits 1 when stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.client.audit.proxy import (
    WireLog,
    describe,
    split_run_path,
    whole_number_arrays,
)
from privrl.client.procs import free_port
from privrl.client.users import run_users
from privrl.run import user_episode
from support.client import run_cli
from support.proxy import Proxy
from support.server import LiveServer, create_at, public, spec, world


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("proxied")
    with LiveServer(base / "db.sqlite", base / "log") as live:
        yield live


@pytest.mark.slow
def test_honest_traffic_passes(server: LiveServer, tmp_path: Path) -> None:
    proxy = Proxy(server.url, tmp_path / "wire.jsonl")
    try:
        runs = {}
        for privacy in ("jdp", "ldp"):
            config = spec(privacy, episodes=24, seed=None)
            runs[privacy] = create_at(proxy.url, config)  # the admin, through the proxy
            swarm = asyncio.run(run_users(proxy.url, runs[privacy], None, 4, None, world(config),
                                          progress=False))
            assert swarm.reported == 24 and swarm.refused == 0
        live = proxy.report()
        leaks = [f for f in live["findings"] if f["check"] == "float-noise"]  # the float backend
        assert [f for f in live["findings"] if f not in leaks] == []  # test_audit_float_noise
        traffic = live["summary"]["traffic"]["runs"]
        ldp = traffic[runs["ldp"]]["routes"]["POST /v1/runs/{run_id}/reports"]
        assert ldp["requests"] == 24 and set(ldp["statuses"]) == {"200"}
        assert set(ldp["fields"]) == {"kind", "ticket", "arrays.sas", "arrays.r"}
        assert ldp["fields"]["arrays.sas"] == ["list[float] x160"]  # H*S*A*S, every entry
        jdp = traffic[runs["jdp"]]["routes"]["POST /v1/runs/{run_id}/reports"]
        assert {"states", "actions", "rewards"} <= set(jdp["fields"])  # expected in JDP
        code, final, err = proxy.stop()
    finally:
        proxy.kill()
    others = [f for f in final["findings"] if f["check"] != "float-noise"]
    assert code == (1 if leaks else 0) and others == [], (final, err)
    passed = {c["run_id"]: c for c in final["checks"] if c["check"] == "ldp-report"}
    assert "24 reports carry only noisy arrays" in passed[runs["ldp"]]["message"]
    lines = [json.loads(x) for x in (tmp_path / "wire.jsonl").read_text().splitlines()]
    assert sum(x["route"] == "/v1/runs/{run_id}/reports" for x in lines) == 48
    assert all(x["flags"] == [] for x in lines)


@pytest.mark.slow
def test_raw_statistics_in_an_ldp_run_are_flagged(server: LiveServer, tmp_path: Path) -> None:
    config = spec("ldp", episodes=10, seed=None)
    run_id = create_at(server.url, config)  # created behind the proxy's back: it asks the server
    cfg, mdp = public(config), world(config)
    proxy = Proxy(server.url, tmp_path / "wire.jsonl")
    try:
        with httpx.Client(base_url=proxy.url, timeout=30) as http:
            ticket = http.post(f"/v1/runs/{run_id}/claims").json()
            policy = np.asarray(ticket["policy"]["actions"], dtype=np.int64)[None]
            traj, _ = user_episode(mdp, {"actions": policy}, [9], ticket["episode"],
                                   bind(cfg), bind(cfg).calibration(), nonces=[0])
            jdp_style = {"kind": "trajectory", "ticket": ticket["ticket"],
                         "states": traj.states[0].tolist(), "actions": traj.actions[0].tolist(),
                         "rewards": traj.rewards[0].tolist()}
            refused = http.post(f"/v1/runs/{run_id}/reports", json=jdp_style)
            assert refused.status_code == 422  # the server refuses it, but it crossed the wire
            clean = bind(cfg).user_statistics(traj, {"actions": policy})
            forgot = {"kind": "noisy", "ticket": ticket["ticket"],
                      "arrays": {n: a[0].ravel().astype(float).tolist() for n, a in clean.items()}}
            accepted = http.post(f"/v1/runs/{run_id}/reports", json=forgot)
            assert accepted.status_code == 200  # clean counts lie inside the acceptance bounds
        code, final, err = proxy.stop()
    finally:
        proxy.kill()
    assert code == 1, (final, err)
    messages = [f["message"] for f in final["findings"] if f["run_id"] == run_id]
    assert len(messages) == 2, messages  # one finding per report, naming every reason
    assert "raw trajectory" in messages[0] and "raw fields states, actions" in messages[0]
    assert "whole numbers (clean counts, not randomized values): arrays.sas" in messages[1]
    assert final["runs"][run_id].startswith("ldp run, 2 reports of ")


@pytest.mark.slow
def test_usage_errors(server: LiveServer) -> None:
    port = server.url.rsplit(":", 1)[1]  # already bound: by the server
    for args, pattern in (
        (("--listen", port, "--upstream", server.url), "cannot listen on 127.0.0.1:"),
        (("--listen", str(free_port()), "--upstream", "ftp://x"), "invalid server URL"),
        (("--listen", "0", "--upstream", server.url), "port must be in 1..65535"),
    ):
        done = run_cli("audit", "proxy", *args, timeout=60)
        assert done.returncode == 2 and pattern in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_wire_log_checks_in_process() -> None:
    wire = WireLog("http://upstream")
    wire.run("r").privacy = "ldp"
    noisy = {"kind": "noisy", "ticket": "t" * 16, "arrays": {"sas": [0.5, -1.25], "r": [2.5]}}
    assert wire.record("POST", "/v1/runs/r/reports", "r", "/v1/runs/{run_id}/reports",
                       json.dumps(noisy).encode(), 200, b"{}") == []
    longer = {**noisy, "arrays": {"sas": [0.5, -1.25, 3.5], "r": [2.5]}}
    flags = wire.record("POST", "/v1/runs/r/reports", "r", "/v1/runs/{run_id}/reports",
                        json.dumps(longer).encode(), 200, b"{}")
    assert any("differ from the run's first report" in f for f in flags)
    seeded = {**noisy, "seed": 7}
    flags = wire.record("POST", "/v1/runs/r/reports", "r", "/v1/runs/{run_id}/reports",
                        json.dumps(seeded).encode(), 200, b"{}")
    assert any("seed-like fields seed" in f for f in flags)
    answer = json.dumps({"episode": 1, "rng_state": 123}).encode()
    flags = wire.record("POST", "/v1/runs/q/claims", "q", "/v1/runs/{run_id}/claims", b"", 200,
                        answer)
    assert any("seed-like field rng_state" in f for f in flags)
    assert split_run_path("/v1/runs/abc/reports") == ("abc", "/v1/runs/{run_id}/reports")
    assert split_run_path("/v1/runs") == (None, "/v1/runs")
    assert describe({"a": [1, 2.5], "b": {"c": "x"}}) == {"a": "list[float|int] x2", "b.c": "str"}
    assert whole_number_arrays({"x": [1.0, 0.0], "y": [0.5, 1.0]}) == ["x"]
