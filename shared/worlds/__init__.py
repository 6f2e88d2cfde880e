"""Worlds: tabular MDPs, their exact evaluation and seeded trajectory sampling."""

from shared.worlds.evaluation import (
    episode_regret,
    expected_return,
    optimal_q,
    optimal_return,
    policy_values,
    uniform_random_return,
)
from shared.worlds.rollout import (
    N_UNIFORMS,
    TabularEnv,
    Trajectories,
    draw_uniforms,
    rollout,
)
from shared.worlds.tabular import (
    TabularMDP,
    WorldError,
    garnet,
    load_npz,
    riverswim,
)

__all__ = [
    "N_UNIFORMS",
    "TabularEnv",
    "TabularMDP",
    "Trajectories",
    "WorldError",
    "draw_uniforms",
    "episode_regret",
    "expected_return",
    "garnet",
    "load_npz",
    "optimal_q",
    "optimal_return",
    "policy_values",
    "riverswim",
    "rollout",
    "uniform_random_return",
]
