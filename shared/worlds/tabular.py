"""Finite-horizon tabular MDPs: validated arrays, RiverSwim, Garnet, npz loading.

Arrays are 0-indexed: `P[h, s, a, s']`, `R[h, s, a]`, `d1[s]` with `h = 0..H-1` standing for the
paper's steps `1..H`. Every MDP owns read-only float64 copies of its arrays, so cached derived
quantities (cumulative rows for sampling) stay valid for its whole life.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
from privrl.seeding import generator

RewardNoise = Literal["deterministic", "bernoulli"]
REWARD_NOISES: tuple[str, ...] = ("deterministic", "bernoulli")
ROW_SUM_ATOL = 1e-8


class WorldError(ValueError):
    """An MDP definition is invalid; the message names the array, the index and the problem."""


# --- validation helpers (each raises WorldError with a precise, user-facing message) ---


class HorizonMissing(WorldError):
    """Stationary arrays carry no horizon, and none was given."""


def _fmt(x: float) -> str:
    """Format a number compactly for an error message."""
    return f"{float(x):.10g}"


def _index(name: str, axes: tuple[str, ...], idx: tuple[int, ...]) -> str:
    """Render an index like `P[h=3, s=2, a=1]`."""
    return f"{name}[" + ", ".join(f"{ax}={int(i)}" for ax, i in zip(axes, idx, strict=True)) + "]"


def _first_bad(name: str, axes: tuple[str, ...], bad: np.ndarray) -> tuple[str, tuple[int, ...]]:
    """Index string of the first True in `bad`, plus a note on how many others there are."""
    where = np.argwhere(bad)
    idx = tuple(int(i) for i in where[0])
    more = len(where) - 1
    note = f" (and {more} more such entr{'y' if more == 1 else 'ies'})" if more else ""
    return _index(name, axes, idx) + note, idx


def _as_float_array(name: str, x: Any) -> np.ndarray:
    """Convert `x` to a float64 array or raise WorldError saying why it cannot be."""
    if isinstance(x, np.ndarray) and x.dtype == object:
        raise WorldError(f"{name} must be a numeric array, got an object array")
    if np.iscomplexobj(x):
        raise WorldError(f"{name} must be real-valued, got a complex array")
    try:
        arr = np.asarray(x, dtype=np.float64)  # no copy yet; `_frozen` makes the one owned copy
    except (TypeError, ValueError) as exc:
        raise WorldError(f"{name} must be a numeric array ({exc})") from None
    return arr


def _check_finite(name: str, axes: tuple[str, ...], arr: np.ndarray) -> None:
    """Reject NaN/inf entries, naming the first one."""
    bad = ~np.isfinite(arr)
    if bad.any():
        where, idx = _first_bad(name, axes, bad)
        raise WorldError(f"{name} contains a non-finite value: {where} = {arr[idx]}")


def _check_distribution(name: str, axes: tuple[str, ...], arr: np.ndarray) -> None:
    """Check that `arr` is non-negative and sums to 1 over its last axis."""
    _check_finite(name, axes, arr)
    neg = arr < 0
    if neg.any():
        where, idx = _first_bad(name, axes, neg)
        raise WorldError(f"{name} must be non-negative: {where} = {_fmt(arr[idx])}")
    sums = arr.sum(axis=-1)
    bad = ~np.isclose(sums, 1.0, rtol=0.0, atol=ROW_SUM_ATOL)
    if bad.any():
        if arr.ndim == 1:
            raise WorldError(f"{name} sums to {_fmt(sums)}, expected 1")
        where, idx = _first_bad(name, axes[:-1], bad)
        raise WorldError(f"{where} sums to {_fmt(sums[idx])}, expected 1")


def _check_rewards(name: str, axes: tuple[str, ...], arr: np.ndarray) -> None:
    """Check that mean rewards are finite and lie in [0, 1]."""
    _check_finite(name, axes, arr)
    bad = (arr < 0.0) | (arr > 1.0)
    if bad.any():
        where, idx = _first_bad(name, axes, bad)
        raise WorldError(f"{where} = {_fmt(arr[idx])} is outside [0, 1]")


def _frozen(arr: np.ndarray) -> np.ndarray:
    """Return a read-only C-contiguous float64 copy."""
    out = np.array(arr, dtype=np.float64, order="C", copy=True)
    out.setflags(write=False)
    return out


def _cumulative(p: np.ndarray) -> np.ndarray:
    """Cumulative sums over the last axis, pinned to exactly 1 from each row's last positive entry.

    Inverse-CDF sampling with `u < 1` then can never return a zero-probability trailing state,
    even when floating-point cumsums end at 1 - 1e-16.
    """
    cdf = np.cumsum(p, axis=-1)
    n = p.shape[-1]
    last_pos = n - 1 - np.argmax(p[..., ::-1] > 0, axis=-1)
    np.copyto(cdf, 1.0, where=np.arange(n) >= last_pos[..., None])
    cdf.setflags(write=False)
    return cdf


# --- the MDP ---

_P_AXES = ("h", "s", "a", "s'")
_R_AXES = ("h", "s", "a")


@dataclass(frozen=True, eq=False)
class TabularMDP:
    """A validated finite-horizon tabular MDP with stage-dependent P_h, r_h."""

    P: np.ndarray  # (H, S, A, S) float64, rows sum to 1
    R: np.ndarray  # (H, S, A) mean rewards in [0, 1]
    d1: np.ndarray  # (S,) initial-state distribution
    name: str = "tabular"
    reward_noise: RewardNoise = "deterministic"
    # (S, A, S) bool: the next states the public model allows (a fact of the world's class,
    # e.g. a grid's neighbours), or None when the world declares none (`check_support`)
    support: np.ndarray | None = None

    def __post_init__(self) -> None:
        """Validate full-shape arrays and store read-only float64 copies (so caches stay valid)."""
        P = _as_float_array("P", self.P)
        R = _as_float_array("R", self.R)
        d1 = _as_float_array("d1", self.d1)
        if P.ndim != 4:
            raise WorldError(
                f"P must have shape (H, S, A, S), got {P.shape}; "
                "use TabularMDP.from_arrays for stationary (S, A, S) input"
            )
        if R.ndim != 3:
            raise WorldError(
                f"R must have shape (H, S, A), got {R.shape}; "
                "use TabularMDP.from_arrays for stationary (S, A) input"
            )
        _check_shapes(P.shape, R.shape, d1.shape)
        _check_distribution("P", _P_AXES, P)
        _check_rewards("R", _R_AXES, R)
        _check_distribution("d1", ("s",), d1)
        if self.reward_noise not in REWARD_NOISES:
            raise WorldError(
                f"reward_noise must be one of {REWARD_NOISES}, got {self.reward_noise!r}"
            )
        object.__setattr__(self, "P", _frozen(P))
        object.__setattr__(self, "R", _frozen(R))
        object.__setattr__(self, "d1", _frozen(d1))
        if self.support is not None:
            object.__setattr__(self, "support", check_support(self.support, P))

    @property
    def H(self) -> int:
        """Horizon (number of steps per episode)."""
        return int(self.P.shape[0])

    @property
    def S(self) -> int:
        """Number of states."""
        return int(self.P.shape[1])

    @property
    def A(self) -> int:
        """Number of actions."""
        return int(self.P.shape[2])

    @cached_property
    def cum_P(self) -> np.ndarray:
        """Cumulative transition rows (H, S, A, S) for inverse-CDF sampling (rows end at 1)."""
        return _cumulative(self.P)

    @cached_property
    def cum_d1(self) -> np.ndarray:
        """Cumulative initial distribution (S,) for inverse-CDF sampling (ends at 1)."""
        return _cumulative(self.d1)

    def is_stationary(self) -> bool:
        """True iff P_h and r_h are identical for every step h (time-homogeneous world)."""
        return bool(np.array_equal(self.P, np.broadcast_to(self.P[:1], self.P.shape))) and bool(
            np.array_equal(self.R, np.broadcast_to(self.R[:1], self.R.shape))
        )

    def __repr__(self) -> str:
        """Short description (arrays omitted) for logs."""
        return (
            f"TabularMDP(name={self.name!r}, H={self.H}, S={self.S}, A={self.A}, "
            f"reward_noise={self.reward_noise!r})"
        )

    @classmethod
    def from_arrays(
        cls,
        P: Any,
        R: Any,
        d1: Any,
        *,
        horizon: int | None = None,
        name: str = "tabular",
        reward_noise: RewardNoise = "deterministic",
        support: np.ndarray | None = None,
    ) -> TabularMDP:
        """Build an MDP from (S,A,S)/(H,S,A,S) P and (S,A)/(H,S,A) R, broadcasting stationary ones.

        `horizon` is required when both P and R are stationary; otherwise it is inferred from the
        stage-dependent array(s) and, if given, must agree with them.
        """
        P_arr = _as_float_array("P", P)
        R_arr = _as_float_array("R", R)
        d1_arr = _as_float_array("d1", d1)
        if P_arr.ndim not in (3, 4):
            raise WorldError(f"P must have shape (S, A, S) or (H, S, A, S), got {P_arr.shape}")
        if R_arr.ndim not in (2, 3):
            raise WorldError(f"R must have shape (S, A) or (H, S, A), got {R_arr.shape}")
        if horizon is not None:
            if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer):
                raise WorldError(f"horizon must be an int, got {horizon!r}")
            if horizon < 1:
                raise WorldError(f"horizon must be >= 1, got {horizon}")
            horizon = int(horizon)
        horizons = {}
        if P_arr.ndim == 4:
            horizons["P"] = P_arr.shape[0]
        if R_arr.ndim == 3:
            horizons["R"] = R_arr.shape[0]
        if "P" in horizons and "R" in horizons and horizons["P"] != horizons["R"]:
            raise WorldError(
                f"P has horizon {horizons['P']} (shape {P_arr.shape}) but R has horizon "
                f"{horizons['R']} (shape {R_arr.shape})"
            )
        for arr_name, h in horizons.items():
            if horizon is not None and h != horizon:
                raise WorldError(f"horizon={horizon} disagrees with {arr_name}'s horizon {h}")
        if horizon is None:
            if not horizons:
                raise HorizonMissing(
                    "horizon must be given when P is (S, A, S) and R is (S, A) (stationary arrays)"
                )
            horizon = next(iter(horizons.values()))
        # validate before broadcasting so that messages use the caller's own indices
        _check_shapes(P_arr.shape[-3:], R_arr.shape[-2:], d1_arr.shape)
        _check_distribution("P", _P_AXES[-P_arr.ndim :], P_arr)
        _check_rewards("R", _R_AXES[-R_arr.ndim :], R_arr)
        _check_distribution("d1", ("s",), d1_arr)
        if horizon < 1:
            raise WorldError(f"horizon must be >= 1, got {horizon}")
        S, A = P_arr.shape[-3], P_arr.shape[-2]
        P_full = np.broadcast_to(P_arr, (horizon, S, A, S))
        R_full = np.broadcast_to(R_arr, (horizon, S, A))
        return cls(P=P_full, R=R_full, d1=d1_arr, name=name, reward_noise=reward_noise,
                   support=support)


def _check_shapes(
    p_shape: tuple[int, ...], r_shape: tuple[int, ...], d1_shape: tuple[int, ...]
) -> None:
    """Check that P (..., S, A, S), R (..., S, A) and d1 (S,) have consistent shapes."""
    S, A, S2 = p_shape[-3:]
    if S < 1 or A < 1 or any(d < 1 for d in p_shape):
        raise WorldError(f"P must have at least one step, state and action, got shape {p_shape}")
    if S2 != S:
        raise WorldError(
            f"P has shape {p_shape}: its last axis (next state, {S2}) must equal the number of "
            f"states S={S}"
        )
    if tuple(r_shape[-2:]) != (S, A):
        raise WorldError(f"R has shape {r_shape} but P implies (S, A) = ({S}, {A})")
    if len(r_shape) == 3 and len(p_shape) == 4 and r_shape[0] != p_shape[0]:
        raise WorldError(f"P has horizon {p_shape[0]} but R has horizon {r_shape[0]}")
    if len(r_shape) == 3 and r_shape[0] < 1:
        raise WorldError(f"R must have at least one step, got shape {r_shape}")
    if tuple(d1_shape) != (S,):
        raise WorldError(f"d1 has shape {d1_shape} but P implies (S,) = ({S},)")


def check_support(support: Any, P: np.ndarray) -> np.ndarray:
    """A read-only bool (S, A, S) copy of a declared transition support, or WorldError when its
    shape is wrong or some step's P puts mass outside it."""
    arr = np.asarray(support)
    if arr.dtype != bool:
        raise WorldError(f"support must be a bool array, got dtype {arr.dtype}")
    if arr.shape != P.shape[1:]:
        raise WorldError(f"support has shape {arr.shape}, expected (S, A, S) = {P.shape[1:]}")
    outside = (P > 0) & ~arr
    if outside.any():
        where, _ = _first_bad("P", _P_AXES, outside)
        raise WorldError(f"{where} > 0 lies outside the declared support")
    out = np.array(arr, dtype=bool, order="C", copy=True)
    out.setflags(write=False)
    return out


