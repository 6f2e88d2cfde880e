"""Linear MDPs: p_h(s'|s,a) = <phi(s,a), mu_h(s')>, r_h(s,a) = <phi(s,a), theta_h>, phi public.

As for linear mixtures (`privrl.worlds.linear_mixture`), two parts with two owners:

* `LinearMDPModel` is **public**: the feature map phi(s,a) in R^d over a finite state space (the
  LSVI-UCB learners know nothing else; rewards are learned by regression on reported rewards).
  A run names it by a `ModelSpec` (a registered name and its public parameters, or the
  `inline-phi` arrays of a world loaded from a file).
* `LinearMDP` is the users' **world**: a `TabularMDP` (rollout, V*, V^pi and exact regret by
  backward induction work unchanged) that keeps its model and its secret mu_h, theta_h, and
  checks P == <phi, mu>, R == <phi, theta> and the norm assumptions at construction
  (Jin et al. 2020 / Luyo Asm. 1, with Ngo's erratum E1: ||phi|| <= 1, ||theta_h|| <= sqrt(d),
  ||sum_s' mu_h(s') v(s')|| <= sqrt(d) ||v||_inf).

Worlds (Luyo, Garcelon, Lazaric & Pirotta 2021; Ngo, Vietri & Wu, ICML 2022):

  lin-cube       Luyo's two-state hypercube: actions {-1,+1}^(d-2), secret signs nu_h (`seed`)
  lin-tab        Luyo's LIN-Tab: RiverSwim (Luyo et al.'s probabilities), one-hot features, d = S A
  river-chain    Ngo's Env A "RiverChain-4": one-hot features, d = 2 S
  latent-levels  Ngo's Env B: a genuinely low-rank linear MDP, d = 4 < S A = 24
  lin-mix        a random linear MDP of any d (ours: simplex features, d latent next-state
                 distributions), for scaling in d
"""

from __future__ import annotations

import itertools
import math
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from privrl.seeding import generator
from privrl.worlds.linear_mixture import (
    LINEAR_TOL,
    FeatureSizes,
    ModelRegistry,
    sign_actions,
)
from privrl.worlds.model_spec import ModelSpec
from privrl.worlds.tabular import TabularMDP, WorldError, _frozen

INLINE_PHI = "inline-phi"
VERTEX_LIMIT = 12  # exact max over v in {-1,+1}^S of ||sum mu v|| up to this S
NPZ_KEYS = ("phi", "mu", "theta", "d1", "H")


@dataclass(frozen=True, eq=False)
class LinearMDPModel(FeatureSizes):
    """What an LSVI-UCB learner may know: the feature map phi(s,a) (S, A, d), ||phi|| <= 1."""

    name: str
    horizon: int
    features: np.ndarray  # (S, A, d)


@dataclass(frozen=True, eq=False)
class LinearMDP(TabularMDP):
    """A linear-MDP world: a validated `TabularMDP` plus its public model and its secret
    mu (H, S', d) and theta (H, d); the linear structure and norm bounds are checked here."""

    model: LinearMDPModel | None = None
    mu: np.ndarray | None = None  # (H, S', d), secret
    theta: np.ndarray | None = None  # (H, d), secret
    spec: ModelSpec | None = None

    def __post_init__(self) -> None:
        """Validate the tabular arrays, then the linear structure and the norm bounds."""
        super().__post_init__()
        if self.model is None or self.mu is None or self.theta is None or self.spec is None:
            raise WorldError("a linear MDP needs its model, mu, theta and spec")
        mu, theta = _frozen(self.mu), _frozen(self.theta)
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "theta", theta)
        check_linear(self.model.features, mu, theta, self.P, self.R)

    def __repr__(self) -> str:
        """Short description for logs (arrays omitted; mu and theta are secret)."""
        return f"LinearMDP(name={self.name!r}, H={self.H}, S={self.S}, A={self.A}, d={self.d})"

    @property
    def d(self) -> int:
        """Feature dimension."""
        assert self.model is not None
        return self.model.d


