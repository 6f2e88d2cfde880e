"""Linear-mixture MDPs: p_h(s'|s,a) = <phi(s'|s,a), theta_h> with public features phi.

Two parts with two owners (docs/explanation/architecture.md, parties):

* `LinearMixtureModel` is **public**: the feature map phi(s'|s,a) in R^d, either the known mean
  rewards r_h(s,a) (Luyo: rewards known) or public reward features varphi(s,a) in R^{d2} (Zhou:
  rewards learned by regression), and the public bounds an algorithm calibrates with. A run names
  it in its configuration by a `ModelSpec` (a registered name and its public parameters, or the
  arrays themselves for a world loaded from a file), never by the world's secret seed.
* `LinearMixtureMDP` is the users' **world**: a `TabularMDP` (so rollout, V*, V^pi and exact regret
  by backward induction work unchanged) that also keeps its model and its true parameters theta_h
  (and theta_{h,r}). The true theta never goes into a run configuration.

Worlds (Luyo, Garcelon, Lazaric & Pirotta 2021; Zhou 2022):

  lm-hard       Zhou et al. (2021)'s lower-bound instance (Luyo et al. 2021), actions {-1,+1}^{d-1}
  lm-mix        a mixture of d known Dirichlet(1) kernels, known uniform rewards (Luyo et al. 2021)
  zhou-mix      Zhou's E2: Dirichlet(0.3) base kernels, simplex reward features, Bernoulli rewards
  zhou-tabular  Zhou's E1: a tabular MDP (RiverSwim) written as a linear mixture

Public parameters and secret ones are separate seeds: `feature_seed` draws what the learner may
know (kernels, reward features, known rewards), `seed` draws the unknown parameters. Arrays are
0-indexed like `TabularMDP`: features[s, a, s', :], theta[h, :] with h = 0..H-1.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from privrl.seeding import generator
from privrl.worlds.model_spec import ModelSpec
from privrl.worlds.tabular import TabularMDP, WorldError, _frozen, riverswim

LINEAR_TOL = 1e-9  # |P - <phi, theta>| and norm-assumption slack
VERTEX_LIMIT = 12  # exact max of ||phi_v|| over the 2^S vertices of [0,1]^S up to this S
INLINE = "inline"
ModelT = TypeVar("ModelT")


class FeatureSizes:
    """S, A and d of a public feature array (S, A, ..., d) (a linear mixture's or MDP's)."""

    features: np.ndarray

    @property
    def S(self) -> int:
        """Number of states."""
        return int(self.features.shape[0])

    @property
    def A(self) -> int:
        """Number of actions."""
        return int(self.features.shape[1])

    @property
    def d(self) -> int:
        """Dimension of the (transition) features."""
        return int(self.features.shape[-1])


@dataclass(frozen=True, eq=False)
class LinearMixtureModel(FeatureSizes):
    """What a learner may know about a linear-mixture world: features, rewards or reward
    features, and public bounds (all data-independent)."""

    name: str
    horizon: int
    features: np.ndarray  # (S, A, S, d): phi(s'|s,a)
    rewards: np.ndarray | None  # (H, S, A) known mean rewards, or None (learned)
    reward_features: np.ndarray | None  # (S, A, d2) varphi(s,a), or None
    c_w: float  # ||theta_h|| <= c_w (public bound)
    feature_bound: float  # ||phi_v(s,a)|| <= feature_bound for every v in [0,1]^S
    reward_bound: float = 0.0  # ||theta_{h,r}|| <= reward_bound (0 without reward features)

    @property
    def d2(self) -> int:
        """Dimension of the reward features (0 when rewards are known)."""
        return 0 if self.reward_features is None else int(self.reward_features.shape[-1])

    def value_features(self, values: np.ndarray) -> np.ndarray:
        """phi_V(s,a) = sum_s' phi(s'|s,a) V(s') for tables V (..., S): shape (..., S, A, d)."""
        return np.einsum("satd,...t->...sad", self.features, values)

    def transitions(self, theta: np.ndarray) -> np.ndarray:
        """p_h(s'|s,a) = <phi(s'|s,a), theta_h> for parameters (H, d): shape (H, S, A, S)."""
        return np.einsum("satd,hd->hsat", self.features, theta)


@dataclass(frozen=True, eq=False)
class LinearMixtureMDP(TabularMDP):
    """A linear-mixture world: a validated `TabularMDP` plus its public model and its true
    (secret) parameters; P == <phi, theta> is checked at construction."""

    model: LinearMixtureModel | None = None
    theta: np.ndarray | None = None  # (H, d), secret
    reward_theta: np.ndarray | None = None  # (H, d2), secret (None when rewards are known)
    spec: ModelSpec | None = None  # how a run names the public model

    def __post_init__(self) -> None:
        """Validate the tabular arrays, then the linear structure against them."""
        super().__post_init__()
        if self.model is None or self.theta is None or self.spec is None:
            raise WorldError("a linear-mixture world needs its model, theta and spec")
        theta = _frozen(self.theta)
        object.__setattr__(self, "theta", theta)
        if self.reward_theta is not None:
            object.__setattr__(self, "reward_theta", _frozen(self.reward_theta))
        _check_structure(self.model, self.P, self.R, theta, self.reward_theta)

    def __repr__(self) -> str:
        """Short description for logs (arrays omitted; the parameters are secret)."""
        model = self.model
        assert model is not None
        return (f"LinearMixtureMDP(name={self.name!r}, H={self.H}, S={self.S}, A={self.A}, "
                f"d={model.d}, d2={model.d2}, reward_noise={self.reward_noise!r})")


def _check_structure(model: LinearMixtureModel, P: np.ndarray, R: np.ndarray, theta: np.ndarray,
                     reward_theta: np.ndarray | None) -> None:
    """P = <phi, theta>, known rewards = R, ||theta_h|| <= c_w (and the reward analogues)."""
    H = P.shape[0]
    if theta.shape != (H, model.d):
        raise WorldError(f"theta must have shape (H, d) = {(H, model.d)}, got {theta.shape}")
    gap = np.abs(model.transitions(theta) - P).max()
    if gap > LINEAR_TOL:
        raise WorldError(f"P differs from <phi, theta> by {gap:.3g}")
    norms = np.linalg.norm(theta, axis=-1)
    if norms.max() > model.c_w + LINEAR_TOL:
        h = int(norms.argmax())
        raise WorldError(f"||theta[h={h}]|| = {norms[h]:.6g} exceeds the public bound c_w = "
                         f"{model.c_w:.6g}")
    if model.rewards is not None and not np.allclose(model.rewards, R, rtol=0, atol=LINEAR_TOL):
        raise WorldError("the known rewards of the model differ from the world's rewards")
    if model.reward_features is not None:
        if reward_theta is None or reward_theta.shape != (H, model.d2):
            raise WorldError(f"reward_theta must have shape (H, d2) = {(H, model.d2)}")
        r = np.einsum("sae,he->hsa", model.reward_features, reward_theta)
        if np.abs(r - R).max() > LINEAR_TOL:
            raise WorldError("the mean rewards differ from <varphi, theta_r>")
        if np.linalg.norm(reward_theta, axis=-1).max() > model.reward_bound + LINEAR_TOL:
            raise WorldError(f"||theta_r|| exceeds the public bound {model.reward_bound:.6g}")


def feature_norm_bound(features: np.ndarray) -> float:
    """max ||phi_v(s,a)|| over v in [0,1]^S: exact over the vertices {0,1}^S (the norm is convex
    in v) when S <= VERTEX_LIMIT, else the triangle bound max_{s,a} sum_s' ||phi(s'|s,a)||."""
    n_states = features.shape[0]
    if n_states <= VERTEX_LIMIT:
        vertices = np.array(list(itertools.product((0.0, 1.0), repeat=n_states)))
        phi_v = np.einsum("satd,vt->vsad", features, vertices)
        return float(np.linalg.norm(phi_v, axis=-1).max())
    return float(np.linalg.norm(features, axis=-1).sum(axis=-1).max())


def _build(model: LinearMixtureModel, theta: np.ndarray, d1: np.ndarray, name: str,
           spec: ModelSpec, rewards: np.ndarray | None = None,
           reward_theta: np.ndarray | None = None, reward_noise: str = "deterministic",
           ) -> LinearMixtureMDP:
    """A world from its model and parameters: P = <phi, theta> (round-off negatives -> 0)."""
    if theta.shape != (model.horizon, model.d):
        raise WorldError(f"theta must have shape (H, d) = {(model.horizon, model.d)}, got "
                         f"{theta.shape}")
    P = model.transitions(theta)
    P = np.where((P < 0) & (P > -LINEAR_TOL), 0.0, P)
    if rewards is None:
        if model.rewards is not None:
            rewards = model.rewards
        else:
            assert model.reward_features is not None and reward_theta is not None
            rewards = np.einsum("sae,he->hsa", model.reward_features, reward_theta)
            rewards = np.clip(rewards, 0.0, 1.0)  # round-off only; checked against the model
    return LinearMixtureMDP(P, rewards, d1, name, reward_noise,  # type: ignore[arg-type]
                            model=model, theta=theta, reward_theta=reward_theta, spec=spec)


# --- LM-Hard (Luyo et al. 2021; docs/explanation/linear-mixture.md#worlds) ---


def sign_actions(d: int) -> np.ndarray:
    """The actions {-1,+1}^{d-1} as rows: bit j of the action index set means +1 at j."""
    idx = np.arange(2 ** (d - 1))[:, None]
    return np.where((idx >> np.arange(d - 1)) & 1, 1.0, -1.0)


def lm_hard_model(horizon: int, d: int = 4, gap: float = 0.05) -> LinearMixtureModel:
    """LM-Hard's public part: states x_1..x_{H+2}, features and the known reward (at x_{H+2})."""
    if d < 2:
        raise WorldError(f"lm-hard needs d >= 2, got {d}")
    if horizon < 2:
        raise WorldError(f"lm-hard needs a horizon >= 2, got {horizon}")
    delta0 = 1.0 / horizon
    if not (gap > 0 and (d - 1) * gap <= min(delta0, 1 - delta0) + 1e-12):
        raise WorldError(f"lm-hard needs 0 < (d-1)*gap <= min(1/H, 1-1/H) = "
                         f"{min(delta0, 1 - delta0):.6g}, got (d-1)*gap = {(d - 1) * gap:.6g}")
    S, acts = horizon + 2, sign_actions(d)
    A = len(acts)
    c_a = math.sqrt(1.0 / (1.0 + gap * (d - 1)))
    c_b = math.sqrt(gap / (1.0 + gap * (d - 1)))
    phi = np.zeros((S, A, S, d))
    for i in range(horizon):  # x_{i+1} -> x_{i+2} or the rewarding x_{H+2} (0-based: i -> i+1, S-1)
        phi[i, :, i + 1, 0] = c_a * (1.0 - delta0)
        phi[i, :, i + 1, 1:] = -c_b * acts
        phi[i, :, S - 1, 0] = c_a * delta0
        phi[i, :, S - 1, 1:] = c_b * acts
    for s in (S - 2, S - 1):  # absorbing
        phi[s, :, s, 0] = c_a
    rewards = np.zeros((horizon, S, A))
    rewards[:, S - 1, :] = 1.0
    return LinearMixtureModel("lm-hard", horizon, _frozen(phi), _frozen(rewards), None,
                              c_w=1.0 + (d - 1) * gap, feature_bound=1.0)


def lm_hard(horizon: int = 5, d: int = 4, gap: float = 0.05, seed: int = 0) -> LinearMixtureMDP:
    """LM-Hard with secret signs mu_h in {-gap,+gap}^{d-1} from generator(seed, "lm-hard")."""
    model = lm_hard_model(horizon, d, gap)
    c_a = math.sqrt(1.0 / (1.0 + gap * (d - 1)))
    c_b = math.sqrt(gap / (1.0 + gap * (d - 1)))
    mu = gap * np.where(generator(seed, "lm-hard").random((horizon, d - 1)) < 0.5, -1.0, 1.0)
    theta = np.concatenate([np.full((horizon, 1), 1.0 / c_a), mu / c_b], axis=1)
    d1 = np.zeros(model.S)
    d1[0] = 1.0
    spec = ModelSpec(name="lm-hard", params={"horizon": horizon, "d": d, "gap": gap})
    return _build(model, theta, d1, f"lm-hard(d={d},H={horizon},gap={gap:g},seed={seed})", spec)


# --- LM-Mix (Luyo et al. 2021) and Zhou's E2 (docs/explanation/linear-mixture.md#worlds) ---


def _kernels(feature_seed: int, tag: str, n_kernels: int, n_states: int, n_actions: int,
             concentration: float) -> np.ndarray:
    """n_kernels base kernels P_j(.|s,a) ~ Dirichlet(concentration 1_S): shape (S, A, S, n)."""
    rng = generator(feature_seed, tag, "kernels")
    kernels = rng.dirichlet(np.full(n_states, concentration), size=(n_kernels, n_states, n_actions))
    return np.moveaxis(kernels, 0, -1)


def lm_mix_model(horizon: int, n_states: int = 5, n_actions: int = 3, d: int = 4,
                 feature_seed: int = 0) -> LinearMixtureModel:
    """LM-Mix's public part: features P_j/sqrt(d) and known rewards U[0,1] (feature_seed)."""
    _check_sizes("lm-mix", horizon, n_states, n_actions, d)
    phi = _kernels(feature_seed, "lm-mix", d, n_states, n_actions, 1.0) / math.sqrt(d)
    rewards = generator(feature_seed, "lm-mix", "rewards").random((horizon, n_states, n_actions))
    return LinearMixtureModel("lm-mix", horizon, _frozen(phi), _frozen(rewards), None,
                              c_w=math.sqrt(d), feature_bound=1.0)


def lm_mix(horizon: int = 5, n_states: int = 5, n_actions: int = 3, d: int = 4,
           feature_seed: int = 0, seed: int = 0) -> LinearMixtureMDP:
    """LM-Mix with secret weights q_h ~ Dirichlet(1_d), theta_h = sqrt(d) q_h (seed)."""
    model = lm_mix_model(horizon, n_states, n_actions, d, feature_seed)
    q = generator(seed, "lm-mix", "weights").dirichlet(np.ones(d), size=horizon)
    d1 = np.zeros(n_states)
    d1[0] = 1.0
    spec = ModelSpec(name="lm-mix", params={"horizon": horizon, "n_states": n_states,
                                            "n_actions": n_actions, "d": d,
                                            "feature_seed": feature_seed})
    name = f"lm-mix(S={n_states},A={n_actions},d={d},H={horizon},seed={seed})"
    return _build(model, math.sqrt(d) * q, d1, name, spec)


def zhou_mix_model(horizon: int, n_states: int = 6, n_actions: int = 3, d: int = 4,
                   reward_dim: int = 4, feature_seed: int = 0) -> LinearMixtureModel:
    """E2's public part: kernels Dirichlet(0.3) as features, reward features in the simplex."""
    _check_sizes("zhou-mix", horizon, n_states, n_actions, d)
    if reward_dim < 1:
        raise WorldError(f"zhou-mix needs reward_dim >= 1, got {reward_dim}")
    phi = _kernels(feature_seed, "zhou-mix", d, n_states, n_actions, 0.3)
    varphi = generator(feature_seed, "zhou-mix", "reward-features").dirichlet(
        np.ones(reward_dim), size=(n_states, n_actions))
    return LinearMixtureModel("zhou-mix", horizon, _frozen(phi), None, _frozen(varphi), c_w=1.0,
                              feature_bound=feature_norm_bound(phi),
                              reward_bound=math.sqrt(reward_dim))


def zhou_mix(horizon: int = 4, n_states: int = 6, n_actions: int = 3, d: int = 4,
             reward_dim: int = 4, feature_seed: int = 0, seed: int = 0) -> LinearMixtureMDP:
    """E2 with secret theta_{h,p} ~ Dirichlet(1), theta_{h,r} ~ U[0,1]^{d2}; Bernoulli rewards."""
    model = zhou_mix_model(horizon, n_states, n_actions, d, reward_dim, feature_seed)
    rng = generator(seed, "zhou-mix", "theta")
    theta = rng.dirichlet(np.ones(d), size=horizon)
    theta_r = rng.random((horizon, reward_dim))
    d1 = np.zeros(n_states)
    d1[0] = 1.0
    spec = ModelSpec(name="zhou-mix", params={
        "horizon": horizon, "n_states": n_states, "n_actions": n_actions, "d": d,
        "reward_dim": reward_dim, "feature_seed": feature_seed})
    name = f"zhou-mix(S={n_states},A={n_actions},d={d},d2={reward_dim},H={horizon},seed={seed})"
    return _build(model, theta, d1, name, spec, reward_theta=theta_r, reward_noise="bernoulli")


def zhou_tabular_model(horizon: int, n_states: int = 3) -> LinearMixtureModel:
    """E1's public part: indicator features e_(s,a,s') and e_(s,a) (d = S^2 A, d2 = S A)."""
    base = riverswim(horizon, n_states=n_states)
    S, A = base.S, base.A
    phi = np.eye(S * A * S).reshape(S, A, S, S * A * S)
    varphi = np.eye(S * A).reshape(S, A, S * A)
    return LinearMixtureModel("zhou-tabular", horizon, _frozen(phi), None, _frozen(varphi),
                              c_w=math.sqrt(S * A), feature_bound=math.sqrt(S),
                              reward_bound=math.sqrt(S * A))


def zhou_tabular(horizon: int = 10, n_states: int = 3) -> LinearMixtureMDP:
    """E1 over RiverSwim: theta_{h,p} = vec(P_h), theta_{h,r} = vec(r_h); Bernoulli rewards."""
    model = zhou_tabular_model(horizon, n_states)
    base = riverswim(horizon, n_states=n_states)
    theta = base.P.reshape(horizon, -1)
    theta_r = base.R.reshape(horizon, -1)
    spec = ModelSpec(name="zhou-tabular", params={"horizon": horizon, "n_states": n_states})
    return _build(model, theta, base.d1, f"zhou-tabular(riverswim S={n_states},H={horizon})", spec,
                  reward_theta=theta_r, reward_noise="bernoulli")


def _check_sizes(name: str, horizon: int, n_states: int, n_actions: int, d: int) -> None:
    """Refuse sizes a world cannot have."""
    if min(horizon, n_states, n_actions, d) < 1:
        raise WorldError(f"{name} needs horizon, n_states, n_actions, d >= 1, got "
                         f"({horizon}, {n_states}, {n_actions}, {d})")


# --- the registry of public models, and files ---

MODELS: dict[str, Callable[..., LinearMixtureModel]] = {
    "lm-hard": lm_hard_model,
    "lm-mix": lm_mix_model,
    "zhou-mix": zhou_mix_model,
    "zhou-tabular": zhou_tabular_model,
}


class ModelRegistry(Generic[ModelT]):
    """Public models by name (`builders`) or inline arrays (`inline`), each built once per
    distinct spec; `kind` names them in errors ("public model", "linear-MDP model")."""

    def __init__(self, kind: str, builders: Mapping[str, Callable[..., ModelT]],
                 inline: str, build_inline: Callable[[dict[str, Any]], ModelT]) -> None:
        self.kind, self.builders = kind, builders
        self.inline, self.build_inline = inline, build_inline
        self._cached = functools.lru_cache(maxsize=32)(self._build)

    def __call__(self, spec: ModelSpec) -> ModelT:
        """The model `spec` names (a WorldError naming what is wrong otherwise)."""
        return self._cached(json.dumps(spec.model_dump(mode="json"), sort_keys=True))

    def _build(self, key: str) -> ModelT:
        spec = ModelSpec.model_validate(json.loads(key))
        params = dict(spec.params)
        if spec.name == self.inline:
            return self.build_inline(params)
        if spec.name not in self.builders:
            raise WorldError(f"unknown {self.kind} {spec.name!r}: known are "
                             f"{', '.join([*self.builders, self.inline])}")
        try:
            return self.builders[spec.name](**params)
        except TypeError as exc:
            raise WorldError(f"{self.kind} {spec.name!r}: {exc}") from None


def _inline_model(params: Mapping[str, Any]) -> LinearMixtureModel:
    """A model given by its arrays (a world from a file): checked like the file was."""
    allowed = {"horizon", "features", "rewards", "reward_features", "c_w", "feature_bound",
               "reward_bound"}
    unknown = sorted(set(params) - allowed)
    if unknown or "features" not in params or "horizon" not in params:
        raise WorldError(f"an inline model takes horizon, features and optionally rewards, "
                         f"reward_features, c_w, feature_bound, reward_bound (unknown: {unknown})")
    arrays = {k: _array(k, params[k]) for k in ("features", "rewards", "reward_features")
              if params.get(k) is not None}
    return _model_from_arrays("inline", int(params["horizon"]), arrays, params)


public_model: ModelRegistry[LinearMixtureModel] = ModelRegistry(
    "public model", MODELS, INLINE, _inline_model)
"""The public linear-mixture model a run configuration names (built once per distinct spec)."""


def _array(name: str, value: Any) -> np.ndarray:
    """A finite float64 array or a WorldError naming `name`."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise WorldError(f"{name} must be a numeric array") from None
    if not np.isfinite(arr).all():
        raise WorldError(f"{name} contains a non-finite value")
    return arr


def _model_from_arrays(name: str, horizon: int, arrays: Mapping[str, np.ndarray],
                       bounds: Mapping[str, Any]) -> LinearMixtureModel:
    """Check shapes of a model's arrays and fill in the bounds that were not given."""
    phi = arrays["features"]
    if phi.ndim != 4 or phi.shape[0] != phi.shape[2] or min(phi.shape) < 1:
        raise WorldError(f"features must have shape (S, A, S, d), got {phi.shape}")
    S, A = phi.shape[:2]
    rewards = arrays.get("rewards")
    if rewards is not None:
        if rewards.shape == (S, A):
            rewards = np.broadcast_to(rewards, (horizon, S, A))
        if rewards.shape != (horizon, S, A):
            raise WorldError(f"rewards must have shape (H, S, A) = {(horizon, S, A)} or (S, A), "
                             f"got {rewards.shape}")
    varphi = arrays.get("reward_features")
    if varphi is not None and (varphi.ndim != 3 or varphi.shape[:2] != (S, A)):
        raise WorldError(f"reward_features must have shape (S, A, d2) = ({S}, {A}, d2), got "
                         f"{varphi.shape}")
    if rewards is None and varphi is None:
        raise WorldError("a linear-mixture world needs known rewards or reward_features")
    if varphi is not None and np.linalg.norm(varphi, axis=-1).max() > 1 + LINEAR_TOL:
        raise WorldError("reward_features must have norm <= 1 (Zhou's Assumption 1)")
    c_w = bounds.get("c_w")
    fb = bounds.get("feature_bound")
    rb = bounds.get("reward_bound")
    return LinearMixtureModel(
        name, horizon, _frozen(phi), None if rewards is None else _frozen(rewards),
        None if varphi is None else _frozen(varphi),
        c_w=float(c_w) if c_w is not None else math.inf,
        feature_bound=float(fb) if fb is not None else feature_norm_bound(phi),
        reward_bound=float(rb) if rb is not None else (
            math.sqrt(varphi.shape[-1]) if varphi is not None else 0.0))


NPZ_KEYS = ("features", "theta", "d1", "rewards", "reward_features", "reward_theta", "H", "c_w")



def linear_npz_params() -> dict[str, Any]:
    """The parameters `make` accepts for a linear-mixture .npz (besides the horizon)."""
    return {"reward_noise": None}


def load_linear_npz(path: str | os.PathLike[str], *, horizon: int | None = None,
                    reward_noise: str | None = None) -> LinearMixtureMDP:
    """Load a linear-mixture world: features (S,A,S,d), theta (H,d), d1 (S,), and rewards (H,S,A)
    or (S,A) (known) or reward_features (S,A,d2) with reward_theta (H,d2); optional H and c_w.

    The public model is inline in the run configuration (the arrays, never theta)."""
    path_str = os.fspath(path)
    where = f"world file {path_str!r}"
    try:
        with np.load(path_str, allow_pickle=False) as data:
            unknown = sorted(set(data.files) - set(NPZ_KEYS))
            if unknown:
                raise WorldError(f"{where}: unknown key(s) {', '.join(unknown)} (a linear-mixture "
                                 f"world takes {', '.join(NPZ_KEYS)})")
            missing = [k for k in ("features", "theta", "d1") if k not in data.files]
            if missing:
                raise WorldError(f"{where} is missing key(s) {', '.join(missing)} (required: "
                                 "features, theta, d1, and rewards or reward_features + "
                                 "reward_theta)")
            arrays = {k: _array(k, data[k]) for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        if isinstance(exc, WorldError):
            raise
        raise WorldError(f"{where} is not a readable .npz archive ({exc})") from None
    theta = arrays["theta"]
    if theta.ndim != 2:
        raise WorldError(f"{where}: theta must have shape (H, d), got {theta.shape}")
    if "H" in arrays:
        h_file = int(arrays["H"].reshape(-1)[0])
        if horizon is not None and horizon != h_file:
            raise WorldError(f"horizon={horizon} disagrees with H={h_file} stored in {where}")
    if horizon is not None and horizon != theta.shape[0]:
        raise WorldError(f"horizon={horizon} disagrees with theta's {theta.shape[0]} steps "
                         f"in {where}")
    horizon = theta.shape[0]
    if ("reward_features" in arrays) != ("reward_theta" in arrays):
        raise WorldError(f"{where}: reward_features and reward_theta go together")
    c_w = float(arrays["c_w"].reshape(-1)[0]) if "c_w" in arrays else float(
        np.linalg.norm(theta, axis=-1).max())
    try:
        model = _model_from_arrays("inline", horizon, arrays, {"c_w": c_w})
        params: dict[str, Any] = {"horizon": horizon, "features": model.features.tolist(),
                                  "c_w": model.c_w, "feature_bound": model.feature_bound}
        if model.rewards is not None:
            params["rewards"] = model.rewards.tolist()
        if model.reward_features is not None:
            params["reward_features"] = model.reward_features.tolist()
            params["reward_bound"] = model.reward_bound
        noise = reward_noise or ("bernoulli" if model.rewards is None else "deterministic")
        name = os.path.splitext(os.path.basename(path_str))[0] or "linear-mixture"
        return _build(model, theta, arrays["d1"], name, ModelSpec(name=INLINE, params=params),
                      reward_theta=arrays.get("reward_theta"), reward_noise=noise)
    except WorldError as exc:
        raise WorldError(f"{where}: {exc}") from None


def save_linear_npz(mdp: LinearMixtureMDP, path: str | os.PathLike[str]) -> None:
    """Write a world in the format `load_linear_npz` reads (features, parameters, rewards, d1)."""
    model = mdp.model
    assert model is not None and mdp.theta is not None
    arrays: dict[str, Any] = {"features": model.features, "theta": mdp.theta, "d1": mdp.d1,
                              "H": np.int64(mdp.H), "c_w": np.float64(model.c_w)}
    if model.rewards is not None:
        arrays["rewards"] = model.rewards
    else:
        arrays["reward_features"] = model.reward_features
        arrays["reward_theta"] = mdp.reward_theta
    np.savez(os.fspath(path), **arrays)