def any_action_support(reach: np.ndarray) -> np.ndarray:
    """(S, A, S) bool: every action of a state may reach what any of its actions may (so the
    declared support says which states neighbour which, not which action goes where)."""
    return np.broadcast_to(reach.any(axis=1, keepdims=True), reach.shape).copy()


# --- concrete worlds ---


def riverswim(horizon: int = 20, n_states: int = 6) -> TabularMDP:
    """RiverSwim as in Chowdhury & Zhou's make_riverSwim: 0=left, 1=right, s1=0."""
    if n_states < 2:
        raise WorldError(f"riverswim needs n_states >= 2, got {n_states}")
    if horizon < 1:
        raise WorldError(f"horizon must be >= 1, got {horizon}")
    S = n_states
    LEFT, RIGHT = 0, 1
    P = np.zeros((S, 2, S))
    s = np.arange(S)
    P[s, LEFT, np.maximum(s - 1, 0)] = 1.0
    mid = np.arange(1, S - 1)
    P[mid, RIGHT, mid + 1] = 0.35
    P[mid, RIGHT, mid] = 0.6
    P[mid, RIGHT, mid - 1] = 0.05
    P[0, RIGHT, 0] = 0.4
    P[0, RIGHT, 1] = 0.6
    P[S - 1, RIGHT, S - 1] = 0.6
    P[S - 1, RIGHT, S - 2] = 0.4
    R = np.zeros((S, 2))
    R[0, LEFT] = 0.005
    R[S - 1, RIGHT] = 1.0
    d1 = np.zeros(S)
    d1[0] = 1.0
    return TabularMDP.from_arrays(P, R, d1, horizon=horizon, name="riverswim",
                                  support=any_action_support(P > 0))