def mu_norm_bound(mu: np.ndarray) -> float:
    """max_h max_{||v||_inf <= 1} ||sum_s' mu_h(s') v(s')||: exact over the vertices {-1,+1}^S
    (a convex function of v) up to VERTEX_LIMIT states, else the bound of each coordinate by
    its l1 mass, sqrt(sum_i (sum_s' |mu_h^i(s')|)^2)."""
    n_states = mu.shape[1]
    if n_states <= VERTEX_LIMIT:
        vertices = np.array(list(itertools.product((-1.0, 1.0), repeat=n_states)))
        return float(np.linalg.norm(np.einsum("hsd,vs->hvd", mu, vertices), axis=-1).max())
    return float(np.linalg.norm(np.abs(mu).sum(axis=1), axis=-1).max())


def check_linear(phi: np.ndarray, mu: np.ndarray, theta: np.ndarray, P: np.ndarray,
                 R: np.ndarray) -> None:
    """P == <phi, mu>, R == <phi, theta>, ||phi|| <= 1, ||theta_h|| <= sqrt(d), and
    ||sum mu_h v|| <= sqrt(d) ||v||_inf (WorldError naming the first violation)."""
    H, S, A = R.shape
    d = phi.shape[-1]
    if phi.shape != (S, A, d) or mu.shape != (H, S, d) or theta.shape != (H, d):
        raise WorldError(f"phi, mu, theta must have shapes (S,A,d), (H,S,d), (H,d) = "
                         f"{(S, A, d)}, {(H, S, d)}, {(H, d)}; got {phi.shape}, {mu.shape}, "
                         f"{theta.shape}")
    gap = np.abs(np.einsum("sad,htd->hsat", phi, mu) - P).max()
    if gap > LINEAR_TOL:
        raise WorldError(f"P differs from <phi, mu> by {gap:.3g}")
    gap = np.abs(np.einsum("sad,hd->hsa", phi, theta) - R).max()
    if gap > LINEAR_TOL:
        raise WorldError(f"R differs from <phi, theta> by {gap:.3g}")
    top = float(np.linalg.norm(phi, axis=-1).max())
    if top > 1.0 + LINEAR_TOL:
        raise WorldError(f"max ||phi(s,a)|| = {top:.6g} exceeds 1")
    root_d = math.sqrt(d)
    top = float(np.linalg.norm(theta, axis=-1).max())
    if top > root_d + LINEAR_TOL:
        raise WorldError(f"max ||theta_h|| = {top:.6g} exceeds sqrt(d) = {root_d:.6g}")
    top = mu_norm_bound(mu)
    if top > root_d + LINEAR_TOL:
        raise WorldError(f"max ||sum mu_h v|| / ||v||_inf = {top:.6g} exceeds sqrt(d)")


def _build(model: LinearMDPModel, mu: np.ndarray, theta: np.ndarray, d1: np.ndarray, name: str,
           spec: ModelSpec) -> LinearMDP:
    """A world from its model and secret parameters (round-off negatives of P set to 0)."""
    P = np.einsum("sad,htd->hsat", model.features, mu)
    P = np.where((P < 0) & (P > -LINEAR_TOL), 0.0, P)
    R = np.clip(np.einsum("sad,hd->hsa", model.features, theta), 0.0, 1.0)
    return LinearMDP(P, R, d1, name, model=model, mu=mu, theta=theta, spec=spec)


def _start_at_zero(n_states: int) -> np.ndarray:
    d1 = np.zeros(n_states)
    d1[0] = 1.0
    return d1


# --- LIN-Cube (docs/explanation/linear-mdp.md#worlds) ---


def lin_cube_model(horizon: int = 5, d: int = 5) -> LinearMDPModel:
    """LIN-Cube's public features: phi(x0,a) = (a/sqrt(2m), 1/sqrt(2), 0), phi(x1,a) = e_d."""
    if d < 5:
        raise WorldError(f"lin-cube needs d >= 5, got {d}")
    if horizon < 2:
        raise WorldError(f"lin-cube needs a horizon >= 2, got {horizon}")
    m = d - 2
    acts = sign_actions(m + 1)  # {-1,+1}^m as rows
    phi = np.zeros((2, len(acts), d))
    phi[0, :, :m] = acts / math.sqrt(2 * m)
    phi[0, :, m] = 1.0 / math.sqrt(2)
    phi[1, :, d - 1] = 1.0
    return LinearMDPModel("lin-cube", horizon, _frozen(phi))


