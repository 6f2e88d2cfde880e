"""Helpers for the tests that run a real server and real user processes on loopback."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from privrl.client.api import ServerAPI
from privrl.client.procs import ServerProcess, child_env, module_cmd
from privrl.config import RunConfig
from privrl.run import Run, user_episode
from privrl.stats import Stats, tabular_counts
from privrl.worlds import riverswim
from privrl.worlds.rollout import Trajectories
from privrl.worlds.tabular import TabularMDP

MDP = riverswim(20)
TOKEN = "test-token-" + secrets.token_hex(8)


def config_for(privacy: str, mechanism: str = "gaussian", episodes: int = 60,
               epsilon: float = 1.0) -> RunConfig:
    """A small DP-UCBVI run on RiverSwim (H = 20)."""
    delta = 1e-5 if mechanism == "gaussian" and privacy != "none" else 0.0
    return RunConfig(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=episodes,
                     privacy=privacy, epsilon=epsilon, mechanism=mechanism, delta=delta)


def start_server(tmp: Path, *, sequential: bool = False,
                 claim_timeout: float | None = None) -> ServerProcess:
    """A real `python -m privrl.server` on a free loopback port, logging to tmp/server.log."""
    tmp.mkdir(parents=True, exist_ok=True)
    server = ServerProcess(tmp / "privrl.db", TOKEN, sequential=sequential,
                           claim_timeout=claim_timeout, log_path=tmp / "server.log")
    return server.start(timeout=60.0)


def create_run(server: ServerProcess, config: RunConfig, seed: int | None = None) -> str:
    """POST /v1/runs with the admin token (and the server's secret seed); the new run's id."""
    with ServerAPI(server.url, token=TOKEN) as api:
        return api.create_run(config, seed=seed).id


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120.0,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m privrl.client ARGS` as a real process (text output captured)."""
    return subprocess.run(module_cmd("privrl.client", *args), env=child_env(env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class Reference:
    """An in-process run fed exactly like the sequential HTTP run (one user at a time)."""

    run: Run
    policies: list[np.ndarray]  # (H, S) per episode
    trajectories: list[Trajectories]
    raw: list[Stats]  # each user's raw count arrays (one replica row)
    noisy: list[Stats | None]


def reference_run(
    config: RunConfig, server_seed: int, client_seed: int, mdp: TabularMDP = MDP
) -> Reference:
    """Replay the protocol in process: policy, user episode, ingest — K times."""
    run = Run(config, [server_seed])
    policies, trajs, raws, noisies = [], [], [], []
    for k in range(config.episodes):
        message = run.message()
        policies.append(message["actions"][0].copy())
        traj, noisy = user_episode(mdp, message, [client_seed], k, run.algorithm, run.calibration)
        trajs.append(traj)
        raws.append({n: a[0] for n, a in tabular_counts(traj, mdp.S, mdp.A).items()})
        noisies.append(None if noisy is None else {n: a[0] for n, a in noisy.items()})
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)
    return Reference(run, policies, trajs, raws, noisies)
