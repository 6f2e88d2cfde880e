"""`privrl audit server` against real server processes, as an outsider with public routes only.

An honest server shows nothing for JDP runs (on the smoothed tree and on the matrix counter) and
an LDP run (while users report, so the noise test runs); a deliberately leaky server
(tests/support/leaky_plugin.py: a route that shows the run's noise seed as a "build id") is
caught; seeds that people type are found as guesses, for the server's noise (JDP) and for the
users' noise (LDP).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.client import run_cli
from support.server import REPO, LiveServer, create_at, spec, user_report, world

pytestmark = pytest.mark.slow  # every test here starts real server processes and the audit CLI

K = 400  # long enough that users are still reporting while the auditor polls
# the practical preset's JDP counter under Gaussian seeded integer noise: the matrix counter
GAUSSIAN = {"mechanism": "gaussian", "delta": 1e-5}


def specs(episodes: int) -> dict[str, dict[str, Any]]:
    """Runs with the server's own secret seed: JDP on the smoothed tree (Laplace) and on the
    matrix counter (Gaussian), and LDP."""
    return {"jdp": spec("jdp", episodes=episodes, seed=None),
            "matrix": spec("jdp", episodes=episodes, seed=None, **GAUSSIAN),
            "ldp": spec("ldp", episodes=episodes, seed=None)}


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("honest")
    with LiveServer(base / "db.sqlite", base / "log") as live:
        yield live


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("leaky")
    env = {"PRIVRL_PLUGINS": "support.leaky_plugin",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    with LiveServer(base / "db.sqlite", base / "log", env=env) as live:
        yield live


def play(server: LiveServer, run_id: str, config: dict[str, Any], episodes: int,
         client_seed: int, pause: float = 0.0, stop: threading.Event | None = None) -> int:
    """Honest users, one after the other; the number of episodes reported."""
    mdp, done = world(config), 0
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for _ in range(episodes):
            if stop is not None and stop.is_set():
                break
            ticket = http.post(f"/v1/runs/{run_id}/claims").json()
            body = user_report(ticket, config, mdp, client_seed=client_seed)
            assert http.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
            done += 1
            time.sleep(pause)
    return done


def audit(server: LiveServer, *args: str) -> tuple[int, dict[str, Any]]:
    """`privrl audit server --json` as a real process: exit code and report."""
    done = run_cli("audit", "server", "--server", server.url, "--json", "--seed", "1", *args,
                   timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def checks(report: dict[str, Any], run_id: str) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in report["checks"] if c["run_id"] == run_id}


def test_honest_server_shows_nothing_for_jdp_and_ldp_runs(honest: LiveServer) -> None:
    configs = specs(K)
    runs = {privacy: create_at(honest.url, cfg) for privacy, cfg in configs.items()}
    assert httpx.get(f"{honest.url}/v1/runs/{runs['matrix']}", timeout=30).json()[
        "config"]["counter"] == "matrix"
    seeds = {privacy: secrets.randbits(64) for privacy in runs}  # users' own secret seeds
    for privacy, run_id in runs.items():
        play(honest, run_id, configs[privacy], 20, seeds[privacy])
    stop = threading.Event()
    users = [threading.Thread(target=play, args=(honest, runs[p], configs[p], K - 20, seeds[p],
                                                 0.01, stop)) for p in runs]
    for thread in users:
        thread.start()
    try:
        code, report = audit(honest, *(a for r in runs.values() for a in ("--run", r)),
                             "--polls", "5", "--interval", "0.5")
    finally:
        stop.set()
        for thread in users:
            thread.join()
    assert report["findings"] == [] and code == 0, report
    for run_id in runs.values():
        done = checks(report, run_id)
        assert done["seeds"]["ran"] and "re-derive none" in done["seeds"]["message"], done
        assert done["noise"]["ran"] and "increment" in done["noise"]["message"], done
        assert done["raw-data"]["ran"], done
    assert "users' noise" in checks(report, runs["ldp"])["seeds"]["message"]


def test_leaky_server_is_caught(leaky: LiveServer, honest: LiveServer) -> None:
    """The seed shown by the 'build' route re-derives the JDP noise (the tree's and the matrix
    counter's); the LDP run's noise does not come from the server's seed, so it must not be
    flagged."""
    configs = specs(16)
    runs = {privacy: create_at(leaky.url, cfg) for privacy, cfg in configs.items()}
    for privacy, run_id in runs.items():
        play(leaky, run_id, configs[privacy], 16, secrets.randbits(64))
    code, report = audit(leaky, "--polls", "1")
    assert code == 1
    found = {f["run_id"]: f for f in report["findings"] if f["check"] == "seed"}
    assert set(found) == {runs["jdp"], runs["matrix"]}, report["findings"]
    for name in ("jdp", "matrix"):
        leaked = httpx.get(f"{leaky.url}/v1/runs/{runs[name]}/build", timeout=30).json()
        seed = found[runs[name]]
        assert seed["evidence"]["seed"] == str(leaked["build"]["id"])
        assert seed["where"] == "/v1/runs/{run_id}/build"
        assert seed["evidence"]["distance_from_clean_range"] < 1e-6
        assert min(seed["evidence"]["random_seed_distances"]) > 1.0  # the test is decisive
    text = run_cli("audit", "server", "--server", leaky.url, "--run", runs["jdp"], "--polls", "1")
    assert text.returncode == 1 and "FOUND seed" in text.stdout and "/build" in text.stdout
    assert "/build" not in httpx.get(f"{honest.url}/openapi.json", timeout=30).text


def test_seeds_people_type_are_found(honest: LiveServer) -> None:
    """An admin's --seed 7 (server noise) and users started with --seed 5 (their noise)."""
    jdp_cfg, ldp_cfg = spec("jdp", episodes=12, seed=7), spec("ldp", episodes=12, seed=None)
    jdp, ldp = create_at(honest.url, jdp_cfg), create_at(honest.url, ldp_cfg)
    play(honest, jdp, jdp_cfg, 12, secrets.randbits(64))
    play(honest, ldp, ldp_cfg, 12, client_seed=5)
    code, report = audit(honest, "--run", jdp, "--run", ldp, "--polls", "1")
    assert code == 1
    found = {f["run_id"]: f for f in report["findings"] if f["check"] == "seed"}
    assert set(found) == {jdp, ldp}, report["findings"]
    assert found[jdp]["evidence"]["seed"] == "7" and "run's noise" in found[jdp]["message"]
    assert found[ldp]["evidence"]["seed"] == "5" and "users' noise" in found[ldp]["message"]


def test_usage_errors_are_one_line(honest: LiveServer) -> None:
    for args, pattern in ((("--server", "not a url"), "invalid server URL"),
                          (("--server", honest.url, "--run", "nope"), "not found"),
                          (("--server", honest.url, "--alpha", "2"), "expected a number in"),
                          (("--server", honest.url, "--seed-budget", "0"), "seconds > 0")):
        done = run_cli("audit", "server", *args, timeout=60)
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert "Traceback" not in done.stderr and pattern in lines[-1], done.stderr


def test_each_phase_prints_a_progress_line_on_stderr(honest: LiveServer) -> None:
    """The audit takes tens of seconds: it says what it is doing, on stderr (stdout: the report)."""
    config = spec("jdp", episodes=20, seed=None)
    run_id = create_at(honest.url, config)
    play(honest, run_id, config, 20, secrets.randbits(64))
    done = run_cli("audit", "server", "--server", honest.url, "--json", "--run", run_id,
                   "--polls", "1", "--interval", "0.1", "--guesses", "1", "--seed-budget", "1",
                   timeout=300)
    lines = done.stderr.splitlines()
    assert all(line.startswith("privrl audit server: ") for line in lines), done.stderr
    phases = ["reading the public routes", "billboard", "searching",
              f"run {run_id}: trying seeds"]
    at = [next(i for i, line in enumerate(lines) if phase in line) for phase in phases]
    assert at == sorted(at), lines
    assert json.loads(done.stdout)["checks"], done.stdout  # stdout holds only the report
