"""A toy plug-in defined only here: a uniformly random policy that releases no statistics.

It proves the plug-in contract: registering it touches nothing in the server, the users or the
runner. Servers load it with PRIVRL_PLUGINS=support.toy_algorithm (tests/ on PYTHONPATH).
"""

from __future__ import annotations

import numpy as np
from privrl.algorithms import Algorithm, Family, Learner, PolicyMessage, register
from privrl.privacy.calibration import Calibration
from privrl.seeding import generator
from privrl.stats import Stats
from privrl.trust.base import TrustBoundary
from privrl.worlds.rollout import Trajectories


class RandomLearner(Learner):
    """A fresh uniformly random deterministic policy after every report."""

    def __init__(self, algorithm: Algorithm, seeds: list[int]) -> None:
        self.config, self.seeds = algorithm.config, seeds

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        cfg = self.config
        shape = (cfg.horizon, cfg.n_states)
        draws = [generator(s, "toy", reported).integers(cfg.n_actions, size=shape)
                 for s in self.seeds]
        return {"actions": np.stack(draws)}


@register
class ToyRandom(Algorithm):
    """Uniformly random policy, no statistics (JDP and non-private only)."""

    name = "toy-random"
    summary = "uniformly random policy, no statistics (a test plug-in)"

    @classmethod
    def refuses(cls, boundary: TrustBoundary) -> str | None:
        return "a test plug-in of raw reports" if boundary.local_noise else None

    def families(self) -> tuple[Family, ...]:
        return ()

    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        return {}

    def learner(self, calibration: Calibration, seeds: list[int]) -> Learner:
        return RandomLearner(self, seeds)
