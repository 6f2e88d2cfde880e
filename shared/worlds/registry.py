"""Worlds by name: `make("riverswim")`, `make("garnet", seed=3)`, `make("gymnasium:Taxi-v4")`, ...

Names: the built-in `riverswim`, `garnet`, `strens-chain`, `gridworld`, `frozen-lake`,
`frozen-lake-8x8` (`privrl.worlds.classic`) and `chain` (the policy-evaluation chain MRP of Balle
et al., `privrl.worlds.chain`; its users report first-visit returns), the linear-mixture worlds
`lm-hard`, `lm-mix`, `zhou-mix` and `zhou-tabular` (see `privrl.worlds.linear_mixture`), the
linear MDPs `lin-cube`, `lin-tab`, `river-chain` and `latent-levels` (`privrl.worlds.linear_mdp`),
`gymnasium:<EnvId>` for any gymnasium env with a public transition table (see
`privrl.worlds.gym`), and a path ending in `.npz` (`load_npz`, or `load_linear_npz` when the
archive holds `features`).
`list_worlds()` describes every name with its parameters, their defaults and its default horizon.
"""

from __future__ import annotations

import inspect
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .chain import ChainMRP
from .classic import frozen_lake, gridworld, strens_chain
from .gym import (
    DEFAULT_HORIZONS,
    FAMILY_DESCRIPTIONS,
    GYM_PREFIX,
    INSTALL_HINT,
    GymnasiumMissing,
    env_family,
    gymnasium_params,
    gymnasium_table,
    require_gymnasium,
)
from .linear_mdp import (
    latent_levels,
    lin_cube,
    lin_mix,
    lin_tab,
    load_linear_mdp_npz,
    river_chain,
)
from .linear_mixture import (
    linear_npz_params,
    lm_hard,
    lm_mix,
    load_linear_npz,
    zhou_mix,
    zhou_tabular,
)
from .tabular import HorizonMissing, TabularMDP, WorldError, garnet, load_npz, riverswim

NPZ_SUFFIX = ".npz"
BUILTIN_HORIZON = 20  # default horizon of riverswim and garnet (and of the CLI's --horizon)


class UnknownWorld(WorldError):
    """No world has this name; `known` lists the names that exist."""

    def __init__(self, name: str, known: list[str]) -> None:
        """Name the unknown world and list the known ones."""
        self.known = known
        super().__init__(f"unknown world {name!r}: known worlds are {', '.join(known)}")


@dataclass(frozen=True)
class WorldInfo:
    """An entry of `list_worlds()`: name, parameters with defaults, default horizon, description."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    default_horizon: int | None = None
    description: str = ""


def _riverswim(horizon: int, n_states: int = 6) -> TabularMDP:
    """RiverSwim with `n_states` states."""
    return riverswim(horizon, n_states=n_states)


def _garnet(
    horizon: int,
    n_states: int = 10,
    n_actions: int = 3,
    seed: int = 0,
    branching: int | None = None,
    stationary: bool = True,
) -> TabularMDP:
    """A seeded Garnet world."""
    return garnet(
        n_states, n_actions, horizon, branching=branching, seed=seed, stationary=stationary
    )


def _frozen_lake(horizon: int, slippery: bool = True) -> TabularMDP:
    """FrozenLake on gymnasium's 4x4 map."""
    return frozen_lake(horizon, "4x4", slippery)


def _frozen_lake_8x8(horizon: int, slippery: bool = True) -> TabularMDP:
    """FrozenLake on gymnasium's 8x8 map."""
    return frozen_lake(horizon, "8x8", slippery)


def _chain(
    horizon: int,
    n_states: int = 40,
    stay: float = 0.5,
    gamma: float = 0.99,
    start: str = "uniform",
    reward: str = "goal",
) -> ChainMRP:
    """The chain MRP (the horizon is ignored: trajectories run until the goal)."""
    try:
        return ChainMRP(n_states, stay, gamma, start, reward)  # type: ignore[arg-type]
    except ValueError as exc:
        raise WorldError(f"world 'chain': {exc}") from None


