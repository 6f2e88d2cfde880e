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

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from privrl.seeding import generator
from privrl.worlds.tabular import StepLists, TabularMDP, _cumulative


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
    """Inverse-CDF indices: #{cdf <= u} per row, clipped to S-1 (a vectorized searchsorted)."""
    idx = (cdf_rows <= u[..., None]).sum(axis=-1)
    return np.minimum(idx, cdf_rows.shape[-1] - 1)


SUCCESSOR_TABLE_STATES = 16  # up to this S, `rollout` draws every (h, s)'s successor at once


def _walk(successors: np.ndarray, states: np.ndarray) -> None:
    """Fill states[:, 1:] from states[:, 0] along a successor table (n, H, S): the next state
    of every (h, s) already drawn with step h's uniform, so only the lookups are sequential."""
    n, horizon, _ = successors.shape
    rows = np.arange(n)
    for h in range(horizon):
        states[:, h + 1] = successors[rows, h, states[:, h]]


def _rollout_one(tables: StepLists, policy: list[list[int]], u: list[float], bernoulli: bool
                 ) -> Trajectories:
    """One user's rollout, step by step in Python: the inverse CDF #{cdf <= u} of a
    non-decreasing row is `bisect_right`, so the numbers are the vectorized path's."""
    horizon, last = len(policy), len(tables.cum_d1) - 1
    s = min(bisect_right(tables.cum_d1, u[0]), last)
    states, actions, rewards = [s], [], []
    for h in range(horizon):
        a = policy[h][s]
        mean = tables.R[h][s][a]
        actions.append(a)
        rewards.append((1.0 if u[1 + horizon + h] < mean else 0.0) if bernoulli else mean)
        s = min(bisect_right(tables.cum_P[h][s][a], u[1 + h]), last)
        states.append(s)
    return Trajectories(states=np.array([states], np.int64), actions=np.array([actions], np.int64),
                        rewards=np.array([rewards], np.float64))


def _initial_states(mdp: TabularMDP, u0: np.ndarray) -> np.ndarray:
    """Draw s_1 for each uniform in `u0`."""
    return _inverse_cdf(mdp.cum_d1, u0)  # d1's one CDF row against every uniform


