"""Trajectory sampling from pre-drawn uniforms, so every process reproduces the same episodes.

Uniform layout per user (fixed; other processes rely on it), with 0-based steps h = 0..H-1:

* `u[0]`         draws s_1 from d1 by inverse CDF;
* `u[1 + h]`     draws s_{h+1} from P_h(. | s_h, a_h) by inverse CDF;
* `u[1 + H + h]` draws the reward r_h ~ Bernoulli(R_h(s_h, a_h)) when reward_noise is
  "bernoulli" (unused, reward = mean, when "deterministic").

Inverse CDF: the sampled index is the number of cumulative values <= u (searchsorted, side
"right"), clipped to S-1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from privrl import accel
from privrl.seeding import generator
from privrl.worlds.tabular import TabularMDP, _cumulative


def N_UNIFORMS(horizon: int) -> int:
    """Uniforms one user consumes per episode: 1 for s_1, H for transitions, H for rewards."""
    return 2 * horizon + 1


@dataclass(frozen=True)
class Trajectories:
    """A batch of R episodes: states include s_{H+1}; rewards are the realised r_h in [0, 1]."""

    states: np.ndarray  # (R, H+1) int64
    actions: np.ndarray  # (R, H) int64
    rewards: np.ndarray  # (R, H) float64

    @property
    def returns(self) -> np.ndarray:
        """Realised episode returns (R,)."""
        return self.rewards.sum(axis=-1)


def _inverse_cdf(cdf_rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF indices: #{cdf <= u} per row, clipped to S-1 (the kernel's `_draw`)."""
    idx = (cdf_rows <= u[..., None]).sum(axis=-1)
    return np.minimum(idx, cdf_rows.shape[-1] - 1)


def _check_uniforms(u: np.ndarray, horizon: int) -> np.ndarray:
    """Validate a (R, 2H+1) float array of uniforms in [0, 1)."""
    u = np.asarray(u, dtype=np.float64)
    width = N_UNIFORMS(horizon)
    if u.ndim != 2 or u.shape[1] != width:
        raise ValueError(f"uniforms must have shape (R, 2H+1 = {width}), got {u.shape}")
    if u.size and not ((u >= 0.0) & (u < 1.0)).all():
        raise ValueError("uniforms must lie in [0, 1)")
    return u


def rollout(mdp: TabularMDP, policies: np.ndarray, uniforms: np.ndarray) -> Trajectories:
    """Roll out deterministic policies (R, H, S) (or one shared (H, S)) with uniforms (R, 2H+1)
    in the compiled episode step the in-process DP-UCBVI loop plays (`kernels.rollout`)."""
    H, S = mdp.H, mdp.S
    u = np.ascontiguousarray(_check_uniforms(uniforms, H))
    n = u.shape[0]
    pol = np.asarray(policies)
    if not np.issubdtype(pol.dtype, np.integer):
        raise ValueError(f"policies must be an integer array of actions, got dtype {pol.dtype}")
    if pol.shape[-2:] != (H, S) or pol.ndim not in (2, 3):
        raise ValueError(f"policies must have shape (R, H, S) = (R, {H}, {S}), got {pol.shape}")
    pol = pol.reshape(-1, H, S)
    if pol.shape[0] not in (1, n):
        raise ValueError(
            f"policies have {pol.shape[0]} rows but uniforms have {n}; they must match"
        )
    if pol.size and (pol.min() < 0 or pol.max() >= mdp.A):
        raise ValueError(
            f"policies contain actions outside [0, {mdp.A}): min {pol.min()}, max {pol.max()}"
        )
    states = np.empty((n, H + 1), dtype=np.int64)
    actions = np.empty((n, H), dtype=np.int64)
    rewards = np.empty((n, H))
    accel.load().rollout((mdp.cum_d1, mdp.cum_P, mdp.R), np.ascontiguousarray(pol, np.int64), u,
                         mdp.reward_noise == "bernoulli", states, actions, rewards)
    return Trajectories(states=states, actions=actions, rewards=rewards)