@dataclass(frozen=True)
class _Builtin:
    """A named world built by a function (horizon, **params)."""

    build: Callable[..., TabularMDP | ChainMRP]
    description: str
    horizon: int = BUILTIN_HORIZON  # rows of the policy table (the chain's policy is stationary)

    @property
    def params(self) -> dict[str, Any]:
        """The builder's parameters (except horizon) with their defaults."""
        sig = inspect.signature(self.build).parameters
        return {k: p.default for k, p in sig.items() if k != "horizon"}


BUILTINS: dict[str, _Builtin] = {
    "riverswim": _Builtin(
        _riverswim,
        "RiverSwim chain: a small reward at the left bank, a large "
        "one upstream against the current (Strehl & Littman)",
    ),
    "garnet": _Builtin(
        _garnet,
        "random Garnet MDP: `branching` random successors per (s, a), "
        "uniform mean rewards, drawn from `seed`",
    ),
    "strens-chain": _Builtin(
        strens_chain,
        "Strens's chain: 'forward' pays 1 in the last state, 'return' goes back to the start"
        " and pays 0.2; the other action happens with probability `slip`",
    ),
    "gridworld": _Builtin(
        gridworld,
        "size x size grid, start and goal at opposite corners; entering the goal pays 1 and"
        " absorbs; a move slips to either side with probability `slip`/2 each",
    ),
    "frozen-lake": _Builtin(
        _frozen_lake,
        "gymnasium's FrozenLake-v1 built from its public map (no gymnasium needed): holes and"
        " goal absorb, the goal pays 1; slippery: each move goes sideways with probability 2/3",
    ),
    "frozen-lake-8x8": _Builtin(
        _frozen_lake_8x8, "frozen-lake on gymnasium's 8x8 map", horizon=50,
    ),
    "lm-hard": _Builtin(
        lm_hard,
        "linear mixture, Zhou et al.'s lower-bound instance (Luyo et al.): actions {-1,+1}^(d-1), "
        "secret signs mu_h from `seed`, |A| = 2^(d-1), S = H+2; gap 0.05 is the easy one",
        horizon=5,
    ),
    "lm-mix": _Builtin(
        lm_mix,
        "linear mixture of d known Dirichlet(1) kernels (Luyo et al.): public features and known "
        "rewards from `feature_seed`, secret mixture weights from `seed`",
        horizon=5,
    ),
    "zhou-mix": _Builtin(
        zhou_mix,
        "linear mixture E2 (Zhou): Dirichlet(0.3) kernels and simplex reward features from "
        "`feature_seed`, secret theta_p, theta_r from `seed`, Bernoulli rewards",
        horizon=4,
    ),
    "zhou-tabular": _Builtin(
        zhou_tabular,
        "linear mixture E1 (Zhou): RiverSwim as indicator features, d = S^2 A, d2 = S A",
        horizon=10,
    ),
    "lin-cube": _Builtin(
        lin_cube,
        "linear MDP, a two-state hypercube (after LM-Hard): actions {-1,+1}^(d-2), secret signs "
        "nu_h from `seed`; for lsvi-ucb-batched / lsvi-ucb-switching",
        horizon=5,
    ),
    "lin-tab": _Builtin(
        lin_tab,
        "linear MDP, Luyo et al.: RiverSwim with one-hot features e_(s,a), d = 2 S",
        horizon=10,
    ),
    "river-chain": _Builtin(
        river_chain,
        "linear MDP, Ngo et al.'s 'RiverChain-4': a river with a myopic trap, one-hot features",
        horizon=6,
    ),
    "latent-levels": _Builtin(
        latent_levels,
        "linear MDP, Ngo et al.: 8 states, 3 actions, genuinely low rank (d = 4 < S A = 24)",
        horizon=5,
    ),
    "lin-mix": _Builtin(
        lin_mix,
        "linear MDP of any d (ours): features on the simplex from `feature_seed`, secret mixture"
        " of d next-state distributions and rewards from `seed`",
        horizon=5,
    ),
    "chain": _Builtin(
        _chain,
        "policy evaluation (dp-lsw, dp-lsl): the chain MRP of Balle et al. 2016, one action,"
        " the goal N-1 absorbing; users report first-visit returns",
        horizon=1,
    ),
}
NPZ_PARAMS: dict[str, Any] = {"reward_noise": "deterministic"}