def garnet(
    n_states: int,
    n_actions: int,
    horizon: int,
    *,
    branching: int | None = None,
    seed: int,
    stationary: bool = True,
) -> TabularMDP:
    """Random Garnet MDP from generator(seed, "garnet"): `branching` successors per (s, a).

    Successor sets are uniform random subsets, their probabilities a broken stick (uniform
    spacings = Dirichlet(1,...,1)); mean rewards are uniform in [0, 1]; s1 = 0. With
    `stationary=False` every step h gets its own independent draw.
    """
    if n_states < 1 or n_actions < 1 or horizon < 1:
        raise WorldError(
            f"garnet needs n_states, n_actions, horizon >= 1, got "
            f"({n_states}, {n_actions}, {horizon})"
        )
    S, A, H = int(n_states), int(n_actions), int(horizon)
    b = min(max(2, S // 5), S) if branching is None else int(branching)
    if not 1 <= b <= S:
        raise WorldError(f"branching must be in [1, n_states={S}], got {branching}")
    rng = generator(seed, "garnet")
    lead = (S, A) if stationary else (H, S, A)
    n_rows = int(np.prod(lead))
    succ = np.argsort(rng.random((n_rows, S)), axis=-1)[:, :b]  # uniform random b-subsets
    cuts = np.sort(rng.random((n_rows, b - 1)), axis=-1)
    probs = np.diff(cuts, prepend=0.0, append=1.0, axis=-1)
    P = np.zeros((n_rows, S))
    np.put_along_axis(P, succ, probs, axis=-1)
    R = rng.random(lead)
    d1 = np.zeros(S)
    d1[0] = 1.0
    name = f"garnet(S={S},A={A},H={H},b={b},seed={seed}{'' if stationary else ',nonstat'})"
    return TabularMDP.from_arrays(P.reshape(*lead, S), R, d1, horizon=H, name=name)


# --- loading ---


def load_npz(
    path: str | os.PathLike[str],
    *,
    horizon: int | None = None,
    reward_noise: RewardNoise = "deterministic",
) -> TabularMDP:
    """Load an MDP from an .npz with keys P, R, d1 (and optional scalar H); clear WorldError."""
    path_str = os.fspath(path)
    if not os.path.exists(path_str):
        raise WorldError(f"world file {path_str!r} does not exist")
    if os.path.isdir(path_str):
        raise WorldError(f"world file {path_str!r} is a directory, expected an .npz file")
    try:
        loaded = np.load(path_str, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise WorldError(
            f"world file {path_str!r} is not a readable .npz archive ({exc})"
        ) from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise WorldError(
            f"world file {path_str!r} holds a single array; expected an .npz archive with keys "
            "P, R, d1 (use numpy.savez)"
        )
    with loaded as data:
        keys = set(data.files)
        missing = [k for k in ("P", "R", "d1") if k not in keys]
        if missing:
            raise WorldError(
                f"world file {path_str!r} is missing key(s) {', '.join(missing)} "
                f"(found: {', '.join(sorted(keys)) or 'none'}; required: P, R, d1; optional: H)"
            )
        try:
            arrays = {k: data[k] for k in ("P", "R", "d1", "H") if k in keys}
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise WorldError(f"world file {path_str!r}: cannot read arrays ({exc})") from None
    if "H" in arrays:
        h_arr = arrays["H"]
        if h_arr.size != 1 or not np.issubdtype(h_arr.dtype, np.number):
            raise WorldError(f"world file {path_str!r}: H must be a scalar integer, got {h_arr!r}")
        h_val = h_arr.reshape(()).item()
        if isinstance(h_val, float) and not float(h_val).is_integer():
            raise WorldError(f"world file {path_str!r}: H must be an integer, got {h_val}")
        h_file = int(h_val)
        if h_file < 1:
            raise WorldError(f"world file {path_str!r}: H must be >= 1, got {h_file}")
        if horizon is not None and horizon != h_file:
            raise WorldError(
                f"horizon={horizon} disagrees with H={h_file} stored in world file {path_str!r}"
            )
        horizon = h_file
    name = os.path.splitext(os.path.basename(path_str))[0] or "tabular"
    try:
        return TabularMDP.from_arrays(
            arrays["P"],
            arrays["R"],
            arrays["d1"],
            horizon=horizon,
            name=name,
            reward_noise=reward_noise,
        )
    except WorldError as exc:
        raise type(exc)(f"world file {path_str!r}: {exc}") from None
