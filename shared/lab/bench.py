"""Per-episode cost of the in-process runner, measured side by side (`privrl bench`).

Reports milliseconds per episode (all seeds at once) and per replica-episode for the
non-private, JDP and LDP variants on RiverSwim, and, when the optional `rlberry-scool` package is
installed, its UCBVIAgent on the same chain for the same number of episodes.
"""

from __future__ import annotations

import time

from ..config import RunConfig
from ..run import run_in_process
from ..worlds.tabular import garnet, riverswim


def _time_config(config: RunConfig, mdp, seeds: list[int]) -> float:
    start = time.perf_counter()
    run_in_process(config, mdp, seeds)
    return time.perf_counter() - start


def rlberry_ms_per_episode(episodes: int, horizon: int) -> float | None:
    """rlberry-scool's UCBVIAgent (stage_dependent, no real-time DP) on a 6-state chain."""
    try:
        from rlberry_scool.agents import UCBVIAgent
        from rlberry_scool.envs import Chain
    except ImportError:
        return None
    env = Chain(L=6, fail_prob=0.1)
    agent = UCBVIAgent(env, horizon=horizon, stage_dependent=True, real_time_dp=False, seeder=0)
    start = time.perf_counter()
    agent.fit(budget=episodes)
    return 1e3 * (time.perf_counter() - start) / episodes


VARIANTS = (
    ("non-private UCBVI", "none", "laplace", 0.0),
    ("JDP laplace eps=1", "jdp", "laplace", 0.0),
    ("JDP gaussian eps=1", "jdp", "gaussian", 1e-5),
    ("LDP laplace eps=1", "ldp", "laplace", 0.0),
)


def bench_world(env: str, horizon: int, states: int, actions: int):
    """RiverSwim, or a garnet world of the given size (seed 0)."""
    return garnet(states, actions, horizon, seed=0) if env == "garnet" else riverswim(horizon)


def measure(mdp, episodes: int, seeds: list[int]) -> list[tuple[str, float]]:
    """(variant, seconds for `episodes` episodes of every seed at once), run one after another."""
    rows = []
    for name, privacy, mech, delta in VARIANTS:
        cfg = RunConfig(
            n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes, privacy=privacy,
            epsilon=1.0, delta=delta, mechanism=mech, preset="practical",
        )
        rows.append((name, _time_config(cfg, mdp, seeds)))
    return rows