def lin_cube(horizon: int = 5, d: int = 5, gap: float = 0.05, seed: int = 0) -> LinearMDP:
    """LIN-Cube with secret signs nu_h in {-gap,+gap}^(d-2) from generator(seed, "lin-cube")."""
    model = lin_cube_model(horizon, d)
    m, delta0 = d - 2, 1.0 / horizon
    if not (gap > 0 and m * gap <= min(delta0, 1 - delta0) + 1e-12):
        raise WorldError(f"lin-cube needs 0 < (d-2)*gap <= min(1/H, 1-1/H) = "
                         f"{min(delta0, 1 - delta0):.6g}, got {m * gap:.6g}")
    nu = gap * np.where(generator(seed, "lin-cube").random((horizon, m)) < 0.5, -1.0, 1.0)
    mu = np.zeros((horizon, 2, d))
    mu[:, 1, :m] = math.sqrt(2 * m) * nu
    mu[:, 1, m] = math.sqrt(2) * delta0
    mu[:, 1, d - 1] = 1.0
    mu[:, 0, :m] = -math.sqrt(2 * m) * nu
    mu[:, 0, m] = math.sqrt(2) * (1.0 - delta0)
    theta = np.zeros((horizon, d))
    theta[:, d - 1] = 1.0
    spec = ModelSpec(name="lin-cube", params={"horizon": horizon, "d": d})
    return _build(model, mu, theta, _start_at_zero(2),
                  f"lin-cube(d={d},H={horizon},gap={gap:g},seed={seed})", spec)


# --- tabular worlds as linear MDPs (Jin et al. 2020, Example 2.1): phi(s,a) = e_(s,a) ---


def one_hot_model(name: str, horizon: int, n_states: int, n_actions: int) -> LinearMDPModel:
    """One-hot features e_(s,a) in R^(S A) (index s A + a)."""
    phi = np.eye(n_states * n_actions).reshape(n_states, n_actions, n_states * n_actions)
    return LinearMDPModel(name, horizon, _frozen(phi))


def _one_hot_world(model: LinearMDPModel, P: np.ndarray, R: np.ndarray, name: str,
                   spec: ModelSpec) -> LinearMDP:
    """A stationary table (S, A, S'), (S, A) as a linear MDP: mu_h(s') = P(s'|.,.), theta = r."""
    H, (S, A) = model.horizon, R.shape
    mu = np.broadcast_to(P.reshape(S * A, S).T, (H, S, S * A))
    theta = np.broadcast_to(R.reshape(S * A), (H, S * A))
    return _build(model, mu, theta, _start_at_zero(S), name, spec)


def river_table(n_states: int, start: tuple[float, float], middle: tuple[float, float, float],
                end: tuple[float, float], bank_reward: float) -> tuple[np.ndarray, np.ndarray]:
    """A river (S, 2, S) table and rewards (S, 2): left moves down w.p. 1; right at 0 goes
    (up, stay) w.p. `start`, inside (up, stay, down) w.p. `middle`, at the end (stay, down)
    w.p. `end`. r(0, left) = bank_reward, r(S-1, right) = 1."""
    S, s = n_states, np.arange(n_states)
    P = np.zeros((S, 2, S))
    P[s, 0, np.maximum(s - 1, 0)] = 1.0
    mid = np.arange(1, S - 1)
    P[mid, 1, mid + 1], P[mid, 1, mid], P[mid, 1, mid - 1] = middle
    P[0, 1, 1], P[0, 1, 0] = start
    P[S - 1, 1, S - 1], P[S - 1, 1, S - 2] = end
    R = np.zeros((S, 2))
    R[0, 0], R[S - 1, 1] = bank_reward, 1.0
    return P, R


def lin_tab_model(horizon: int = 10, n_states: int = 4) -> LinearMDPModel:
    """LIN-Tab's public features: one-hot over (s, a), d = 2 S."""
    if n_states < 2 or horizon < 1:
        raise WorldError(f"lin-tab needs n_states >= 2 and horizon >= 1, got {n_states}, "
                         f"{horizon}")
    return one_hot_model("lin-tab", horizon, n_states, 2)


def lin_tab(horizon: int = 10, n_states: int = 4) -> LinearMDP:
    """LIN-Tab: RiverSwim with Luyo et al.'s probabilities (right at 0: to 1 w.p. 0.4; interior:
    0.35 up, 0.6 stay, 0.05 down; at S-1: stay 0.6, down 0.4), r(0,left) = 0.005,
    r(S-1,right) = 1, as a linear MDP with one-hot features."""
    model = lin_tab_model(horizon, n_states)
    P, R = river_table(n_states, (0.4, 0.6), (0.35, 0.6, 0.05), (0.6, 0.4), 0.005)
    spec = ModelSpec(name="lin-tab", params={"horizon": horizon, "n_states": n_states})
    return _one_hot_world(model, P, R, f"lin-tab(riverswim S={n_states},H={horizon})", spec)


