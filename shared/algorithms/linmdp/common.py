"""What the private LSVI-UCB plug-ins share: the public model, the raw history a user's report
becomes, the released families and their sensitivities, the learner, and the trusted privatizer.

A subclass fixes the public constants (`beta`, the Gram shift and floor, the noise scales) and
its release rule: when a Gram leaf closes (`leaf_closes`) and when a round of targets is released
(`release_due`, a function of released values and public numbers only).

Sensitivities (replace one user, every step h; Luyo App. E.2, Ngo Lemma 14 with erratum E6,
tightened as `constants` proves): ||phi phi^T - phi' phi'^T||_F <= sqrt(2) per step (the papers
say 2) and ||phi (r + V) - phi' (r' + V')|| <= 2 (H - h + 1) (r in [0,1], V_{h+1} clipped to
[0, H - h]; the papers clip at H). Over the H steps the l2 sensitivities add in squares.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...privacy.continual import CounterPlan
from ...privacy.grid import FEATURE_GRID
from ...privacy.psd import variance_norms
from ...privacy.schedules import Schedule
from ...stats import Stats
from ...ties import tie_priorities
from ...worlds.linear_mdp import LinearMDPModel, linear_mdp_model
from ...worlds.rollout import Trajectories
from ..base import Algorithm, Family, Learner, PolicyMessage, check_model_sizes
from .constants import GENERIC_STEP, StepSensitivity, gram_sensitivity2, target_sensitivity2
from .lsvi import greedy_actions
from .privatizer import TrustedLSVI

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration
    from ...trust.base import TrustBoundary

RAW_HISTORY = ("raw history required: LSVI re-evaluates every stored next state with each new"
               " value function, so only a server trusted with raw reports can keep the"
               " transitions;"
               " Luyo et al. 2021, Remark 5")


def run_model(config: RunConfig, algo: str) -> LinearMDPModel:
    """The run's public linear-MDP features, checked against (S, A, H) (ValueError)."""
    if config.model is None:
        raise ValueError(f"{algo} needs a public linear-MDP model (RunConfig.model): use a linear"
                         " MDP world (lin-cube, lin-tab, river-chain, latent-levels or a .npz with"
                         " phi)")
    model = linear_mdp_model(config.model)
    check_model_sizes(config, (model.S, model.A, model.horizon))
    return model


def step_sensitivity(features: np.ndarray) -> StepSensitivity:
    """The exact per-step sensitivities over the public feature vectors phi(s,a) (S, A, d), at
    most the generic ones: max ||triu(phi phi^T - phi' phi'^T)|| over pairs, and, as ||y phi -
    y' phi'|| (y, y' in [0, 1]) is convex, max(||phi||, ||phi - phi'||) at y, y' in {0, 1}."""
    phi = np.unique(np.asarray(features, dtype=np.float64).reshape(-1, features.shape[-1]),
                    axis=0)
    upper = np.triu_indices(phi.shape[1])
    grams = np.einsum("nj,nk->njk", phi, phi)[:, upper[0], upper[1]]
    gram = max(float(np.linalg.norm(g - grams, axis=1).max()) for g in grams)
    target = max(float(np.linalg.norm(phi, axis=1).max()),
                 max(float(np.linalg.norm(x - phi, axis=1).max()) for x in phi))
    return StepSensitivity(min(gram * gram, GENERIC_STEP.gram2), min(target, GENERIC_STEP.target))


