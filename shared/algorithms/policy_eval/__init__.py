"""Differentially private policy evaluation (Balle, Gomrokchi & Precup 2016) as privrl plug-ins.

`dp-lsw` and `dp-lsl` evaluate a fixed policy from first-visit Monte Carlo returns, one
trajectory per user (Balle, Gomrokchi & Precup, ICML 2016). The privacy mode picks the variant:

  none  LSW / LSL, the non-private baselines (released once, after the m reports)
  jdp   DP-LSW / DP-LSL (Algorithms 1 and 2): a trusted server accumulates (n, g) and releases
        theta_hat = theta_X + N(0, sigma_X^2 I) once, sigma_X from the smoothed sensitivity
  ldp   a local-DP extension (not in the paper): each user noises its visit
        indicators and scaled returns with the generic Gaussian/Laplace local randomizer; the
        estimate is post-processing of the noisy sums

The run's `episodes` is the public batch size m; the evaluated policy is frozen for the round
(the chain world has one action, so it is the all-zeros table). Users post first-visit returns
(report kind "returns"); the server clips them to [0, F_max] before anything is aggregated.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...privacy.accountant import Ledger
from ...privacy.grid import FEATURE_GRID
from ...privacy.noise import noise_backend
from ...stats import Stats
from ...worlds.first_visit import FirstVisits
from ..base import Algorithm, Family, Learner, Played, PolicyMessage
from ..registry import register
from .estimators import LSL, LSW, ldp_means, smoothing_constants
from .features import FEATURES, feature_matrix
from .knobs import PRESETS, PolicyEvalKnobs
from .release import FAMILY, TrustedRelease

if TYPE_CHECKING:
    from ...config import RunConfig
    from ...privacy.calibration import Calibration
    from ...privacy.privatizers import Privatizer
    from ...trust.base import TrustBoundary

__all__ = ["FEATURES", "LSL", "LSW", "DPLSLAlgorithm", "DPLSWAlgorithm", "PolicyEvalKnobs",
           "PolicyEvaluation", "feature_matrix", "smoothing_constants"]
RETURN_SLACK = 1e-9  # relative slack on the R_max / (1 - gamma) ceiling (float rounding)


class FixedPolicy(Learner):
    """The evaluated policy, frozen for the round: planned once, never again."""

    def __init__(self, config: RunConfig, replicas: int) -> None:
        self.actions = np.zeros((replicas, config.horizon, config.n_states), dtype=np.int64)

    def plans_at(self, reported: int, last_planned: int) -> bool:
        """Never replan: policy version 1 is the one every user plays."""
        return False

    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """The fixed policy's table (one action: all zeros)."""
        return {"actions": self.actions.copy()}