def river_chain_model(horizon: int = 6, n_states: int = 4) -> LinearMDPModel:
    """RiverChain's public features: one-hot over (s, a), d = 2 S."""
    if n_states < 3 or horizon < 1:
        raise WorldError(f"river-chain needs n_states >= 3 and horizon >= 1, got {n_states}, "
                         f"{horizon}")
    return one_hot_model("river-chain", horizon, n_states, 2)


def river_chain(horizon: int = 6, n_states: int = 4) -> LinearMDP:
    """Ngo's Env A: left moves down w.p. 1; right at 0: up 0.7, stay 0.3; interior: up 0.7,
    stay 0.2, down 0.1; at the end: stay 0.9, down 0.1. r(0,left) = 0.2, r(end,right) = 1."""
    model = river_chain_model(horizon, n_states)
    P, R = river_table(n_states, (0.7, 0.3), (0.7, 0.2, 0.1), (0.9, 0.1), 0.2)
    spec = ModelSpec(name="river-chain", params={"horizon": horizon, "n_states": n_states})
    return _one_hot_world(model, P, R, f"river-chain(S={n_states},H={horizon})", spec)


# --- LatentLevels (Ngo et al. 2022's experiments; docs/explanation/linear-mdp.md#worlds) ---


def latent_levels_model(horizon: int = 5) -> LinearMDPModel:
    """LatentLevels' public features over 8 states (level s//2, parity s%2) and 3 actions."""
    if horizon < 1:
        raise WorldError(f"latent-levels needs a horizon >= 1, got {horizon}")
    eye = np.eye(4)
    phi = np.zeros((8, 3, 4))
    for s in range(8):
        level, up = s // 2, min(s // 2 + 1, 3)
        phi[s, 0] = eye[max(level - 1, 0)]
        w = 0.7 if s % 2 == 0 else 0.4
        phi[s, 1] = w * eye[up] + (1 - w) * eye[level]
        phi[s, 2] = eye[level]
    return LinearMDPModel("latent-levels", horizon, _frozen(phi))