def _check_params(name: str, params: dict[str, Any], allowed: dict[str, Any]) -> None:
    """Reject parameters the world does not take, naming the ones it does."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) or "no parameters"
        raise WorldError(f"world {name!r} does not take {', '.join(unknown)} (it takes: {takes})")



def _npz_holds(path: str, array: str) -> bool:
    """Whether the .npz archive at `path` holds an array named `array` (False if unreadable)."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as data:
            return array in data.files
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, AttributeError):
        return False

def make(name: str, horizon: int | None = None, **params: Any) -> TabularMDP | ChainMRP:
    """The world called `name` over `horizon` steps (default: the world's own default horizon)."""
    if not isinstance(name, str) or not name:
        raise WorldError(f"a world name must be a non-empty string, got {name!r}")
    if name in BUILTINS:
        entry = BUILTINS[name]
        _check_params(name, params, entry.params)
        return entry.build(entry.horizon if horizon is None else horizon, **params)
    if name.startswith(GYM_PREFIX):
        env_id = name.removeprefix(GYM_PREFIX)
        if not env_id:
            raise WorldError(f"{name!r} names no env: use e.g. {GYM_PREFIX}FrozenLake-v1")
        return gymnasium_table(env_id, **params).to_mdp(horizon)
    if name.endswith(NPZ_SUFFIX):
        if _npz_holds(name, "phi"):  # a linear MDP's features
            _check_params(name, params, {})
            return load_linear_mdp_npz(name, horizon=horizon)
        if _npz_holds(name, "features"):  # a linear mixture's features
            _check_params(name, params, linear_npz_params())
            return load_linear_npz(name, horizon=horizon, **params)
        _check_params(name, params, NPZ_PARAMS)
        try:
            return load_npz(name, horizon=horizon, **params)
        except HorizonMissing:  # stationary arrays: the builtins' default horizon
            return load_npz(name, horizon=BUILTIN_HORIZON, **params)
    raise UnknownWorld(name, [w.name for w in list_worlds()])


def _gymnasium_worlds() -> list[WorldInfo]:
    """The installed gymnasium envs privrl knows defaults for (none when gymnasium is missing)."""
    try:
        gym = require_gymnasium()
    except GymnasiumMissing:
        return []
    ids = sorted(
        env_id
        for env_id in gym.registry
        if "/" not in env_id and env_family(env_id) in DEFAULT_HORIZONS
    )
    return [
        WorldInfo(
            name=f"{GYM_PREFIX}{env_id}",
            params=gymnasium_params(env_id),
            default_horizon=DEFAULT_HORIZONS[env_family(env_id)],
            description=f"gymnasium {env_id}: {FAMILY_DESCRIPTIONS[env_family(env_id)]}",
        )
        for env_id in ids
    ]


def list_worlds() -> list[WorldInfo]:
    """Every world name `make` accepts, with parameters, defaults, horizon and a description."""
    worlds = [
        WorldInfo(name, entry.params, entry.horizon, entry.description)
        for name, entry in BUILTINS.items()
    ]
    worlds += _gymnasium_worlds()
    worlds.append(
        WorldInfo(
            name=f"{GYM_PREFIX}<EnvId>",
            params={},
            default_horizon=None,
            description="any gymnasium env with a public table env.unwrapped.P (parameters: its "
            "make() options; rewards mapped affinely to [0, 1]; horizon: privrl's default, else "
            f"the env's time limit); needs {INSTALL_HINT}",
        )
    )
    worlds.append(
        WorldInfo(
            name=f"FILE{NPZ_SUFFIX}",
            params=dict(NPZ_PARAMS),
            default_horizon=None,
            description="arrays P, R, d1 (and optional H) saved with numpy.savez; horizon: the "
            "file's H, else required. A linear-mixture world instead: features (S,A,S,d), theta "
            "(H,d), d1, and rewards (known) or reward_features + reward_theta; optional c_w. A"
            " linear MDP: phi (S,A,d), mu (H,S,d), theta (H,d), d1",
        )
    )
    return worlds
