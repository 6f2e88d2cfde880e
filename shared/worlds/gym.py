"""Gymnasium interoperability: privrl worlds as `gymnasium.Env`, gymnasium toy-text worlds as MDPs.

gymnasium is an optional extra (`pip install 'privrl[gym]'`): it is imported only inside the
functions below, never when `privrl.worlds` is imported.

**privrl -> gymnasium** (`as_gymnasium_env`): a `gymnasium.Env` with `Discrete(S)` observations and
`Discrete(A)` actions whose transitions are `TabularEnv`'s (the same law and uniform layout as
`rollout`). `reset(seed=k)` seeds gymnasium's `np_random`, which is exactly privrl's
`generator(k)`, so the first episode after `reset(seed=k)` equals
`rollout(mdp, pi, draw_uniforms([generator(k)], H))`. The observation is the state only (not the
step h), so the end of the episode after H steps is a time limit: `truncated=True` at step H and
`terminated` is always False (privrl worlds have no terminal states; gymnasium's terminal states
became absorbing ones, see below).

**gymnasium -> privrl** (`from_gymnasium`): envs with a public transition table
`env.unwrapped.P[s][a] = [(prob, next_state, reward, terminated), ...]` (FrozenLake, CliffWalking,
Taxi-v3/-v4, whichever gymnasium has) become an exact stationary `TabularMDP`:

* a state entered by a terminating transition becomes absorbing: every action stays there with
  reward 0 (in the env's units), which is what "the episode is over" is worth;
* the initial distribution is `env.unwrapped.initial_state_distrib` (FrozenLake, Taxi, CliffWalking
  in gymnasium >= 1.1), else a point mass on `start_state_index` (CliffWalking's fixed start);
* rewards are mapped to [0, 1] by the public affine map `r -> (r - r_min) / (r_max - r_min)` with
  [r_min, r_max] the range of the table's rewards and of the absorbing 0. Every one of the H steps
  is mapped, so a policy's privrl value is `(G_H - H * r_min) / (r_max - r_min)` with `G_H` its
  expected return in the env's units within H steps: same optimal policies, regret divided by
  `r_max - r_min`. The map is in the world's name and in `gymnasium_table(...).reward_map`.

Default horizons (`DEFAULT_HORIZONS`) cover the optimal episode of each env with room to spare;
pass `horizon=` to choose another.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .tabular import TabularMDP, WorldError

if TYPE_CHECKING:  # pragma: no cover
    import gymnasium

GYM_PREFIX = "gymnasium:"
INSTALL_HINT = "pip install 'privrl[gym]'"

# default horizon per env family (the env id without its version): see the module docstring
DEFAULT_HORIZONS: dict[str, int] = {
    "FrozenLake": 20,  # 4x4: shortest path 6; slippery: success prob. 0.199 at H=20, 0.744 at 100
    "FrozenLake8x8": 50,  # shortest path 14; slippery: success prob. 0.228 at H=50, 0.913 at 200
    "CliffWalking": 50,  # the optimal path (along the cliff) takes 13 steps
    "CliffWalkingSlippery": 50,
    "Taxi": 20,  # the longest optimal delivery takes 18 steps (pickup and dropoff included)
}

FAMILY_DESCRIPTIONS: dict[str, str] = {
    "FrozenLake": "cross a frozen lake to the goal without falling in a hole; reward 1 at the goal",
    "FrozenLake8x8": "FrozenLake on the 8x8 map",
    "CliffWalking": "walk along a cliff to the goal; -1 per step, -100 and back to start on a fall",
    "CliffWalkingSlippery": "CliffWalking where each move slips sideways with probability 2/3",
    "Taxi": "pick a passenger up and drop them off; -1 per step, +20 delivery, -10 illegal action",
}


class GymnasiumMissing(WorldError, ImportError):
    """gymnasium is not installed: the message says how to install the optional extra."""


def require_gymnasium() -> Any:
    """Import and return the gymnasium module, or raise GymnasiumMissing with the install hint."""
    try:
        import gymnasium
    except ImportError:
        raise GymnasiumMissing(
            f"gymnasium worlds need the optional dependency gymnasium: {INSTALL_HINT}"
        ) from None
    return gymnasium


# --- privrl -> gymnasium ---


def as_gymnasium_env(mdp: TabularMDP) -> gymnasium.Env:
    """A real `gymnasium.Env` playing `mdp`: Discrete(S) obs and Discrete(A) actions, H steps."""
    require_gymnasium()
    from ._gym_env import PrivrlEnv

    return PrivrlEnv(mdp)


# --- gymnasium -> privrl ---


@dataclass(frozen=True)
class RewardMap:
    """The public affine map r -> (r - r_min) / (r_max - r_min) from env units to [0, 1]."""

    r_min: float
    r_max: float

    @property
    def scale(self) -> float:
        """r_max - r_min (1 when the rewards are constant, so the map stays well defined)."""
        span = self.r_max - self.r_min
        return span if span > 0 else 1.0

    def __call__(self, r: np.ndarray | float) -> np.ndarray:
        """Map env-unit rewards to [0, 1]."""
        return (np.asarray(r, dtype=np.float64) - self.r_min) / self.scale

    def inverse(self, x: np.ndarray | float) -> np.ndarray:
        """Map [0, 1] rewards (or per-step means) back to env units."""
        return np.asarray(x, dtype=np.float64) * self.scale + self.r_min

    def __str__(self) -> str:
        """Compact formula, e.g. `r -> (r + 100) / 100`."""
        shift = f"r - {self.r_min:g}" if self.r_min >= 0 else f"r + {-self.r_min:g}"
        return f"r -> ({shift}) / {self.scale:g}"


@dataclass(frozen=True, eq=False)
class GymnasiumTable:
    """The exact stationary table of a gymnasium env, absorbing terminals, rewards in env units."""

    env_id: str
    make_kwargs: Mapping[str, Any]
    P: np.ndarray  # (S, A, S)
    R_env: np.ndarray  # (S, A) mean reward in the env's units
    d1: np.ndarray  # (S,)
    terminal: np.ndarray  # (S,) bool: states entered by a terminating transition (now absorbing)
    reward_map: RewardMap
    default_horizon: int | None

    @property
    def name(self) -> str:
        """`gymnasium:Id(kw=v) [r -> ...]`: the env, its options and the reward map."""
        kw = ",".join(f"{k}={v!r}" for k, v in sorted(self.make_kwargs.items()))
        return f"{GYM_PREFIX}{self.env_id}{f'({kw})' if kw else ''} [{self.reward_map}]"

    def to_mdp(self, horizon: int | None = None) -> TabularMDP:
        """The stationary TabularMDP over `horizon` steps (default: `default_horizon`)."""
        if horizon is None:
            horizon = self.default_horizon
        if horizon is None:
            raise WorldError(f"{GYM_PREFIX}{self.env_id} has no default horizon: pass horizon=H")
        R = np.clip(self.reward_map(self.R_env), 0.0, 1.0)  # clip float rounding only
        return TabularMDP.from_arrays(self.P, R, self.d1, horizon=horizon, name=self.name)


def env_family(env_id: str) -> str:
    """The env id without namespace and version: 'FrozenLake-v1' -> 'FrozenLake'."""
    base = env_id.rsplit("/", 1)[-1]
    head, sep, tail = base.rpartition("-v")
    return head if sep and tail.isdigit() else base


def default_horizon(env_id: str, spec_steps: int | None = None) -> int | None:
    """privrl's default horizon for `env_id`, else the env's registered time limit (or None)."""
    return DEFAULT_HORIZONS.get(env_family(env_id), spec_steps)


def _make(env_id: str, make_kwargs: Mapping[str, Any]) -> Any:
    """`gymnasium.make(env_id, **make_kwargs)`, with gymnasium's errors as WorldError."""
    gym = require_gymnasium()
    try:
        env = gym.make(env_id, **make_kwargs)
    except gym.error.Error as exc:
        raise WorldError(f"gymnasium cannot make {env_id!r}: {exc}") from None
    except TypeError as exc:
        raise WorldError(
            f"gymnasium cannot make {env_id!r} with options {dict(make_kwargs)}: {exc}"
        ) from None
    return env


