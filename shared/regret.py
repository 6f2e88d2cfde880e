"""Exact regret of a run from a world and its public policy log (the evaluator's computation).

Pure post-processing of public data: the policy log says which policy version each episode was
served; regret of episode k is d1 · (V*_1 - V^{pi_k}_1) in the given world, by backward
induction. It never feeds anything back into a learner. The client's evaluator (the true world
is the users' secret) and the server's public regret view (a public named world) both use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .protocol import PolicyLog
from .worlds.tabular import TabularMDP
from .worlds.values import episode_regret, episode_regret_stochastic


@dataclass(frozen=True)
class RunRegret:
    """Per-episode exact regret of the episodes served so far, and the versions behind it."""

    run_id: str
    regret: np.ndarray  # (episodes served,)
    versions: np.ndarray  # policy version served per reported episode
    policies: dict[int, np.ndarray]  # version -> actions (H, S)

    @property
    def cumulative(self) -> float:
        """Total regret over the served episodes."""
        return float(self.regret.sum())

    def tail_mean(self, episodes: int = 100) -> float:
        """Mean per-episode regret over the last `episodes` episodes."""
        return float(self.regret[-episodes:].mean()) if self.regret.size else float("nan")


def version_regret(
    mdp: TabularMDP,
    policies: Mapping[int, np.ndarray],
    known: dict[int, float] | None = None,
    probs: Mapping[int, np.ndarray] | None = None,
) -> dict[int, float]:
    """Exact regret of every policy version; versions already in `known` are taken from it and
    the new ones are added to it (a cache the caller keeps for `mdp`). `probs`: the action
    probabilities (H, S, A) users played, for algorithms whose policies are stochastic."""
    known = {} if known is None else known
    for v, pol in policies.items():
        if pol.shape != (mdp.H, mdp.S):
            raise ValueError(f"policy version {v} has shape {pol.shape}, the world needs "
                             f"{(mdp.H, mdp.S)}")
    todo = sorted(v for v in policies if v not in known)
    if todo and probs:
        if not set(todo) <= set(probs):
            raise ValueError("the policy log has action probabilities for some versions only")
        values = episode_regret_stochastic(mdp, np.stack([probs[v] for v in todo]))
    elif todo:
        values = episode_regret(mdp, np.stack([policies[v] for v in todo]))
    if todo:
        known.update({v: float(x) for v, x in zip(todo, values, strict=True)})
    return known


def regret_from_log(
    mdp: TabularMDP, log: PolicyLog, known: dict[int, float] | None = None
) -> RunRegret:
    """Exact per-episode regret for every reported episode, in episode order (each version
    evaluated once; `known`: a cache of versions already evaluated in `mdp`, updated in place).
    `log` is the whole log (every page)."""
    policies = {int(v): np.asarray(a, dtype=np.int64) for v, a in log.versions.items()}
    served = np.asarray(log.reported_versions(), dtype=np.int64)  # expired claims are not part
    missing = sorted(set(log.served) - set(policies))  # of the run's episodes
    if missing:
        raise ValueError(f"the policy log serves versions {missing[:5]} that it does not list")
    if not policies:
        return RunRegret(log.run_id, np.zeros(0), served, policies)
    # the users played these action probabilities, not the actions (stochastic policies)
    probs = {int(v): a["probs"].to_array() for v, a in log.arrays.items() if "probs" in a}
    per_version = version_regret(mdp, policies, known, probs)
    regret = np.asarray([per_version[int(v)] for v in served], dtype=np.float64)
    return RunRegret(log.run_id, regret, served, policies)
