"""The plug-in contract from outside: a toy algorithm defined only in
tests/support/toy_algorithm.py registers and runs in-process and over HTTP, with no change to the
server, users or runner."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import numpy as np
import pytest
import support.toy_algorithm  # noqa: F401  (registers toy-random in this process)
from privrl import algorithms
from privrl.client.cli import main as cli_main
from privrl.client.users import run_users
from privrl.config import RunConfig
from privrl.protocol import PolicyLog
from privrl.run import Run, run_in_process
from privrl.worlds import riverswim
from support.server import AUTH, REPO, LiveServer

MDP = riverswim(6, n_states=4)


def toy_config(privacy: str = "jdp", episodes: int = 12) -> RunConfig:
    return RunConfig(algo="toy-random", n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H,
                     episodes=episodes, privacy=privacy)


def test_the_toy_is_registered_beside_the_built_ins() -> None:
    assert {"dp-ucbvi", "toy-random"} <= set(algorithms.names())
    with pytest.raises(ValueError, match="unknown algorithm 'nope'; registered: .*dp-ucbvi"):
        algorithms.get("nope")


def test_toy_runs_in_process_and_spends_nothing() -> None:
    res = run_in_process(toy_config(episodes=40), MDP, [1, 2])
    assert res.regret.shape == (2, 40) and np.all(res.regret >= -1e-12)
    assert res.policy_versions > 20  # a fresh random policy after (almost) every report
    assert res.ledger.totals(1e-5).epsilon == 0 and len(res.ledger) == 0


def test_an_unsupported_privacy_mode_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="does not support privacy='ldp'; it supports none"):
        algorithms.bind(toy_config("ldp"))
    code = cli_main(["run", "--algo", "toy-random", "--privacy", "ldp", "--episodes", "5",
                     "--seeds", "1", "--quiet", "--out", os.devnull])
    assert code == 2


@pytest.mark.slow
def test_toy_over_http_serves_the_in_process_policies(tmp_path: Path) -> None:
    """A real server process loads the plug-in from PRIVRL_PLUGINS; real users play it."""
    env = {"PRIVRL_PLUGINS": "support.toy_algorithm",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    config = toy_config()
    with LiveServer(tmp_path / "db.sqlite", tmp_path / "log", "--sequential", env=env) as server:
        body = {**config.model_dump(mode="json"), "seed": 5}
        resp = httpx.post(f"{server.url}/v1/runs", json=body, headers=AUTH, timeout=30)
        assert resp.status_code == 201, resp.text
        run_id = resp.json()["id"]
        bad = {**body, "privacy": "ldp"}
        refused = httpx.post(f"{server.url}/v1/runs", json=bad, headers=AUTH, timeout=30)
        assert refused.status_code == 422 and "does not support privacy='ldp'" in refused.text
        swarm = asyncio.run(run_users(server.url, run_id, None, 1, 9, MDP, progress=False))
        assert swarm.reported == config.episodes and swarm.refused == 0
        with httpx.Client(base_url=server.url, timeout=30) as http:
            log = http.get(f"/v1/runs/{run_id}/policies").json()
            board = http.get(f"/v1/runs/{run_id}/billboard").json()
            ledger = http.get(f"/v1/runs/{run_id}/ledger").json()
            status = http.get(f"/v1/runs/{run_id}").json()["status"]
    assert status["finished"] and board["arrays"] == {} and ledger["charges"] == []
    reference = Run(config, [5])
    served = []
    for _ in range(config.episodes):
        served.append(reference.policy()[0].tolist())
        reference.ingest_trajectories(*fake_trajectory(reference))
    versions = PolicyLog.model_validate(log).reported_versions()
    assert [log["versions"][str(v)] for v in versions] == served


def fake_trajectory(run: Run):
    """Any trajectory: the toy's learner never looks at the (empty) billboard."""
    from privrl.worlds.rollout import Trajectories

    h, message = run.config.horizon, run.message()
    return Trajectories(np.zeros((1, h + 1), int), np.zeros((1, h), int), np.zeros((1, h))), message
