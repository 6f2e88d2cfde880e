"""A real headless Locust run (FastHttpUser users playing real LDP episodes with the project's
own user code) against a real server process: its CSV matches what the server ingested."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from privrl.client.api import ServerAPI
from privrl.client.procs import child_env
from support.client import config_for, create_run, run_cli, start_server

pytestmark = pytest.mark.slow  # every test here starts a real server and a Locust process


def rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open() as f:
        return {row["Name"]: row for row in csv.DictReader(f)}


def test_headless_locust_plays_every_episode_and_its_csv_matches_the_server(
        tmp_path: Path) -> None:
    episodes = 150
    locustfile = run_cli("locustfile").stdout.strip()
    assert Path(locustfile).is_file()
    server = start_server(tmp_path / "srv")  # started: stop it, do not `with` it (starts again)
    try:
        run_id = create_run(server, config_for("ldp", episodes=episodes), seed=2)
        prefix = tmp_path / "csv" / "load"
        cmd = [sys.executable, "-m", "locust", "-f", locustfile, "--headless", "-u", "10",
               "-r", "10", "--run-time", "90s", "--stop-timeout", "15", "--csv", str(prefix),
               "--host", server.url, "--privrl-run", run_id, "--only-summary"]
        done = subprocess.run(cmd, env=child_env({"PRIVRL_CLIENT_SEED": "7"}), timeout=150,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        with ServerAPI(server.url) as api:
            status = api.get_run(run_id).status
    finally:
        server.stop()
    stats = rows(Path(f"{prefix}_stats.csv"))
    assert int(stats["claim"]["Request Count"]) >= episodes
    assert int(stats["report"]["Request Count"]) == episodes == status.reported
    assert status.finished and status.outstanding == 0
    assert all(int(r["Failure Count"]) == 0 for r in stats.values()), stats
    with Path(f"{prefix}_failures.csv").open() as f:
        assert len(f.read().strip().splitlines()) == 1  # the header only
    assert float(stats["report"]["Average Content Size"]) > 0


def test_the_package_never_imports_locust() -> None:
    code = ("import sys, privrl, privrl.client.cli, privrl.client.load.cli,"
            " privrl.client.load.swarm, privrl.client.load.report, privrl.server.app;"
            "privrl.client.cli.build_parser();"
            "bad = [m for m in ('locust', 'gevent', 'geventhttpclient') if m in sys.modules];"
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