def latent_levels(horizon: int = 5) -> LinearMDP:
    """Ngo's Env B: mu^i uniform on states {2i, 2i+1}; theta = (0.1, 0, 0, 1)."""
    model = latent_levels_model(horizon)
    mu = np.zeros((8, 4))
    mu[np.arange(8), np.arange(8) // 2] = 0.5
    theta = np.array([0.1, 0.0, 0.0, 1.0])
    spec = ModelSpec(name="latent-levels", params={"horizon": horizon})
    return _build(model, np.broadcast_to(mu, (horizon, 8, 4)),
                  np.broadcast_to(theta, (horizon, 4)), _start_at_zero(8),
                  f"latent-levels(H={horizon})", spec)


# --- LIN-Mix: a random low-rank linear MDP (d latent next-state distributions) ---


def lin_mix_model(horizon: int = 5, n_states: int = 10, n_actions: int = 4, d: int = 5,
                  feature_seed: int = 0) -> LinearMDPModel:
    """LIN-Mix's public features: phi(s,a) ~ Dirichlet(1_d) (on the simplex: ||phi|| <= 1)."""
    if min(horizon, n_states, n_actions, d) < 1:
        raise WorldError(f"lin-mix needs horizon, n_states, n_actions, d >= 1, got "
                         f"({horizon}, {n_states}, {n_actions}, {d})")
    phi = generator(feature_seed, "lin-mix", "features").dirichlet(
        np.ones(d), size=(n_states, n_actions))
    return LinearMDPModel("lin-mix", horizon, _frozen(phi))


def lin_mix(horizon: int = 5, n_states: int = 10, n_actions: int = 4, d: int = 5,
            feature_seed: int = 0, seed: int = 0) -> LinearMDP:
    """A random linear MDP of any d: secret mu_h^i ~ Dirichlet(0.3 1_S) (so P is a mixture of
    d next-state distributions) and theta_h ~ U[0,1]^d, from `seed`."""
    model = lin_mix_model(horizon, n_states, n_actions, d, feature_seed)
    rng = generator(seed, "lin-mix", "parameters")
    mu = np.swapaxes(rng.dirichlet(np.full(n_states, 0.3), size=(horizon, d)), 1, 2)
    theta = rng.random((horizon, d))
    spec = ModelSpec(name="lin-mix", params={"horizon": horizon, "n_states": n_states,
                                             "n_actions": n_actions, "d": d,
                                             "feature_seed": feature_seed})
    return _build(model, mu, theta, _start_at_zero(n_states),
                  f"lin-mix(S={n_states},A={n_actions},d={d},H={horizon},seed={seed})", spec)


# --- public models by name, and files ---

MODELS: dict[str, Callable[..., LinearMDPModel]] = {
    "lin-cube": lin_cube_model,
    "lin-tab": lin_tab_model,
    "river-chain": river_chain_model,
    "latent-levels": latent_levels_model,
    "lin-mix": lin_mix_model,
}


def _inline_phi(params: dict[str, Any]) -> LinearMDPModel:
    """A model given by its features (a world from a file), checked like the file was."""
    if set(params) != {"horizon", "features"}:
        raise WorldError("an inline-phi model takes exactly horizon and features (S, A, d)")
    phi = np.asarray(params["features"], dtype=np.float64)
    if phi.ndim != 3 or not np.isfinite(phi).all():
        raise WorldError(f"inline-phi features must be finite with shape (S, A, d), got "
                         f"{phi.shape}")
    if np.linalg.norm(phi, axis=-1).max() > 1.0 + LINEAR_TOL:
        raise WorldError("inline-phi features must have norm <= 1")
    return LinearMDPModel(INLINE_PHI, int(params["horizon"]), _frozen(phi))


linear_mdp_model: ModelRegistry[LinearMDPModel] = ModelRegistry(
    "linear-MDP model", MODELS, INLINE_PHI, _inline_phi)
"""The public linear-MDP model a run configuration names (built once per distinct spec)."""



def load_linear_mdp_npz(path: str | os.PathLike[str], *, horizon: int | None = None
                        ) -> LinearMDP:
    """Load a linear MDP: phi (S,A,d), mu (H,S,d), theta (H,d), d1 (S,), optional H.
    The public model is `inline-phi` (the features, never mu or theta)."""
    path_str = os.fspath(path)
    where = f"world file {path_str!r}"
    try:
        with np.load(path_str, allow_pickle=False) as data:
            unknown = sorted(set(data.files) - set(NPZ_KEYS))
            missing = [k for k in ("phi", "mu", "theta", "d1") if k not in data.files]
            if unknown or missing:
                raise WorldError(f"{where}: a linear MDP takes phi, mu, theta, d1 (and H); "
                                 f"unknown {unknown}, missing {missing}")
            arrays = {k: np.asarray(data[k], dtype=np.float64) for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        if isinstance(exc, WorldError):
            raise
        raise WorldError(f"{where} is not a readable .npz archive ({exc})") from None
    if any(not np.isfinite(a).all() for a in arrays.values()):
        raise WorldError(f"{where} contains a non-finite value")
    steps = arrays["theta"].shape[0] if arrays["theta"].ndim == 2 else -1
    if horizon is not None and horizon != steps:
        raise WorldError(f"horizon={horizon} disagrees with theta's {steps} steps in {where}")
    try:
        model = LinearMDPModel(INLINE_PHI, steps, _frozen(arrays["phi"]))
        spec = ModelSpec(name=INLINE_PHI, params={"horizon": steps,
                                                  "features": model.features.tolist()})
        name = os.path.splitext(os.path.basename(path_str))[0] or "linear-mdp"
        return _build(model, arrays["mu"], arrays["theta"], arrays["d1"], name, spec)
    except WorldError as exc:
        raise WorldError(f"{where}: {exc}") from None


def save_linear_mdp_npz(mdp: LinearMDP, path: str | os.PathLike[str]) -> None:
    """Write a world in the format `load_linear_mdp_npz` reads."""
    assert mdp.model is not None and mdp.mu is not None and mdp.theta is not None
    np.savez(os.fspath(path), phi=mdp.model.features, mu=mdp.mu, theta=mdp.theta, d1=mdp.d1,
             H=np.int64(mdp.H))
