"""Helpers for the tests that run a real server and real user processes on loopback."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from privrl.algorithms.ucbvi.counts import tabular_counts
from privrl.client.api import ServerAPI
from privrl.client.procs import ServerProcess, child_env, module_cmd
from privrl.config import RunConfig
from privrl.run import Run, user_episode
from privrl.stats import Stats
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


def one_line_error(done: subprocess.CompletedProcess, pattern: str) -> str:
    """Exit code 2 and a single 'privrl: error:' line matching `pattern` (no usage, no
    traceback, no pydantic prefix); the line."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("privrl: error: "), lines[0]
    assert "usage:" not in done.stderr and "Traceback" not in done.stderr
    assert "Value error" not in lines[0]
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]


@dataclass
class Reference:
    """An in-process run fed exactly like the sequential HTTP run (one user at a time)."""

    run: Run
    policies: list[np.ndarray]  # (H, S) per episode
    trajectories: list[Trajectories]
    raw: list[Stats]  # each user's raw count arrays (one replica row)
    noisy: list[Stats | None]
    messages: list[Stats]  # every array the server served each episode (one replica row)
    statistics: list[Stats]  # each user's raw statistics, as its algorithm computes them


def reference_run(
    config: RunConfig, server_seed: int, client_seed: int, mdp: TabularMDP = MDP
) -> Reference:
    """Replay the protocol in process: policy, user episode, ingest — K times."""
    run = Run(config, [server_seed])
    policies, trajs, raws, noisies, messages, stats = [], [], [], [], [], []
    for k in range(config.episodes):
        message = run.message()
        policies.append(message["actions"][0].copy())
        messages.append({n: a[0].copy() for n, a in message.items()})
        traj, noisy = user_episode(mdp, message, [client_seed], k, run.algorithm, run.calibration,
                                   nonces=[k])  # a fresh user's counter, as over HTTP
        trajs.append(traj)
        raws.append({n: a[0] for n, a in tabular_counts(traj, mdp.S, mdp.A).items()})
        stats.append({n: a[0] for n, a in run.algorithm.user_statistics(traj, message).items()})
        noisies.append(None if noisy is None else {n: a[0] for n, a in noisy.items()})
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)
    return Reference(run, policies, trajs, raws, noisies, messages, stats)


def sequence_texts(seq: list) -> list[str]:
    """How a raw sequence could be spelled in JSON or Python text."""
    return [json.dumps(seq), json.dumps(seq, separators=(",", ":")), repr(seq),
            repr(tuple(seq))]


def walk(obj: Any) -> Iterator[tuple[str | None, Any]]:
    """Every (key, value) pair and every list in a parsed JSON document."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key, value
            yield from walk(value)
    elif isinstance(obj, list):
        yield None, obj
        for value in obj:
            yield from walk(value)


def numeric_lists(obj: Any) -> Iterator[np.ndarray]:
    for _, value in walk(obj):
        if isinstance(value, list) and value and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value
        ):
            yield np.asarray(value, dtype=np.float64)


def assert_no_get_returns(server: ServerProcess, run_id: str, sequences: list[list],
                          arrays: list[np.ndarray]) -> int:
    """Call every GET route of the server's OpenAPI document for `run_id` (admin token) and
    assert that no answer spells one of the raw `sequences` or holds one of the raw `arrays`
    (numerically, as a JSON list); returns how many routes answered."""
    texts = [t for seq in sequences for t in sequence_texts(seq)]
    openapi = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    gets = [p for p, ops in openapi["paths"].items() if "get" in ops]
    assert any(p.endswith("/billboard") for p in gets) and any(p.endswith("/policies")
                                                               for p in gets)
    seen = 0
    with httpx.Client(base_url=server.url, timeout=10,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for template in gets:
            path = re.sub(r"\{[^}]*\}", run_id, template)
            resp = http.get(path)
            if resp.status_code >= 400:
                continue
            seen += 1
            for t in texts:
                assert t not in resp.text, f"GET {path} returns a raw trajectory"
            try:
                doc = resp.json()
            except json.JSONDecodeError:
                continue
            for arr in numeric_lists(doc):
                for seq in sequences:
                    assert not (arr.size == len(seq) and np.array_equal(arr, seq)), path
                for raw in arrays:
                    raw = np.ravel(raw)
                    assert not (arr.size == raw.size and np.array_equal(arr, raw)), path
    return seen
