"""`PrivrlEnv`, the `gymnasium.Env` over a TabularMDP (imports gymnasium: load it via `gym.py`)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from .rollout import TabularEnv
from .tabular import TabularMDP


class PrivrlEnv(gymnasium.Env[int, int]):
    """A privrl world as a gymnasium env; transitions are `TabularEnv`'s, truncated after H steps.

    `reset(seed=k)` seeds gymnasium's `np_random` (= privrl's `generator(k)`); each reset draws
    the episode's 2H+1 uniforms from it, exactly as `rollout` does from a user's generator.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, mdp: TabularMDP) -> None:
        """Wrap `mdp`: observations Discrete(S), actions Discrete(A)."""
        self.mdp = mdp
        self.observation_space = spaces.Discrete(mdp.S)
        self.action_space = spaces.Discrete(mdp.A)
        self._episode: TabularEnv | None = None

    @property
    def horizon(self) -> int:
        """Episode length H (the time limit)."""
        return self.mdp.H

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Start an episode: (s_1, {"h": 0}); `seed` reseeds `np_random`."""
        super().reset(seed=seed)
        self._episode = TabularEnv(self.mdp, rng=self.np_random)
        return self._episode.reset()

    def step(self, action: int | np.integer) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Play `action`: (s', r, terminated=False, truncated=(h == H), {"h": h})."""
        if self._episode is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, at_horizon, _, info = self._episode.step(action)
        return obs, reward, False, at_horizon, info

    def __repr__(self) -> str:
        """Name the wrapped world."""
        return f"PrivrlEnv({self.mdp!r})"
