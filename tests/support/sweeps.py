"""Helpers of the sweep tests: a small world and configurations, and records without timings."""

from __future__ import annotations

import json
from typing import Any

from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec

WORLD = WorldSpec("riverswim", 10)
TIMING = ("seconds", "ms_per_episode")


def small_configs(episodes: int = 120) -> list[RunConfig]:
    """Non-private and JDP Gaussian DP-UCBVI on RiverSwim (H = 10)."""
    mdp = WORLD.build()
    return [RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes,
                      privacy=p, epsilon=1.0, mechanism=m, delta=d)
            for p, m, d in [("none", "laplace", 0.0), ("jdp", "gaussian", 1e-5)]]


def untimed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without wall-clock fields (the only ones two executors may differ in)."""
    out = json.loads(json.dumps(records))
    for r in out:
        for key in TIMING:
            r.pop(key)
        for block in r.get("seed_blocks", []):
            block.pop("seconds")
    return out
