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
from ..base import check_model_sizes

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration


def run_model(config: RunConfig, algo: str, known_rewards: bool, reward_features: bool
              ) -> LinearMixtureModel:
    """The run's public model, checked against (S, A, H) and what `algo` needs (ValueError)."""
    if config.model is None:
        raise ValueError(
            f"{algo} needs a public linear-mixture model (RunConfig.model): use a linear-mixture"
            " world (lm-hard, lm-mix, zhou-mix, zhou-tabular or a linear .npz)"
        )
    model = public_model(config.model)
    check_model_sizes(config, (model.S, model.A, model.horizon))
    if known_rewards and model.rewards is None:
        raise ValueError(f"{algo} plans with known rewards, but the public model "
                         f"{config.model.name!r} publishes only reward features")
    if reward_features and model.reward_features is None:
        raise ValueError(f"{algo} learns rewards from reward features, but the public model "
                         f"{config.model.name!r} has none")
    return model


def released_since(calibration: Calibration, reported: int, last_planned: int) -> bool:
    """Whether the billboard changed since the last plan: a release of the run's schedule fell
    in between (every report under the papers' schedule, in LDP and without privacy)."""
    return calibration.counter_items(reported) != calibration.counter_items(last_planned)


def clip_norm(x: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
    """Rescale the vectors on the last axis to norm <= bound (a number, or one per step h for
    arrays (..., H, d)); defensive: a no-op under the model's assumptions, privacy-critical
    otherwise."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    bound = np.asarray(bound, dtype=np.float64)[..., None] if np.ndim(bound) else bound
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > bound, bound / np.where(norms > 0, norms, 1.0), 1.0)
    return x * factor


def value_caps(horizon: int, remaining: bool) -> np.ndarray:
    """Upper bounds of V_1..V_{H+1} (public): H - h + 1 at step h when Q is clipped there
    (`remaining`), else H; V_{H+1} = 0."""
    steps = np.arange(horizon, dtype=np.float64)
    caps = horizon - steps if remaining else np.full(horizon, float(horizon))
    return np.append(caps, 0.0)


def value_targets(model: LinearMixtureModel, traj: Trajectories, values: np.ndarray,
                  caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of every user and step: X_h = phi_{V_{h+1}}(s_h, a_h) (R, H, d) with norm <=
    feature_bound caps[h+1], y_h = V_{h+1}(s_{h+1}) in [0, caps[h+1]] (R, H), for the public
    value caps of `value_caps`; V_{H+1} = 0 always, so the last step's statistics are zeros."""
    n_rep, horizon = traj.actions.shape
    next_caps = caps[1:]
    v_next = np.clip(np.asarray(values, dtype=np.float64)[:, 1:], 0.0, next_caps[None, :, None])
    s, a, s_next = traj.states[:, :-1], traj.actions, traj.states[:, 1:]
    phi = model.features[s, a]  # (R, H, S', d)
    x = clip_norm(np.einsum("rhtd,rht->rhd", phi, v_next), model.feature_bound * next_caps)
    rows, steps = np.arange(n_rep)[:, None], np.arange(horizon)[None, :]
    y = v_next[rows, steps, s_next]
    return x, y


def gram_and_target(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X X^T (R, H, d, d) and X y (R, H, d)."""
    return np.einsum("rhi,rhj->rhij", x, x), x * y[..., None]


def feature_box(features: np.ndarray) -> dict[str, float]:
    """Replace-one sensitivities of one step's Gram (upper triangle) and target at value cap 1,
    from the public features phi(s'|s,a) (S, A, S', d) alone, by interval arithmetic.

    With V in [0, 1]^S, X = phi_V(s,a) has X_j in [lo_j, hi_j], lo_j = min_{s,a} sum_s'
    min(phi_j, 0), hi_j likewise with max (lo <= 0 <= hi, so shrinking X by the norm clip stays
    inside); X_j X_k lies in the product interval, y X_j (y in [0, 1]) in [lo_j, hi_j]. Two users'
    statistics differ by at most the interval widths w: l2 <= ||w||, l1 <= sum w. At cap c the
    Gram's bounds scale by c^2, the target's by c^2. No secret parameter enters.
    """
    lo = np.minimum(features, 0.0).sum(axis=2)  # (S, A, d)
    hi = np.maximum(features, 0.0).sum(axis=2)
    corners = np.stack([lo[..., :, None] * lo[..., None, :], lo[..., :, None] * hi[..., None, :],
                        hi[..., :, None] * lo[..., None, :], hi[..., :, None] * hi[..., None, :]])
    d = features.shape[-1]
    diag = np.arange(d)
    low = corners.min(axis=0)
    low[..., diag, diag] = 0.0  # X_j^2 >= 0, and lo_j <= 0 <= hi_j
    upper = np.triu_indices(d)
    gram_w = (corners.max(axis=0).max(axis=(0, 1)) - low.min(axis=(0, 1)))[upper]
    target_w = hi.max(axis=(0, 1)) - lo.min(axis=(0, 1))
    return {"gram_l2": float(np.linalg.norm(gram_w)), "gram_l1": float(gram_w.sum()),
            "target_l2": float(np.linalg.norm(target_w)), "target_l1": float(target_w.sum())}


def model_sensitivities(model: LinearMixtureModel, caps: np.ndarray) -> dict[str, float]:
    """`vtr_sensitivities` of X_h = phi_V(s,a), y_h = V(s') with V in [0, caps[h]] (caps of
    V_2..V_{H+1}), tightened per step by the public features' `feature_box` where smaller."""
    caps = np.asarray(caps, dtype=np.float64)
    box = feature_box(model.features)
    out: dict[str, list[float]] = {k: [] for k in box}
    for cap in caps:
        generic = vtr_sensitivities(model.d, np.array([model.feature_bound * cap]),
                                    np.array([cap]))
        for k in box:
            out[k].append(min(generic[k], box[k] * cap * cap))
    return {k: (math.sqrt(math.fsum(x * x for x in v)) if k.endswith("l2") else math.fsum(v))
            for k, v in out.items()}


def vtr_sensitivities(d: int, x_caps: np.ndarray, y_caps: np.ndarray) -> dict[str, float]:
    """Replace-one sensitivities of the Gram and target families when step h has ||X_h|| <=
    x_caps[h] and y_h in [0, y_caps[h]] (a step with cap 0 carries no data):

    gram  (upper triangle): ||triu(xx^T - x'x'^T)||_F <= ||xx^T - x'x'^T||_F <= sqrt(2) x_max^2
          (= when x is orthogonal to x'); l1 of the upper triangle <= (||x||_1^2 + ||x||^2)/2 <=
          (d+1) x_max^2 / 2 per user, twice that between two users;
    target: ||x y - x' y'|| <= 2 x_max y_max (features may point opposite ways); l1 <= 2 sqrt(d)
          x_max y_max.
    Over the steps: l2 adds in squares, l1 linearly.
    """
    x, y = np.asarray(x_caps, dtype=np.float64), np.asarray(y_caps, dtype=np.float64)
    return {
        "gram_l2": math.sqrt(float(np.sum(2.0 * x**4))),
        "gram_l1": float(np.sum((d + 1.0) * x**2)),
        "target_l2": math.sqrt(float(np.sum((2.0 * x * y) ** 2))),
        "target_l1": float(np.sum(2.0 * math.sqrt(d) * x * y)),
    }