def _discrete_size(space: Any, what: str, env_id: str) -> int:
    """The n of a Discrete space starting at 0, or WorldError."""
    from gymnasium.spaces import Discrete

    if not isinstance(space, Discrete) or int(space.start) != 0:
        raise WorldError(f"{env_id}: the {what} space must be Discrete(n) from 0, got {space}")
    return int(space.n)


def _initial_distribution(raw: Any, S: int, env_id: str) -> np.ndarray:
    """The exact initial distribution: `initial_state_distrib`, else `start_state_index`."""
    d1 = getattr(raw, "initial_state_distrib", None)
    if d1 is not None:
        d1 = np.array(d1, dtype=np.float64)  # our own copy
        if d1.shape != (S,):
            raise WorldError(
                f"{env_id}: initial_state_distrib has shape {d1.shape}, expected ({S},)"
            )
        return d1
    start = getattr(raw, "start_state_index", None)
    if start is None:
        raise WorldError(
            f"{env_id}: no initial_state_distrib or start_state_index; its initial distribution "
            "is not public, so privrl cannot build the exact world"
        )
    d1 = np.zeros(S)
    d1[int(start)] = 1.0
    return d1


def _entries(table: Any, s: int, a: int) -> Any:
    """`table[s][a]`, or () when the table has no such entry (dict or list tables)."""
    try:
        return table[s][a]
    except (KeyError, IndexError, TypeError):
        return ()


