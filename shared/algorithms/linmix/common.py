"""What the linear-mixture algorithms share: the public model of a run, the value-targeted
statistics a user computes, their replace-one sensitivities, and the optimistic backward pass.

Value-targeted regression (UCRL-VTR, LinOpt): at step h a user with value table V_{h+1}
(published in the policy message) contributes X_h = phi_{V_{h+1}}(s_h, a_h) and
y_h = V_{h+1}(s_{h+1}); the released statistics are the Gram matrix X X^T (symmetric) and the
target X y, per step h. The table is the one of the episode in which the data were collected:
it is never recomputed (that is what lets a tree counter or a local randomizer release it once).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...worlds.linear_mixture import LinearMixtureModel, public_model
from ...worlds.rollout import Trajectories

if TYPE_CHECKING:
    from ...config import RunConfig


def run_model(config: RunConfig, algo: str, known_rewards: bool, reward_features: bool
              ) -> LinearMixtureModel:
    """The run's public model, checked against (S, A, H) and what `algo` needs (ValueError)."""
    if config.model is None:
        raise ValueError(
            f"{algo} needs a public linear-mixture model (RunConfig.model): use a linear-mixture"
            " world (lm-hard, lm-mix, zhou-mix, zhou-tabular or a linear .npz)"
        )
    model = public_model(config.model)
    have = (model.S, model.A, model.horizon)
    want = (config.n_states, config.n_actions, config.horizon)
    if have != want:
        raise ValueError(f"the public model {config.model.name!r} has (S, A, H) = {have}, the run"
                         f" is configured for {want}")
    if known_rewards and model.rewards is None:
        raise ValueError(f"{algo} plans with known rewards, but the public model "
                         f"{config.model.name!r} publishes only reward features")
    if reward_features and model.reward_features is None:
        raise ValueError(f"{algo} learns rewards from reward features, but the public model "
                         f"{config.model.name!r} has none")
    return model


def clip_norm(x: np.ndarray, bound: float) -> np.ndarray:
    """Rescale the vectors on the last axis to norm <= bound (defensive; a no-op under the
    model's assumptions, privacy-critical otherwise)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > bound, bound / norms, 1.0)
    return x * factor


def value_targets(model: LinearMixtureModel, traj: Trajectories, values: np.ndarray,
                  v_max: float) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of every user and step: X_h = phi_{V_{h+1}}(s_h, a_h) (R, H, d) with norm <=
    feature_bound v_max, y_h = V_{h+1}(s_{h+1}) in [0, v_max] (R, H); V_{H+1} = 0 always."""
    n_rep, horizon = traj.actions.shape
    v_next = np.clip(np.asarray(values, dtype=np.float64)[:, 1:], 0.0, v_max)
    v_next[:, -1] = 0.0  # V_{H+1} = 0: the last step's statistics are data-independent zeros
    s, a, s_next = traj.states[:, :-1], traj.actions, traj.states[:, 1:]
    phi = model.features[s, a]  # (R, H, S', d)
    x = clip_norm(np.einsum("rhtd,rht->rhd", phi, v_next), model.feature_bound * v_max)
    rows, steps = np.arange(n_rep)[:, None], np.arange(horizon)[None, :]
    y = v_next[rows, steps, s_next]
    return x, y


def gram_and_target(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X X^T (R, H, d, d) and X y (R, H, d)."""
    return np.einsum("rhi,rhj->rhij", x, x), x * y[..., None]


def vtr_sensitivities(d: int, steps: int, x_max: float, y_max: float) -> dict[str, float]:
    """Replace-one sensitivities of the Gram and target families over `steps` data-dependent
    steps, with ||X|| <= x_max and y in [0, y_max]:

    gram  (upper triangle): ||triu(xx^T - x'x'^T)||_F <= ||xx^T - x'x'^T||_F <= sqrt(2) x_max^2
          (= when x is orthogonal to x'); l1 of the upper triangle <= (||x||_1^2 + ||x||^2)/2 <=
          (d+1) x_max^2 / 2 per user, twice that between two users;
    target: ||x y - x' y'|| <= 2 x_max y_max (features may point opposite ways); l1 <= 2 sqrt(d)
          x_max y_max.
    Over the steps: l2 adds in squares, l1 linearly.
    """
    return {
        "gram_l2": math.sqrt(2.0 * steps) * x_max**2,
        "gram_l1": steps * (d + 1.0) * x_max**2,
        "target_l2": 2.0 * math.sqrt(steps) * x_max * y_max,
        "target_l1": 2.0 * steps * math.sqrt(d) * x_max * y_max,
    }