class PolicyEvaluation(Algorithm):
    """What DP-LSW and DP-LSL share: features, clipping, the round, the release, LDP."""

    knobs_model = PolicyEvalKnobs
    presets = PRESETS
    default_world = "chain"
    default_mechanism = "gaussian"  # the smoothed-sensitivity release is Gaussian only
    raw_report_kind = "returns"  # first-visit returns, for a curator that sees raw data
    estimator_label: ClassVar[str] = ""

    def raw_report_numbers(self) -> int:
        """S (state, return) pairs at most: one first-visit return per state."""
        return 2 * self.config.n_states

    @classmethod
    def refuses(cls, boundary: TrustBoundary) -> str | None:
        """Cohorts (secure aggregation): its one-shot release and LDP estimator read single
        users' reports, not cohort sums."""
        return "its estimators read single reports, not cohort sums" if boundary.cohorts else None

    def __init__(self, config: RunConfig) -> None:
        """Bind the public task; refuse a budget or task the estimator cannot be calibrated for."""
        super().__init__(config)
        knobs: PolicyEvalKnobs = self.knobs
        self.phi = feature_matrix(knobs.features, config.n_states)
        weights = np.ones(config.n_states) if knobs.weights is None else np.asarray(
            knobs.weights, dtype=np.float64
        )
        if weights.shape != (config.n_states,):
            raise ValueError(f"knobs.weights must list one weight per state ({config.n_states})")
        self.weights = weights
        self.f_max = knobs.return_bound
        self.ceiling = knobs.r_max / (1.0 - knobs.gamma)
        self.m = config.episodes
        self._build(weights)
        if config.boundary.private and not config.boundary.local_noise:  # a central release
            if config.mechanism != "gaussian" and not math.isinf(config.epsilon):
                raise ValueError(
                    f"{self.name}'s central release is a Gaussian with a data-dependent scale"
                    " (smoothed sensitivity): use mechanism='gaussian' with 0 < delta < 1"
                )
            if not math.isinf(config.epsilon):
                smoothing_constants(config.epsilon, config.delta, self.d, knobs.constants)
            self.check_calibration()

    # -- what each estimator defines ---------------------------------------------------------------

    def _build(self, weights: np.ndarray) -> None:
        """Build the estimator from the public task."""
        raise NotImplementedError

    @property
    def d(self) -> int:
        """Number of released parameters."""
        return int(self.phi.shape[1])

    def check_calibration(self) -> None:
        """Refuse a public task whose noise cannot be calibrated (JDP)."""

    def estimate(self, m: int, n: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The non-private estimate theta_X (..., d) from (m, n, g)."""
        raise NotImplementedError

    def noise_scale(self, m: int, n: np.ndarray) -> np.ndarray:
        """sigma_X (...) of the smoothed Gaussian perturbation (never published)."""
        raise NotImplementedError

    def ldp_estimate(self, n_noisy: np.ndarray, g_noisy: np.ndarray) -> np.ndarray:
        """The LDP extension's estimate from noisy sums (post-processing)."""
        raise NotImplementedError

    # -- the plug-in contract ----------------------------------------------------------------------

    def families(self) -> tuple[Family, ...]:
        """LDP: visit indicators and returns / F_max, both in [0, 1]^N; a replaced user changes
        each in up to N entries by up to 1 (l1 = N, l2 = sqrt(N); together sqrt(2N)).
        Otherwise none: the release is this plug-in's own (`privatizer`)."""
        if not self.config.boundary.local_noise:
            return ()
        n = self.config.n_states
        return (Family("visits", (n,), float(n), math.sqrt(n)),
                Family("returns", (n,), float(n), math.sqrt(n), grid=FEATURE_GRID, rounded=True))

    def user_statistics(self, trajectories: Played, message: PolicyMessage) -> Stats:
        """Visit indicators and first-visit returns clipped to [0, F_max] (scaled to [0, 1] in
        LDP); returns outside [0, R_max / (1 - gamma)] are impossible and refused."""
        if not isinstance(trajectories, FirstVisits):
            raise ValueError(f"{self.name} takes first-visit returns, not raw trajectories")
        if trajectories.n_states != self.config.n_states:
            raise ValueError(f"first-visit returns must cover N = {self.config.n_states} states")
        returns = trajectories.returns
        if not np.isfinite(returns).all():
            raise ValueError("first-visit returns must be finite numbers")
        above = np.flatnonzero((returns > self.ceiling * (1 + RETURN_SLACK)).any(axis=0))
        below = np.flatnonzero((returns < 0).any(axis=0))
        if above.size or below.size:
            s = int(above[0]) if above.size else int(below[0])
            raise ValueError(
                f"the first-visit return of state {s} is outside [0, R_max / (1 - gamma)] ="
                f" [0, {self.ceiling:g}], where every return of rewards in [0, R_max] lies"
            )
        clipped = np.clip(returns, 0.0, self.f_max)
        visits = trajectories.visited.astype(np.float64)
        if self.config.boundary.local_noise:
            return {"visits": visits, "returns": clipped / self.f_max}
        return {"visits": visits, "returns": clipped}

    def learner(self, calibration: Calibration, seeds: list[int]) -> Learner:
        """The fixed policy (this workload evaluates, it does not learn)."""
        return FixedPolicy(self.config, len(seeds))

    def play(self, world: Any, message: PolicyMessage, rngs: list[np.random.Generator]
             ) -> Played:
        """One trajectory per user, as first-visit returns (the world's own simulator)."""
        return world.first_visits(rngs)

    def check_world(self, world: Any) -> None:
        """A world that yields first-visit returns over the run's N states."""
        if not callable(getattr(world, "first_visits", None)):
            raise ValueError(f"{self.name} needs a policy-evaluation world (e.g. the chain)"
                             f" that yields first-visit returns, got {world!r}")
        if getattr(world, "S", None) != self.config.n_states:
            raise ValueError(f"the users' world has {getattr(world, 'S', None)} states but the"
                             f" run is for {self.config.n_states}: pass matching world options")

    def privatizer(self, calibration: Calibration, seeds: list[int], max_items: int
                   ) -> Privatizer:
        """LDP: the generic aggregator. Otherwise the trusted one-shot release of theta."""
        if self.config.boundary.local_noise:
            return super().privatizer(calibration, seeds, max_items)
        private = self.config.boundary.private  # not local: a curator's central release
        return TrustedRelease(
            seeds, max_items, self.config.n_states, self.f_max, self.estimate,
            self.noise_scale if private else None, self.charge_release,
            noise_backend(self.config.noise),
        )

    def charge_release(self, ledger: Ledger, backend: str) -> None:
        """Record the release of theta at its true (eps, delta); its scale is data-dependent and
        is not published (recorded as 0)."""
        cfg = self.config
        ledger.charge(
            f"smoothed-gaussian:{FAMILY}",
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            sensitivity=0.0,
            scale=0.0,
            note=f"{self.estimator_label} release of theta (d = {self.d}, m = {self.m},"
            f" constants {self.knobs.constants}): smoothed-sensitivity Gaussian, its scale"
            " depends on the data and is not published",
            at=self.m,
            noise=backend,
        )

    def postprocess(self, release: Stats) -> Stats:
        """V_hat = Phi theta_hat; in LDP also theta from the noisy sums (post-processing)."""
        if self.config.boundary.local_noise and "visits" in release:
            theta = self.ldp_estimate(release["visits"], release["returns"] * self.f_max)
            release = {**release, FAMILY: theta}
        if FAMILY in release:
            release = {**release, "value": release[FAMILY] @ self.phi.T}
        return release


@register
class DPLSWAlgorithm(PolicyEvaluation):
    """DP-LSW: weighted first-visit least squares with public weights w (Algorithm 1)."""

    name = "dp-lsw"
    summary = ("policy evaluation (Balle et al.): weighted first-visit least squares, smoothed-"
               "sensitivity Gaussian release (none: LSW)")
    estimator_label = "DP-LSW"

    def _build(self, weights: np.ndarray) -> None:
        self.lsw = LSW(self.phi, weights)

    def estimate(self, m: int, n: np.ndarray, g: np.ndarray) -> np.ndarray:
        """theta^w_X (eq. 8)."""
        return self.lsw.theta(n, g)

    def noise_scale(self, m: int, n: np.ndarray) -> np.ndarray:
        """alpha F_max L sqrt(psi) (Algorithm 1)."""
        cfg = self.config
        return self.lsw.sigma(n, cfg.epsilon, cfg.delta, self.f_max, self.knobs.constants)

    def ldp_estimate(self, n_noisy: np.ndarray, g_noisy: np.ndarray) -> np.ndarray:
        """Eq. 8 on the clipped plug-in means g~ / max(n~, tau) (the LDP extension)."""
        return self.lsw.theta_from_means(ldp_means(n_noisy, g_noisy, self.knobs.ldp_tau,
                                                   self.f_max))


@register
class DPLSLAlgorithm(PolicyEvaluation):
    """DP-LSL: ridge-regularised first-visit least squares with relevance rho (Algorithm 2)."""

    name = "dp-lsl"
    summary = ("policy evaluation (Balle et al.): lambda-regularised first-visit least squares,"
               " smoothed-sensitivity Gaussian release (none: LSL)")
    estimator_label = "DP-LSL"

    def _build(self, weights: np.ndarray) -> None:
        floor = float(np.linalg.norm(self.phi, 2)) ** 2 * float(weights.max(initial=0.0))
        lam = self.knobs.lam
        if lam is None:
            lam = max(self.knobs.lam_c * math.sqrt(self.config.episodes), 2.0 * floor)
        self.lsl = LSL(self.phi, lam, weights)

    @property
    def lam(self) -> float:
        """The public lambda in use (fixed, or from the c sqrt(m) schedule)."""
        return self.lsl.lam

    def check_calibration(self) -> None:
        """DP-LSL needs lambda > ||Phi||^2 ||rho||_inf (strict, Cor. 8)."""
        if not self.lsl.lam > self.lsl.curvature_floor:
            raise ValueError(
                f"DP-LSL needs lambda > ||Phi||^2 ||rho||_inf = {self.lsl.curvature_floor:g},"
                f" got {self.lsl.lam:g}"
            )

    def estimate(self, m: int, n: np.ndarray, g: np.ndarray) -> np.ndarray:
        """theta^lambda_X (eq. 11)."""
        return self.lsl.theta(n, g)

    def noise_scale(self, m: int, n: np.ndarray) -> np.ndarray:
        """2 alpha F_max ||Phi|| sqrt(psi) / (lambda - ||Phi||^2 ||rho||_inf) (Algorithm 2)."""
        cfg = self.config
        return self.lsl.sigma(m, n, cfg.epsilon, cfg.delta, self.f_max, self.knobs.constants)

    def ldp_estimate(self, n_noisy: np.ndarray, g_noisy: np.ndarray) -> np.ndarray:
        """LSL is linear in (n, g): eq. 11 with the noisy sums, floored at 0 (LDP extension)."""
        return self.lsl.theta(np.maximum(n_noisy, 0.0), g_noisy)
