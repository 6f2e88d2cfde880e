"""The evaluator: exact regret of a run from the true world and the public policy log.

It reads only public data (the run's configuration and `GET /v1/runs/{id}/policies`) and never
feeds anything back: regret of episode k is d1 · (V*_1 - V^{pi_k}_1) for the policy version the
server served at episode k's claim, computed by backward induction in the true world.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from privrl.client.api import ApiError, ServerAPI
from privrl.protocol import PolicyLog
from privrl.worlds import episode_regret
from privrl.worlds.evaluation import episode_regret_stochastic
from privrl.worlds.tabular import TabularMDP


@dataclass(frozen=True)
class Evaluation:
    """Per-episode exact regret of the episodes served so far, and the versions behind it."""

    run_id: str
    regret: np.ndarray  # (episodes served,)
    versions: np.ndarray  # policy version served per episode
    policies: dict[int, np.ndarray]  # version -> actions (H, S)

    @property
    def cumulative(self) -> float:
        """Total regret over the served episodes."""
        return float(self.regret.sum())

    def tail_mean(self, episodes: int = 100) -> float:
        """Mean per-episode regret over the last `episodes` episodes."""
        return float(self.regret[-episodes:].mean()) if self.regret.size else float("nan")

    def policy_of(self, episode: int) -> np.ndarray:
        """The policy (H, S) served at `episode`."""
        return self.policies[int(self.versions[episode])]


def regret_from_log(mdp: TabularMDP, log: PolicyLog) -> Evaluation:
    """Exact per-episode regret for every served episode (each version evaluated once)."""
    policies = {int(v): np.asarray(a, dtype=np.int64) for v, a in log.versions.items()}
    served = np.asarray(log.episodes, dtype=np.int64)
    if log.outcomes:  # expired claims are not part of the run's episodes
        served = served[np.asarray([o == "reported" for o in log.outcomes], dtype=bool)]
    missing = sorted(set(served.tolist()) - set(policies))
    if missing:
        raise ValueError(f"the policy log serves versions {missing[:5]} that it does not list")
    for v, pol in policies.items():
        if pol.shape != (mdp.H, mdp.S):
            raise ValueError(f"policy version {v} has shape {pol.shape}, the world needs "
                             f"{(mdp.H, mdp.S)}")
    order = sorted(policies)
    if not order:
        return Evaluation(log.run_id, np.zeros(0), served, policies)
    stochastic = {v: a["probs"].to_array() for v, a in log.arrays.items() if "probs" in a}
    if stochastic:  # the users played these action probabilities, not the actions
        if set(stochastic) != set(order):
            raise ValueError("the policy log has action probabilities for some versions only")
        per_version = episode_regret_stochastic(mdp, np.stack([stochastic[v] for v in order]))
    else:
        per_version = episode_regret(mdp, np.stack([policies[v] for v in order]))
    index = {v: i for i, v in enumerate(order)}
    regret = per_version[[index[int(v)] for v in served]] if served.size else np.zeros(0)
    return Evaluation(log.run_id, np.asarray(regret, dtype=np.float64), served, policies)


def evaluate(server: str, run_id: str, mdp: TabularMDP, api: ServerAPI | None = None) -> Evaluation:
    """Fetch the public policy log of `run_id` and compute the exact regret in `mdp`."""
    own = api is None
    api = api or ServerAPI(server)
    try:
        cfg = api.get_run(run_id).config
        if (mdp.S, mdp.A, mdp.H) != (cfg.n_states, cfg.n_actions, cfg.horizon):
            raise ApiError(
                f"the true world has (S, A, H) = {(mdp.S, mdp.A, mdp.H)} but run {run_id} is "
                f"for {(cfg.n_states, cfg.n_actions, cfg.horizon)}: pass matching world options"
            )
        log = api.policies(run_id)
    finally:
        if own:
            api.close()
    try:
        return regret_from_log(mdp, log)
    except ValueError as exc:
        raise ApiError(f"policy log of run {run_id}: {exc}") from None