def _transition(
    mdp: TabularMDP, h: int, s: np.ndarray, a: np.ndarray, u_next: np.ndarray, u_rew: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One step at stage h for a batch: (next states, rewards) from the step's two uniforms."""
    next_s = _inverse_cdf(mdp.cum_P[h, s, a], u_next)
    mean = mdp.R[h, s, a]
    if mdp.reward_noise == "bernoulli":
        reward = (u_rew < mean).astype(np.float64)
    else:
        reward = np.asarray(mean, dtype=np.float64)
    return next_s, reward


def _check_uniforms(u: np.ndarray, horizon: int, n_rows: int | None = None) -> np.ndarray:
    """Validate a (R, 2H+1) float array of uniforms in [0, 1)."""
    u = np.asarray(u, dtype=np.float64)
    width = N_UNIFORMS(horizon)
    if u.ndim != 2 or u.shape[1] != width or (n_rows is not None and u.shape[0] != n_rows):
        rows = "R" if n_rows is None else str(n_rows)
        raise ValueError(f"uniforms must have shape ({rows}, 2H+1 = {width}), got {u.shape}")
    if u.size and not ((u >= 0.0) & (u < 1.0)).all():
        raise ValueError("uniforms must lie in [0, 1)")
    return u


def rollout(mdp: TabularMDP, policies: np.ndarray, uniforms: np.ndarray) -> Trajectories:
    """Roll out deterministic policies (R, H, S) (or one shared (H, S)) with uniforms (R, 2H+1)."""
    H, S = mdp.H, mdp.S
    u = _check_uniforms(uniforms, H)
    n = u.shape[0]
    pol = np.asarray(policies)
    if not np.issubdtype(pol.dtype, np.integer):
        raise ValueError(f"policies must be an integer array of actions, got dtype {pol.dtype}")
    if pol.shape[-2:] != (H, S) or pol.ndim not in (2, 3):
        raise ValueError(f"policies must have shape (R, H, S) = (R, {H}, {S}), got {pol.shape}")
    if pol.ndim == 2 or pol.shape[0] != n:  # one shared policy (a view per row)
        try:
            pol = np.broadcast_to(pol, (n, H, S))
        except ValueError:
            raise ValueError(
                f"policies have {pol.shape[0]} rows but uniforms have {n}; they must match"
            ) from None
    if pol.size and (pol.min() < 0 or pol.max() >= mdp.A):
        raise ValueError(
            f"policies contain actions outside [0, {mdp.A}): min {pol.min()}, max {pol.max()}"
        )
    if n == 1 and mdp.step_lists is not None:  # one user (HTTP): numpy's calls cost more
        bernoulli = mdp.reward_noise == "bernoulli"  # than its 20 steps in Python
        return _rollout_one(mdp.step_lists, pol[0].tolist(), u[0].tolist(), bernoulli)
    states = np.empty((n, H + 1), dtype=np.int64)
    rows = np.arange(n)
    states[:, 0] = _initial_states(mdp, u[:, 0])
    # Gather each policy's own transition CDFs and mean rewards once: (n, H, S, S) and (n, H, S).
    steps, cells = np.arange(H)[None, :, None], np.arange(S)[None, None, :]
    cdf_pi = mdp.cum_P[steps, cells, pol]
    mean_pi = mdp.R[steps, cells, pol]
    if S <= SUCCESSOR_TABLE_STATES:
        _walk(_inverse_cdf(cdf_pi, u[:, 1 : 1 + H, None]), states)
    else:
        for h in range(H):
            states[:, h + 1] = _inverse_cdf(cdf_pi[rows, h, states[:, h]], u[:, 1 + h])
    visited = states[:, :-1]
    actions = pol[rows[:, None], np.arange(H)[None, :], visited].astype(np.int64)
    mean = mean_pi[rows[:, None], np.arange(H)[None, :], visited]
    if mdp.reward_noise == "bernoulli":
        rewards = (u[:, 1 + H :] < mean).astype(np.float64)
    else:
        rewards = mean.astype(np.float64)
    return Trajectories(states=states, actions=actions, rewards=rewards)


def rollout_stochastic(
    mdp: TabularMDP, probs: np.ndarray, uniforms: np.ndarray, action_uniforms: np.ndarray
) -> Trajectories:
    """Roll out stochastic policies probs (R, H, S, A): a_h is drawn by inverse CDF of
    probs[h, s_h] with action_uniforms[:, h] (R, H); states and rewards as in `rollout`."""
    H, S, A = mdp.H, mdp.S, mdp.A
    u = _check_uniforms(uniforms, H)
    n = u.shape[0]
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (n, H, S, A):
        raise ValueError(f"probs must have shape (R, H, S, A) = ({n}, {H}, {S}, {A}), got"
                         f" {p.shape}")
    if not (np.isfinite(p).all() and (p >= 0).all() and np.allclose(p.sum(-1), 1.0, atol=1e-8)):
        raise ValueError("probs must be probability distributions over actions")
    ua = np.asarray(action_uniforms, dtype=np.float64)
    if ua.shape != (n, H) or not ((ua >= 0.0) & (ua < 1.0)).all():
        raise ValueError(f"action uniforms must have shape ({n}, {H}) and lie in [0, 1)")
    cdf = _cumulative(p)
    states = np.empty((n, H + 1), dtype=np.int64)
    actions = np.empty((n, H), dtype=np.int64)
    rewards = np.empty((n, H))
    rows = np.arange(n)
    states[:, 0] = _initial_states(mdp, u[:, 0])
    for h in range(H):
        s = states[:, h]
        a = _inverse_cdf(cdf[rows, h, s], ua[:, h])
        actions[:, h] = a
        states[:, h + 1], rewards[:, h] = _transition(mdp, h, s, a, u[:, 1 + h], u[:, 1 + H + h])
    return Trajectories(states=states, actions=actions, rewards=rewards)


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
        self._s = int(_initial_states(self.mdp, self._u[:1])[0])
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
        h = self._h
        s_arr = np.array([self._s])
        next_s, reward = _transition(
            self.mdp,
            h,
            s_arr,
            np.array([int(action)]),
            self._u[1 + h : 2 + h],
            self._u[1 + H + h : 2 + H + h],
        )
        self._s = int(next_s[0])
        self._h = h + 1
        return self._s, float(np.asarray(reward).reshape(-1)[0]), self._h == H, False, {"h": h + 1}