def _flatten_table(
    table: Any, S: int, A: int, env_id: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flatten `P[s][a]` into parallel arrays (s, a, prob, next, reward, terminated)."""
    rows = [(s, a, *t) for s in range(S) for a in range(A) for t in _entries(table, s, a)]
    if not rows:
        raise WorldError(f"{env_id}: the transition table env.unwrapped.P is empty")
    try:
        arr = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise WorldError(
            f"{env_id}: P[s][a] must hold (prob, next_state, reward, terminated) tuples ({exc})"
        ) from None
    if arr.ndim != 2 or arr.shape[1] != 6:
        raise WorldError(f"{env_id}: P[s][a] must hold (prob, next_state, reward, terminated)")
    sa = arr[:, :2].astype(np.intp)
    nxt = arr[:, 3]
    if not (np.isfinite(nxt).all() and (nxt == np.round(nxt)).all() and nxt.min() >= 0):
        raise WorldError(f"{env_id}: next states in P must be integers in [0, {S})")
    if nxt.max() >= S:
        raise WorldError(f"{env_id}: next state {int(nxt.max())} in P is outside [0, {S})")
    pairs = np.zeros((S, A), dtype=bool)
    pairs[sa[:, 0], sa[:, 1]] = True
    if not pairs.all():
        s, a = np.argwhere(~pairs)[0]
        raise WorldError(f"{env_id}: P[{s}][{a}] has no transitions")
    return sa, arr[:, 2], nxt.astype(np.intp), arr[:, 4], arr[:, 5] != 0


def _reachable(P: np.ndarray, d1: np.ndarray) -> np.ndarray:
    """States reachable from supp(d1) under some policy (boolean (S,))."""
    succ = (P > 0).any(axis=1)  # (S, S'): s' reachable from s in one step
    reach = d1 > 0
    while True:
        grown = reach | succ[reach].any(axis=0)
        if (grown == reach).all():
            return reach
        reach = grown


def gymnasium_table(env_id: str, **make_kwargs: Any) -> GymnasiumTable:
    """The exact table of a gymnasium env with a public `unwrapped.P` (see the module docstring)."""
    env = _make(env_id, make_kwargs)
    try:
        return _table(env_id, make_kwargs, env.unwrapped, env.spec)
    finally:
        env.close()


def _table(env_id: str, make_kwargs: Mapping[str, Any], raw: Any, spec: Any) -> GymnasiumTable:
    """Read the table of the unwrapped env `raw` (see `gymnasium_table`)."""
    if getattr(raw, "fickle_passenger", False):
        raise WorldError(
            f"{env_id}: fickle_passenger changes the destination outside the table P; "
            "only fickle_passenger=False has an exact tabular world"
        )
    table = getattr(raw, "P", None)
    if table is None or not hasattr(table, "__getitem__"):
        raise WorldError(
            f"{env_id} has no public transition table env.unwrapped.P "
            "(dict state -> action -> [(prob, next_state, reward, terminated)])"
        )
    S = _discrete_size(raw.observation_space, "observation", env_id)
    A = _discrete_size(raw.action_space, "action", env_id)
    sa, prob, nxt, rew, term = _flatten_table(table, S, A, env_id)
    P = np.zeros((S, A, S))
    np.add.at(P, (sa[:, 0], sa[:, 1], nxt), prob)
    R_env = np.zeros((S, A))
    np.add.at(R_env, (sa[:, 0], sa[:, 1]), prob * rew)
    terminal = np.zeros(S, dtype=bool)
    terminal[nxt[term & (prob > 0)]] = True
    P[terminal] = 0.0
    P[terminal, :, terminal.nonzero()[0]] = 1.0
    R_env[terminal] = 0.0
    d1 = _initial_distribution(raw, S, env_id)
    # exactness: no reachable live state may enter a terminal state without terminating
    reach = _reachable(P, d1)
    leak = ~term & (prob > 0) & terminal[nxt] & ~terminal[sa[:, 0]] & reach[sa[:, 0]]
    if leak.any():
        i = int(np.argmax(leak))
        raise WorldError(
            f"{env_id}: state {int(nxt[i])} is entered both with and without termination "
            f"(e.g. from P[{int(sa[i, 0])}][{int(sa[i, 1])}]); it cannot be made absorbing"
        )
    live = (prob > 0) & ~terminal[sa[:, 0]]
    rewards = np.concatenate([rew[live], [0.0]])  # 0: what an absorbed state earns
    reward_map = RewardMap(float(rewards.min()), float(rewards.max()))
    limit = getattr(spec, "max_episode_steps", None)
    for arr in (P, R_env, d1, terminal):
        arr.setflags(write=False)
    return GymnasiumTable(
        env_id=env_id,
        make_kwargs=dict(make_kwargs),
        P=P,
        R_env=R_env,
        d1=d1,
        terminal=terminal,
        reward_map=reward_map,
        default_horizon=default_horizon(env_id, limit),
    )


def from_gymnasium(env_id: str, horizon: int | None = None, **make_kwargs: Any) -> TabularMDP:
    """The exact privrl world of gymnasium's `env_id` (FrozenLake-v1, CliffWalking-v1, Taxi-v4)."""
    return gymnasium_table(env_id, **make_kwargs).to_mdp(horizon)


def gymnasium_params(env_id: str) -> dict[str, Any]:
    """The make() options of `env_id` with defaults (registered kwargs override __init__'s)."""
    gym = require_gymnasium()
    try:
        spec = gym.spec(env_id)
        entry = spec.entry_point
        cls = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
        sig = inspect.signature(cls)
    except (gym.error.Error, ValueError, TypeError, ImportError, AttributeError):
        return {}
    params = {
        name: p.default
        for name, p in sig.parameters.items()
        if p.default is not inspect.Parameter.empty and name != "render_mode"
    }
    params.update({k: v for k, v in (spec.kwargs or {}).items() if k != "render_mode"})
    return params
