"""Correctness under load: a real server process, many concurrent users over real HTTP.

After a load run the server's count of ingested episodes equals the acknowledgements the users
received (nothing lost, nothing counted twice), also when the server is overloaded on purpose
(tiny admission and in-flight limits, so 429 and 503 really happen and are retried) and when
user processes are killed mid-episode (their claims expire and the slots are handed out again).
No report is refused for lateness.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path

import httpx
import pytest
from privrl.client.api import ServerAPI
from privrl.client.procs import ServerProcess, module_cmd, spawn
from privrl.client.users import run_users
from support.client import MDP, TOKEN, config_for, create_run

pytestmark = pytest.mark.slow  # every test here starts a real server and users' processes


def counters(text: str, name: str) -> dict[str, float]:
    """Label text -> value of one Prometheus counter family."""
    pattern = re.compile(rf"^{name}(\{{.*\}})? (\S+)$", re.M)  # a route label holds braces
    return {labels or "": float(value) for labels, value in pattern.findall(text)}


def status_of(url: str, run_id: str) -> dict:
    """The run's public status."""
    return httpx.get(f"{url}/v1/runs/{run_id}", timeout=10).json()["status"]


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_an_overloaded_server_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path, privacy: str
) -> None:
    """24 users against limits of 2 outstanding claims, 1 waiting and 4 claims in flight."""
    env = {"PRIVRL_MIN_OUTSTANDING": "2", "PRIVRL_MAX_OUTSTANDING": "2",
           "PRIVRL_MAX_WAITING": "1", "PRIVRL_MAX_IN_FLIGHT": "4"}
    config = config_for(privacy, episodes=60, epsilon=10.0)
    with ServerProcess(tmp_path / "db.sqlite", TOKEN, env=env,
                       log_path=tmp_path / "server.log") as server:
        run_id = create_run(server, config)
        result = asyncio.run(run_users(server.url, run_id, None, 24, 7, MDP, progress=False,
                                       keep_outcomes=True))
        status = status_of(server.url, run_id)
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    episodes = [o.episode for o in result.outcomes]
    assert result.finished and result.refused == 0 and not result.errors
    assert status["finished"] and status["reported"] == 60
    assert len(episodes) == len(set(episodes)) == result.reported == 60  # one ack per episode
    refused = counters(metrics, "privrl_claims_refused_total")
    overload = [refused.get(f'{{reason="{r}"}}', 0) for r in ("admission", "overloaded")]
    assert sum(overload) >= 20, refused  # 429s and 503s happened, and were waited out
    assert counters(metrics, "privrl_reports_accepted_total")[f'{{run="{run_id}"}}'] == 60
    assert "privrl_reports_refused_total{" not in metrics  # none late, none refused at all
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log
    answers = counters(metrics, "privrl_responses_total")  # no 5xx but the 503 of overload
    assert not [k for k in answers if re.search(r'status="5(?!03)\d\d"', k)], answers
    # every 503 but /readyz's (not ready while the kernels load) is an overloaded claim's
    assert sum(v for k, v in answers.items()
               if 'status="503"' in k and "readyz" not in k) == refused.get(
        '{reason="overloaded"}', 0)
    commits = counters(metrics, "privrl_store_commits_total")[""]
    groups = counters(metrics, "privrl_store_commit_groups_total")[""]
    assert groups >= 120 and commits <= groups  # every claim and report went through the writer


def test_users_killed_mid_episode_leave_slots_that_are_handed_out_again(tmp_path: Path) -> None:
    """Two `privrl users` processes are SIGKILLed while they hold claims; the claims lapse
    (1 s), a third process finishes the run, and the run counts each episode exactly once."""
    episodes = 400  # far more than the users play between the check and the kill below
    config = config_for("jdp", episodes=episodes, epsilon=10.0)
    with ServerProcess(tmp_path / "db.sqlite", TOKEN, claim_timeout=1.0,
                       log_path=tmp_path / "server.log") as server:
        run_id = create_run(server, config)
        users = ["users", "--server", server.url, "--run", run_id, "--concurrency", "12",
                 "--quiet", "--env", "riverswim"]
        procs = [spawn(module_cmd("privrl.client", *users, "--seed", str(i)),
                       log_path=tmp_path / f"users{i}.log") for i in range(2)]
        try:
            deadline = time.monotonic() + 60
            while status_of(server.url, run_id)["reported"] < 20:
                assert time.monotonic() < deadline, "the users made no progress"
                assert all(p.poll() is None for p in procs), "a users process ended early"
                time.sleep(0.02)
            held = status_of(server.url, run_id)["outstanding"]
            for p in procs:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        assert held > 0  # killed mid-episode: they held claims
        deadline = time.monotonic() + 60  # every claim of the killed users lapses (1 s after it
        while status_of(server.url, run_id)["outstanding"]:  # was handed out, in-flight ones too)
            assert time.monotonic() < deadline, "claims of killed users never lapsed"
            time.sleep(0.1)
        before = status_of(server.url, run_id)
        assert before["outstanding"] == 0 and not before["finished"]
        result = asyncio.run(run_users(server.url, run_id, None, 12, 99, MDP, progress=False,
                                       keep_outcomes=True))
        after = status_of(server.url, run_id)
        with ServerAPI(server.url) as api:
            log = api.policies(run_id)  # every page
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    assert result.finished and result.refused == 0
    assert result.reported == episodes - before["reported"]  # the acks of the last users: the rest
    assert after["reported"] == episodes
    assert after["claimed"] > episodes  # lapsed slots handed out again
    served = log.served.values()
    assert sum(s.reported for s in served) == episodes and sum(s.expired for s in served)
    assert counters(metrics, "privrl_reports_accepted_total")[f'{{run="{run_id}"}}'] == episodes