def rollout_stochastic(
    mdp: TabularMDP, probs: np.ndarray, uniforms: np.ndarray, action_uniforms: np.ndarray
) -> Trajectories:
    """Roll out stochastic policies probs (R, H, S, A): a_h is drawn by inverse CDF of
    probs[h, s_h] with action_uniforms[:, h] (R, H); states and rewards as in `rollout`.

    The step's one action uniform draws the action whichever state is visited, so each user
    plays the deterministic policy of its draws at every (h, s).
    """
    H, S, A = mdp.H, mdp.S, mdp.A
    n = _check_uniforms(uniforms, H).shape[0]
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (n, H, S, A):
        raise ValueError(f"probs must have shape (R, H, S, A) = ({n}, {H}, {S}, {A}), got"
                         f" {p.shape}")
    if not (np.isfinite(p).all() and (p >= 0).all() and np.allclose(p.sum(-1), 1.0, atol=1e-8)):
        raise ValueError("probs must be probability distributions over actions")
    ua = np.asarray(action_uniforms, dtype=np.float64)
    if ua.shape != (n, H) or not ((ua >= 0.0) & (ua < 1.0)).all():
        raise ValueError(f"action uniforms must have shape ({n}, {H}) and lie in [0, 1)")
    return rollout(mdp, _inverse_cdf(_cumulative(p), ua[:, :, None]), uniforms)


def draw_uniforms(rngs: Sequence[np.random.Generator], horizon: int) -> np.ndarray:
    """Stack `rng.random(2H+1)` for each user's own generator into (R, 2H+1)."""
    width = N_UNIFORMS(horizon)
    if len(rngs) == 0:
        return np.empty((0, width))
    return np.stack([rng.random(width) for rng in rngs])


class TabularEnv:
    """Gymnasium-style single-user env; same transition law and uniform layout as `rollout`.

    Each `reset` draws one episode's 2H+1 uniforms from the env's generator, so an env seeded
    with generator `g` produces exactly `rollout(mdp, pi, draw_uniforms([g], H))` episodes.
    `reset(seed=k)` uses `privrl.seeding.generator(k, "env")`; without any seed the env draws
    from fresh OS entropy (like gymnasium) and is not reproducible.
    """

    def __init__(self, mdp: TabularMDP, *, rng: np.random.Generator | None = None) -> None:
        """Wrap `mdp`; optionally use an explicit generator for the episodes' uniforms."""
        self.mdp = mdp
        self._rng = rng
        self._u: np.ndarray | None = None
        self._h = 0
        self._s = -1

    @property
    def horizon(self) -> int:
        """Episode length H."""
        return self.mdp.H

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Start an episode; return (s_1, info). `seed` reseeds the env's generator."""
        if seed is not None:
            self._rng = generator(seed, "env")
        elif self._rng is None:
            self._rng = np.random.default_rng()
        self._u = self._rng.random(N_UNIFORMS(self.mdp.H))
        self._h = 0
        self._s = int(_inverse_cdf(self.mdp.cum_d1, self._u[:1])[0])
        return self._s, {"h": 0}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Take `action` at the current step; terminated is True after H steps, truncated never."""
        if self._u is None:
            raise RuntimeError("call reset() before step()")
        H = self.mdp.H
        if self._h >= H:
            raise RuntimeError(f"episode is over (H={H} steps taken); call reset()")
        if isinstance(action, bool) or not isinstance(action, int | np.integer):
            raise ValueError(f"action must be an int, got {action!r}")
        if not 0 <= action < self.mdp.A:
            raise ValueError(f"action must be in [0, {self.mdp.A}), got {action}")
        h, s = self._h, self._s
        mean = float(self.mdp.R[h, s, action])
        if self.mdp.reward_noise == "bernoulli":
            reward = 1.0 if self._u[1 + H + h] < mean else 0.0
        else:
            reward = mean
        self._s = int(_inverse_cdf(self.mdp.cum_P[h, s, action], self._u[1 + h : 2 + h])[0])
        self._h = h + 1
        return self._s, reward, self._h == H, False, {"h": h + 1}
