"""Worlds: tabular and linear-mixture MDPs, their exact values, seeded trajectory sampling."""

from privrl.worlds.rollout import (
    N_UNIFORMS,
    TabularEnv,
    Trajectories,
    draw_uniforms,
    rollout,
)
from privrl.worlds.tabular import (
    TabularMDP,
    WorldError,
    garnet,
    load_npz,
    riverswim,
)
from privrl.worlds.values import (
    episode_regret,
    expected_return,
    optimal_q,
    optimal_return,
    policy_values,
    uniform_random_return,
)

from .gym import as_gymnasium_env, from_gymnasium, gymnasium_table
from .linear_mixture import (
    LinearMixtureMDP,
    LinearMixtureModel,
    load_linear_npz,
    public_model,
    save_linear_npz,
)
from .model_spec import ModelSpec
from .registry import WorldInfo, list_worlds, make

__all__ = [
    "N_UNIFORMS",
    "LinearMixtureMDP",
    "LinearMixtureModel",
    "ModelSpec",
    "load_linear_npz",
    "public_model",
    "save_linear_npz",
    "TabularEnv",
    "TabularMDP",
    "Trajectories",
    "WorldInfo",
    "WorldError",
    "as_gymnasium_env",
    "draw_uniforms",
    "episode_regret",
    "expected_return",
    "from_gymnasium",
    "garnet",
    "gymnasium_table",
    "list_worlds",
    "load_npz",
    "make",
    "optimal_q",
    "optimal_return",
    "policy_values",
    "riverswim",
    "rollout",
    "uniform_random_return",
]