class LSVIKnobs(BaseModel):
    """The knobs both LSVI-UCB plug-ins have: the bonus and how ties are broken (all public
    post-processing of the release)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    beta: float | None = Field(None, gt=0, description="the bonus multiplier (default: the"
                               " paper's theory value)")
    beta_scale: float = Field(1.0, gt=0, description="multiplies beta (post-processing)")
    noise_norms: Literal["tail", "variance"] = Field(
        "tail", description="the noise norms the theory beta reads (beta unset): the paper's"
        " worst-case tail bounds, or the norm scales of the release's actual noise, 2 sqrt(d)"
        " times the Gram release's std and sqrt(d) times the targets' (`release_norms`)")
    tie_break: Literal["first", "random"] = Field(
        "random", description="actions whose optimistic scores tie: one drawn uniformly from the"
        " server's secret seed and the release (the default, as Ngo et al. assume), or the lowest"
        " index (post-processing either way)")


class LSVILearner(Learner):
    """The greedy table of the released (Gram, w): recomputed only when the release changed."""

    def __init__(self, algorithm: LSVIAlgorithm, seeds: list[int]) -> None:
        self.features, self.beta = algorithm.model.features, algorithm.beta
        self.seeds = [int(s) for s in seeds]
        self.random_ties = algorithm.knobs.tie_break == "random"
        self._cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """Greedy actions (R, H, S) of Q = Pi_[0,H](<phi, w> + beta ||phi||_{Gram^-1})."""
        gram, w = billboard["gram"], billboard["w"]
        cached = self._cache
        if cached is None or not (np.array_equal(cached[0], gram)
                                  and np.array_equal(cached[1], w)):
            priority = None
            if self.random_ties:
                n_s, n_a, _ = self.features.shape
                priority = tie_priorities(self.seeds, "lsvi", [gram, w], (w.shape[1], n_s, n_a))
            cached = (gram, w, greedy_actions(self.features, gram, w, self.beta, priority))
            self._cache = cached
        return {"actions": cached[2].copy()}

    def radius(self, reported: int) -> float:
        """The public bonus multiplier beta."""
        return self.beta


class LSVIAlgorithm(Algorithm):
    """Private LSVI-UCB over a finite linear MDP (none or JDP; LDP is refused, raw history)."""

    default_world = "lin-cube"
    default_mechanism = "gaussian"
    practical_counter = ("matrix", 256)  # tuning seeds (docs/results/frontier.md)

    @classmethod
    def refuses(cls, boundary: TrustBoundary) -> str | None:
        """A boundary whose users noise their reports: the server could not keep raw history."""
        return RAW_HISTORY if boundary.local_noise else None

    # set by subclasses in __init__ (public, data-independent)
    beta: float
    gram_diagonal: float  # the public shift added to the Gram release (ridge included)
    gram_floor: float  # eigenvalue floor of the PD fallback
    initial_diagonal: float  # version 0's Gram, c I (no data, no noise)
    gram_sigma: float  # per-entry std of each Gram counter node (grid units times the grid)
    target_sigma: float  # per-entry std of each release's target noise
    schedule: Schedule  # after which episodes a Gram leaf closes (the counter's releases)
    counter_plan: CounterPlan  # the Gram counter over the leaves that ever close

    def __init__(self, config: RunConfig) -> None:
        """Bind to `config`: Gaussian noise from seeded generators over a public linear MDP."""
        super().__init__(config)
        self.model = run_model(config, self.name)
        self.step = step_sensitivity(self.model.features)  # public features only
        if config.boundary.private and config.mechanism != "gaussian":
            raise ValueError(f"{self.name} releases through Gaussian mechanisms: use"
                             " --mechanism gaussian with 0 < delta < 1")
        if config.boundary.private and config.noise == "opendp":
            raise ValueError(f"{self.name} draws its noise from the run's seeded generators"
                             " only (noise='numpy' or 'float'): its store replays, never"
                             " journals")

    @property
    def private(self) -> bool:
        """Whether noise is drawn (a private boundary, which for LSVI is a curator that sees raw
        reports: `refuses`, with a finite epsilon)."""
        return self.config.boundary.private and not math.isinf(self.config.epsilon)

    def families(self) -> tuple[Family, ...]:
        """The Gram matrices (symmetric, per tree node) and the targets (per release round)."""
        horizon, d = self.config.horizon, self.model.d
        jdp = self.config.boundary.private
        return (
            Family("gram", (horizon, d, d), l1=horizon * (d + 1.0),
                   l2=math.sqrt(gram_sensitivity2(horizon, self.step)), clean_max=1.0,
                   clean_min=-1.0,
                   symmetric=True, scale=self.gram_sigma if jdp else None, grid=FEATURE_GRID,
                   rounded=True),
            Family("target", (horizon, d), l1=horizon * (horizon + 1.0) * math.sqrt(d),
                   l2=math.sqrt(target_sensitivity2(horizon, self.step)),
                   clean_max=float(horizon),
                   clean_min=-float(horizon), scale=self.target_sigma if jdp else None,
                   grid=FEATURE_GRID, rounded=True),
        )

    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        """The raw history the trusted store keeps: phi(s_h, a_h) (R, H, d), r_h clipped to
        [0, 1] (R, H), and s_{h+1} (R, H) (computed on the server from a trusted report)."""
        states, actions = trajectories.states, trajectories.actions
        phi = self.model.features[states[:, :-1], actions]
        return {"phi": phi, "reward": np.clip(trajectories.rewards, 0.0, 1.0),
                "next_state": states[:, 1:].astype(np.float64)}

    def learner(self, calibration: Calibration, seeds: list[int]) -> LSVILearner:
        """The greedy planner over the billboard."""
        return LSVILearner(self, seeds)

    def privatizer(self, calibration: Calibration, seeds: list[int], max_items: int
                   ) -> TrustedLSVI:
        """The trusted store and its releases (instead of the generic tree counters)."""
        return TrustedLSVI(self, calibration, seeds, max_items)

    def gram_counter(self, leaves: int) -> CounterPlan:
        """The run's counter (`RunConfig.counter`: tree, smoothed tree or matrix) over the
        `leaves` Gram leaves that ever close (at least one)."""
        kind = self.config.counter
        bands = self.config.counter_bands if kind == "matrix" else None
        return CounterPlan(kind, max(int(leaves), 1), bands)

    def counter_weight(self) -> float:
        """How many node costs one Gram leaf spends over the run: the squared largest column
        norm of the counter's encoder (a tree: its levels)."""
        return self.counter_plan.column_norm() ** 2

    def gram_release_std(self) -> float:
        """The largest std of an entry of the Gram counter's release over the run: a public
        function of sigma, the schedule and the counter (0 without noise)."""
        if not self.private:
            return 0.0
        return self.gram_sigma * math.sqrt(self.counter_plan.max_release_factor())

    def release_norms(self) -> tuple[float, float]:
        """The norm scales of the actual release noise, public functions of sigma, the schedule
        and the counter: 2 sqrt(d) `gram_release_std` (about the operator norm of a symmetric
        d x d matrix of N(0, s^2) entries) and sqrt(d) target_sigma (sqrt(E||v||^2) of a fresh
        target draw); (0, 0) without noise."""
        if not self.private:
            return 0.0, 0.0
        return variance_norms(self.gram_release_std(), self.target_sigma, self.model.d)

    def noise_shift(self, scale: float) -> float:
        """The diagonal added to every Gram release under a noise-aware shift: the floor (the
        ridge) plus `scale` times the Gram noise's norm scale (`release_norms`). Constant over
        the run, so the shift alone never changes a determinant."""
        return self.gram_floor + scale * self.release_norms()[0]

    def bonus_multiplier(self, theory: float, variance: Callable[[float, float], float]
                         ) -> float:
        """beta_scale times the fixed beta, or the paper's beta: at its tail bounds (`theory`)
        or, with noise_norms=variance, `variance(*release_norms())`, its formula at the norm
        scales of the actual release noise."""
        knobs: LSVIKnobs = self.knobs
        if knobs.beta is not None and knobs.noise_norms == "variance":
            # a rule between knobs and the preset's beta: refused where the run is made
            raise ValueError("noise_norms=variance computes beta from the paper's formula:"
                             " unset beta (beta=null) to use it")
        if knobs.beta is not None:
            beta = knobs.beta
        elif knobs.noise_norms == "variance":
            beta = variance(*self.release_norms())
        else:
            beta = theory
        return knobs.beta_scale * beta

    def leaf_closes(self, items: int) -> bool:
        """Whether a Gram leaf closes after `items` episodes: at the schedule's releases before
        the last episode (nothing is played after it)."""
        return items < self.config.episodes and self.schedule.release_due(items)

    @abstractmethod
    def planned_leaves(self) -> int:
        """How many Gram leaves close over the whole run (the counter's items)."""

    @abstractmethod
    def planned_rounds(self) -> int:
        """The most release rounds of targets the whole run can have (what the plan charges)."""

    @abstractmethod
    def may_release(self, items: int, rounds: np.ndarray) -> bool:
        """Whether a release round can happen after `items` episodes (public numbers only)."""

    @abstractmethod
    def release_due(self, items: int, current: np.ndarray, snapshot: np.ndarray,
                    rounds: np.ndarray) -> np.ndarray:
        """Which replicas (R,) bool release new targets after `items` episodes, given the
        current Gram release, the one at the last round, and the rounds so far (public only)."""
