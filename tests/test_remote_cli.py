"""`privrl runs | users | evaluate | demo`: clear one-line errors, and the demo end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from privrl.client.procs import child_env, free_port, module_cmd
from privrl.client.remote_cli import DEMO_EPSILON
from support.client import TOKEN, config_for, create_run, run_cli, start_server
from support.server import default_sigint

pytestmark = pytest.mark.slow  # every test here starts a real server and CLI processes

NO_TOKEN = {k: v for k, v in os.environ.items() if k != "PRIVRL_ADMIN_TOKEN"}


def assert_clear_error(done: subprocess.CompletedProcess, pattern: str) -> None:
    """Exit code 2, one 'privrl: error:' line, no traceback."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("privrl: error:"), done.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("cli"))
    yield proc
    proc.stop()


def test_runs_create_without_token() -> None:
    done = subprocess.run(module_cmd("privrl.client", "runs", "create", "--server", "http://127.0.0.1:9",
                                     "--episodes", "10"),
                          env={**child_env(), "PRIVRL_ADMIN_TOKEN": ""}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert_clear_error(done, "PRIVRL_ADMIN_TOKEN")


@pytest.mark.parametrize(("url", "pattern"), [
    ("not a url", "invalid server URL"),
    ("ftp://example.org", "invalid server URL"),
    ("http://127.0.0.1:{closed}", "cannot reach the server"),
])
def test_bad_or_unreachable_server(url: str, pattern: str) -> None:
    url = url.format(closed=free_port())
    for args in (("runs", "list", "--server", url),
                 ("users", "--server", url, "--run", "x", "--users", "1", "--quiet"),
                 ("evaluate", "--server", url, "--run", "x")):
        assert_clear_error(run_cli(*args, timeout=60), pattern)


def test_bad_run_id_and_wrong_token(server) -> None:
    for args in (("runs", "show", "no-such-run", "--server", server.url),
                 ("users", "--server", server.url, "--run", "no-such-run", "--quiet"),
                 ("evaluate", "--server", server.url, "--run", "no-such-run"),
                 ("runs", "delete", "no-such-run", "--server", server.url)):
        assert_clear_error(run_cli(*args, env={"PRIVRL_ADMIN_TOKEN": TOKEN}), "no-such-run")
    done = run_cli("runs", "create", "--server", server.url, "--episodes", "10",
                   env={"PRIVRL_ADMIN_TOKEN": "wrong-token"})
    assert_clear_error(done, "admin token")
    done = run_cli("runs", "create", "--server", server.url, "--privacy", "ldp", "--mechanism",
                   "laplace", "--delta", "0.1", env={"PRIVRL_ADMIN_TOKEN": TOKEN})
    assert_clear_error(done, "delta")


def test_runs_lifecycle_through_the_cli(server, tmp_path: Path) -> None:
    env = {"PRIVRL_ADMIN_TOKEN": TOKEN}
    id_file = tmp_path / "run_id"
    done = run_cli("runs", "create", "--server", server.url, "--privacy", "ldp", "--mechanism",
                   "gaussian", "--episodes", "12", "--seed", "3", "--write-id", str(id_file),
                   env=env)
    assert done.returncode == 0, done.stderr
    assert "one client with many addresses can take its whole window" in done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    assert id_file.read_text().strip() == run_id
    shown = json.loads(run_cli("runs", "show", run_id, "--server", server.url, "--json").stdout)
    assert shown["config"]["privacy"] == "ldp" and "seed" not in shown["config"]
    assert run_id in run_cli("runs", "list", "--server", server.url).stdout
    done = run_cli("users", "--server", server.url, "--run-file", str(id_file), "--concurrency",
                   "3", "--seed", "1", "--quiet", "--json-out", str(tmp_path / "u.json"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "u.json").read_text())
    assert summary["reported"] == 12 and summary["finished"]
    assert summary["report_bytes_min"] == summary["report_bytes_max"]
    done = run_cli("evaluate", "--server", server.url, "--run", run_id)
    assert done.returncode == 0 and "12 episodes served" in done.stdout, done.stderr
    assert run_cli("runs", "delete", run_id, "--server", server.url, env=env).returncode == 0
    assert_clear_error(run_cli("runs", "show", run_id, "--server", server.url), run_id)


def test_runs_that_require_credentials_through_the_cli(server, tmp_path: Path) -> None:
    """`runs create --credentials`, `runs credentials RUN --out FILE`, `users --credentials`."""
    env = {"PRIVRL_ADMIN_TOKEN": TOKEN}
    done = run_cli("runs", "create", "--server", server.url, "--privacy", "jdp", "--mechanism",
                   "laplace", "--episodes", "8", "--credentials", env=env)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    assert f"privrl runs credentials {run_id}" in done.stderr and "warning" not in done.stderr
    shown = json.loads(run_cli("runs", "show", run_id, "--server", server.url, "--json").stdout)
    assert shown["credentials"] is True
    keys = tmp_path / "credentials"
    done = run_cli("runs", "credentials", run_id, "--count", "3", "--out", str(keys),
                   "--server", server.url, env=env)
    assert done.returncode == 0, done.stderr
    tokens = keys.read_text().split()
    assert len(set(tokens)) == 3 and all(run_id in t for t in tokens)
    assert_clear_error(run_cli("runs", "credentials", run_id, "--server", server.url),
                       "PRIVRL_ADMIN_TOKEN")
    done = run_cli("users", "--server", server.url, "--run", run_id, "--quiet")
    assert_clear_error(done, "requires user credentials")
    done = run_cli("users", "--server", server.url, "--run", run_id, "--credentials", str(keys),
                   "--concurrency", "3", "--seed", "2", "--quiet")
    assert done.returncode == 0 and "8 episodes reported" in done.stdout, done.stderr


def test_users_world_must_match_the_run(server) -> None:
    run_id = create_run(server, config_for("jdp", "laplace", episodes=5))
    done = run_cli("users", "--server", server.url, "--run", run_id, "--horizon", "10",
                   "--quiet")
    assert_clear_error(done, "world")


def test_demo_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = run_cli("demo", "--episodes", "40", "--schedule", "batch:10", "--users-processes",
                   "2", "--concurrency", "2", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(ln.startswith("non-private pooled") for ln in lines)
    for mode in ("jdp", "secagg", "ldp"):  # every private run at the demo's budget
        assert any(ln.startswith(f"{mode} eps={DEMO_EPSILON:g} gaussian pooled") for ln in lines)
    assert (out / "regret.png").stat().st_size > 0
    results = json.loads((out / "summary.json").read_text())["results"]
    assert [r["config"]["privacy"] for r in results] == ["none", "jdp", "secagg", "ldp"]
    for r in results:  # three seeds (the default): a regret row and a run id per seed
        assert r["http"]["episodes"] == 3 * 40 and len(r["run_ids"]) == 3
        assert [len(row) for row in r["regret"]["per_episode"]] == [40] * 3
    # secure aggregation: cohorts of 10 (the largest divisor of K up to 10), all 3 x 4 released,
    # its assumptions under the table
    cohorts = results[2]["cohorts"]
    assert (cohorts["size"], cohorts["dropout"], cohorts["collusion"]) == (10, 0.1, 0.1)
    assert cohorts["counts"] == {"released": 12, "refused": 0, "aborted": 0, "in_flight": 0}
    assert ("secagg eps=3 gaussian pooled B=10: cohorts of 10, dropout <= 0.1, collusion <= 0.1"
            in done.stdout)
    assert "cohorts released 12, refused 0, aborted 0" in done.stdout
    assert "so the server sees only sums of 10 users" in done.stdout
    assert "each run's verdict (3 seeds per configuration)" in done.stdout
    assert re.search(r"JDP is at \d+% \[-?\d+, \d+\] of random", done.stdout), done.stdout
    sizes = {r["config"]["privacy"]: r["http"]["report_bytes"] for r in results}
    assert sizes["ldp"] > sizes["jdp"]  # pooled: S*A*S + S*A packed noisy numbers vs H packed steps
    for r in results[1:]:  # the budget is a limit, and every private run spent it
        assert r["ledger"]["epsilon"] == pytest.approx(DEMO_EPSILON, rel=1e-6)
    url = re.search(r"server at (http://[\d.:]+)", done.stderr).group(1)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz", timeout=2)


def test_demo_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        module_cmd("privrl.client", "demo", "--episodes", "100000", "--users-processes", "1",
                   "--out", str(tmp_path / "demo")),
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group: a failing test kills server and users too
        preexec_fn=default_sigint,
    )
    try:
        url, deadline = None, time.monotonic() + 60
        assert proc.stderr is not None
        while time.monotonic() < deadline and url is None:
            line = proc.stderr.readline()
            assert line, "the demo ended before it started its server"
            found = re.search(r"server at (http://[\d.:]+)", line)
            url = found.group(1) if found else None
        assert url, "the demo never started its server"
        while "runs side by side" not in (line := proc.stderr.readline()):
            assert line, "the demo ended before its runs started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)  # generous: CI machines can be loaded
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz", timeout=2)
