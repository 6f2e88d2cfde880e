"""First-visit least squares (Balle, Gomrokchi & Precup 2016) and their smoothed sensitivities.

Everything here is a function of the sufficient statistics (m, n, g): n_s the number
of trajectories visiting s, g_s the sum of their first-visit returns. Arrays of statistics may
carry leading axes (replicas, runs): every method maps the last axis.

* `LSW` (eq. 8): theta = (Phi^T W Phi)^{-1} Phi^T W Fbar with fixed public weights w.
  DP-LSW (Algorithm 1): sigma = alpha F_max L sqrt(psi), L = 1 / sigma_min(W^1/2 Phi),
  psi = max_{k>=0} e^{-k beta} sum_s w_s / max(n_s - k, 1)^2.
* `LSL` (eq. 11): theta = (Phi^T diag(rho n) Phi + lambda/2 I)^{-1} Phi^T (rho g).
  DP-LSL (Algorithm 2): sigma = 2 alpha F_max ||Phi|| sqrt(psi) / (lambda - ||Phi||^2 ||rho||_inf),
  psi = max_{k>=0} e^{-k beta} (c sqrt(sum_s rho_s min(n_s + k, m)) + ||rho||_2)^2 with
  c = ||Phi|| ||rho||_inf / sqrt(2 lambda); `min`, not the `max` printed in Balle et al. §4.2
  (erratum E1).

alpha and beta come from Lemma 1 (`mode="nrs"`, Algorithms 1 and 2 as printed, the default) or
from the paper's own Lemma 14 (`mode="appendix"`, more conservative; needs eps <= 5, beta <= ln 2).

The suprema over k are computed exactly but not over all k: both phi_k are bounded by their
value for large k (sum_s w_s, resp. phi at k = m - min n), so once e^{-k beta} times that bound
falls below the best value found, no larger k can win (the scan stops there, exact).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Constants = Literal["nrs", "appendix"]
SINGULAR_RTOL = 1e-10  # sigma_min / sigma_max below this: Phi^T W Phi counts as singular
_FIRST_CHUNK, _MAX_CHUNK = 256, 1 << 15  # k values evaluated at once in the suprema


def check_budget(epsilon: float, delta: float) -> None:
    """Refuse a budget outside eps > 0 (inf allowed: no noise), 0 < delta < 1."""
    if not epsilon > 0 or math.isnan(epsilon):
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def smoothing_constants(
    epsilon: float, delta: float, d: int, mode: Constants = "nrs"
) -> tuple[float, float]:
    """(alpha, beta) of the smoothed Gaussian perturbation for a d-dimensional release.

    nrs (Lemma 1):       alpha = 5 sqrt(2 ln(2/delta)) / eps, beta = eps / (4 (d + ln(2/delta)))
    appendix (Lemma 14): alpha = 15 sqrt(2 ln(4/delta)) / eps,
                         beta = 2 ln2 eps / (5 (sqrt d + sqrt(2 ln(4/delta)))^2)
    eps = inf gives (0, inf): no noise, psi = phi_0.
    """
    check_budget(epsilon, delta)
    if d < 1:
        raise ValueError(f"the release needs d >= 1 parameters, got {d}")
    if mode == "nrs":
        if epsilon > 5 and not math.isinf(epsilon):
            warnings.warn(
                f"eps = {epsilon:g} > 5: Lemma 1 states no range for eps; the"
                " white-box audit of privrl's tests covers the default settings only",
                stacklevel=2,
            )
        log_term = math.log(2.0 / delta)
        alpha = 5.0 * math.sqrt(2.0 * log_term) / epsilon
        beta = epsilon / (4.0 * (d + log_term))
    elif mode == "appendix":
        if epsilon > 5:
            raise ValueError(f"the appendix constants (Lemma 14) need eps <= 5, got {epsilon:g}")
        log_term = math.log(4.0 / delta)
        alpha = 15.0 * math.sqrt(2.0 * log_term) / epsilon
        beta = 2.0 * math.log(2.0) * epsilon / (5.0 * (math.sqrt(d) + math.sqrt(2 * log_term)) ** 2)
        if beta > math.log(2.0):
            raise ValueError(f"the appendix constants need beta <= ln 2, got {beta:g}")
    else:
        raise ValueError(f"unknown constants {mode!r}: use 'nrs' or 'appendix'")
    return alpha, beta


def _rows(x: np.ndarray, n_states: int, name: str) -> np.ndarray:
    """`x` as float rows (R, N), refusing a wrong last axis."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape[-1:] != (n_states,):
        raise ValueError(f"{name} must have last axis N = {n_states}, got shape {arr.shape}")
    return arr.reshape(-1, n_states)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows and the index of each row's distinct row (replicas often share data)."""
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, np.asarray(inverse).reshape(-1)


def _scan_max(values_at: object, start_bound: float, beta: float, last: int) -> float:
    """max_{0<=k<=last} e^{-k beta} phi_k, where `values_at(ks)` gives phi at the integer array
    ks and every phi_k <= `start_bound`: stops once e^{-k beta} start_bound <= the best so far."""
    best, k0, chunk = 0.0, 0, _FIRST_CHUNK
    while k0 <= last:
        if best > 0.0 and math.exp(-k0 * beta) * start_bound <= best:
            break
        ks = np.arange(k0, min(k0 + chunk, last + 1))
        vals = np.exp(-beta * ks) * values_at(ks)  # type: ignore[operator]
        best = max(best, float(vals.max()))
        k0 = int(ks[-1]) + 1
        chunk = min(2 * chunk, _MAX_CHUNK)
    return best


class _Features:
    """What both estimators read off their feature matrix phi (N, d)."""

    phi: np.ndarray

    @property
    def n_states(self) -> int:
        """N."""
        return int(self.phi.shape[0])

    @property
    def d(self) -> int:
        """Number of parameters."""
        return int(self.phi.shape[1])


@dataclass(frozen=True)
class LSW(_Features):
    """Weighted first-visit least squares with fixed public weights w (eq. 8, Algorithm 1)."""

    phi: np.ndarray
    weights: np.ndarray | None = None
    gram: np.ndarray = field(init=False, repr=False)
    lipschitz: float = field(init=False)  # L = ||(W^1/2 Phi)^+|| = 1 / sigma_min(W^1/2 Phi)
    _solve: np.ndarray = field(init=False, repr=False)  # (d, N): theta = _solve @ Fbar

    def __post_init__(self) -> None:
        """Validate Phi and w >= 0, and require Phi^T W Phi invertible (Balle et al. 2016)."""
        phi = np.array(self.phi, dtype=np.float64)
        if phi.ndim != 2 or min(phi.shape) < 1 or not np.isfinite(phi).all():
            raise ValueError(f"Phi must be a finite N x d matrix with d >= 1, got {phi.shape}")
        n_states = phi.shape[0]
        w = np.ones(n_states) if self.weights is None else np.array(self.weights, dtype=float)
        if w.shape != (n_states,) or not np.isfinite(w).all() or (w < 0).any():
            raise ValueError(f"weights must be {n_states} finite numbers >= 0")
        scaled = np.sqrt(w)[:, None] * phi
        svals = np.linalg.svd(scaled, compute_uv=False)
        if phi.shape[1] > n_states or svals.min() <= SINGULAR_RTOL * svals.max():
            raise ValueError("Phi^T diag(w) Phi is singular: LSW needs W^1/2 Phi of full column"
                             " rank (public weights > 0 on enough states)")
        gram = phi.T @ (w[:, None] * phi)
        for name, value in (("phi", phi), ("weights", w), ("gram", gram)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "lipschitz", float(1.0 / svals.min()))
        object.__setattr__(self, "_solve", np.linalg.solve(gram, phi.T * w))

    def theta_from_means(self, fbar: np.ndarray) -> np.ndarray:
        """theta = (Phi^T W Phi)^{-1} Phi^T W Fbar for mean returns Fbar (..., N)."""
        fbar = np.asarray(fbar, dtype=np.float64)
        return fbar @ self._solve.T

    def theta(self, n: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The LSW estimate from counts n and return sums g (..., N); Fbar_s = 0 if n_s = 0."""
        n = np.asarray(n, dtype=np.float64)
        fbar = np.divide(g, n, out=np.zeros(np.broadcast(n, g).shape), where=n > 0)
        return self.theta_from_means(fbar)

    def smooth_bound(self, n: np.ndarray, beta: float) -> np.ndarray:
        """psi (...): the smallest beta-smooth upper bound of sum_s w_s / max(n_s, 1)^2."""
        rows, inverse = _unique_rows(_rows(n, self.n_states, "n"))
        keep = self.weights > 0
        w = self.weights[keep]
        total = float(w.sum())
        out = np.empty(rows.shape[0])
        for i, row in enumerate(rows[:, keep]):  # one scan per distinct signature
            if math.isinf(beta):
                out[i] = float((w / np.maximum(row, 1.0) ** 2).sum())
                continue

            def phi_k(ks: np.ndarray, row: np.ndarray = row) -> np.ndarray:
                return (w / np.maximum(row[None, :] - ks[:, None], 1.0) ** 2).sum(axis=1)

            # phi_k = sum_s w_s for every k >= max n - 1 (Lemma 5): the max is reached by then.
            last = max(int(row.max(initial=0.0)) - 1, 0)
            out[i] = _scan_max(phi_k, total, beta, last)
        return out[inverse].reshape(np.shape(n)[:-1])

    def sigma(
        self,
        n: np.ndarray,
        epsilon: float,
        delta: float,
        f_max: float,
        mode: Constants = "nrs",
    ) -> np.ndarray:
        """The data-dependent noise scale of DP-LSW: alpha F_max L sqrt(psi) (Algorithm 1)."""
        alpha, beta = smoothing_constants(epsilon, delta, self.d, mode)
        _check_fmax(f_max)
        return alpha * f_max * self.lipschitz * np.sqrt(self.smooth_bound(n, beta))

    def excess_risk(self, eta: np.ndarray, n: np.ndarray | None = None, m: int = 0) -> np.ndarray:
        """J^w(theta + eta) - J^w(theta) = eta^T Phi^T W Phi eta (Lemma 22; erratum E13)."""
        eta = np.asarray(eta, dtype=np.float64)
        return np.einsum("...i,ij,...j->...", eta, self.gram, eta)


@dataclass(frozen=True)
class LSL(_Features):
    """lambda-regularised first-visit least squares (eq. 11, Algorithm 2), relevance rho."""

    phi: np.ndarray
    lam: float
    rho: np.ndarray | None = None
    phi_norm: float = field(init=False)  # ||Phi||, the spectral norm

    def __post_init__(self) -> None:
        """Validate Phi, lambda > 0 and 0 <= rho <= 1."""
        phi = np.array(self.phi, dtype=np.float64)
        if phi.ndim != 2 or min(phi.shape) < 1 or not np.isfinite(phi).all():
            raise ValueError(f"Phi must be a finite N x d matrix with d >= 1, got {phi.shape}")
        rho = np.ones(phi.shape[0]) if self.rho is None else np.array(self.rho, dtype=float)
        if rho.shape != (phi.shape[0],) or not ((rho >= 0) & (rho <= 1)).all():
            raise ValueError(f"rho must be {phi.shape[0]} numbers in [0, 1]")
        if not self.lam > 0 or not math.isfinite(self.lam):
            raise ValueError(f"lambda must be a finite number > 0, got {self.lam!r}")
        phi.setflags(write=False)
        rho.setflags(write=False)
        object.__setattr__(self, "phi", phi)
        object.__setattr__(self, "rho", rho)
        object.__setattr__(self, "lam", float(self.lam))
        object.__setattr__(self, "phi_norm", float(np.linalg.norm(phi, 2)))

    @property
    def curvature_floor(self) -> float:
        """||Phi||^2 ||rho||_inf: DP-LSL needs lambda strictly above it (Cor. 8)."""
        return self.phi_norm**2 * float(self.rho.max())

    def theta(self, n: np.ndarray, g: np.ndarray) -> np.ndarray:
        """(Phi^T diag(rho n) Phi + lambda/2 I)^{-1} Phi^T (rho g), for (..., N) statistics."""
        n_rows = _rows(n, self.n_states, "n")
        g_rows = _rows(g, self.n_states, "g")
        lhs = np.einsum("sa,rs,sb->rab", self.phi, n_rows * self.rho, self.phi)
        lhs += 0.5 * self.lam * np.eye(self.d)
        rhs = (g_rows * self.rho) @ self.phi
        theta = np.linalg.solve(lhs, rhs[..., None])[..., 0]
        return theta.reshape((*np.broadcast(np.asarray(n), np.asarray(g)).shape[:-1], self.d))

    def smooth_bound(self, m: int, n: np.ndarray, beta: float) -> np.ndarray:
        """psi (...): the smallest beta-smooth upper bound of phi^lambda (eq. 12, with min)."""
        rows, inverse = _unique_rows(_rows(n, self.n_states, "n"))
        if (rows > m).any() or (rows < 0).any():
            raise ValueError(f"visit counts must lie in [0, m] = [0, {m}]")
        keep = self.rho > 0
        rho = self.rho[keep]
        c_lam = self.phi_norm * float(self.rho.max()) / math.sqrt(2.0 * self.lam)
        rho_norm = float(np.linalg.norm(self.rho))
        out = np.empty(rows.shape[0])
        for i, row in enumerate(rows[:, keep]):

            def phi_k(ks: np.ndarray, row: np.ndarray = row) -> np.ndarray:
                mass = (rho * np.minimum(row[None, :] + ks[:, None], m)).sum(axis=1)
                return (c_lam * np.sqrt(mass) + rho_norm) ** 2

            if math.isinf(beta):
                out[i] = float(phi_k(np.zeros(1, dtype=np.int64))[0])
                continue
            # phi_k stops growing at k = m - min_s n_s (Lemma 9): its value there bounds all.
            last = int(m - row.min(initial=float(m)))
            bound = float(phi_k(np.array([last]))[0])
            out[i] = _scan_max(phi_k, bound, beta, last)
        return out[inverse].reshape(np.shape(n)[:-1])

    def sigma(
        self,
        m: int,
        n: np.ndarray,
        epsilon: float,
        delta: float,
        f_max: float,
        mode: Constants = "nrs",
    ) -> np.ndarray:
        """The noise scale of DP-LSL: 2 alpha F_max ||Phi|| sqrt(psi) / (lambda - ||Phi||^2
        ||rho||_inf) (Algorithm 2); lambda at or below the floor is refused."""
        if not self.lam > self.curvature_floor:
            raise ValueError(
                f"DP-LSL needs lambda > ||Phi||^2 ||rho||_inf = {self.curvature_floor:g},"
                f" got {self.lam:g}"
            )
        alpha, beta = smoothing_constants(epsilon, delta, self.d, mode)
        _check_fmax(f_max)
        psi = self.smooth_bound(m, n, beta)
        return 2.0 * alpha * f_max * self.phi_norm * np.sqrt(psi) / (
            self.lam - self.curvature_floor
        )

    def excess_risk(self, eta: np.ndarray, n: np.ndarray, m: int) -> np.ndarray:
        """J^lambda(theta + eta) - J^lambda(theta) = eta^T (Phi^T Gamma_X Phi + lambda/(2m) I)
        eta with Gamma_X = diag(rho n / m) (Lemma 29)."""
        eta = np.asarray(eta, dtype=np.float64)
        n_rows = _rows(n, self.n_states, "n")
        curv = np.einsum("sa,rs,sb->rab", self.phi, n_rows * self.rho / m, self.phi)
        curv += self.lam / (2.0 * m) * np.eye(self.d)
        eta_rows = eta.reshape(-1, self.d)
        out = np.einsum("ri,rij,rj->r", eta_rows, np.broadcast_to(curv, (eta_rows.shape[0],
                                                                         self.d, self.d)), eta_rows)
        return out.reshape(eta.shape[:-1])


def _check_fmax(f_max: float) -> None:
    """Refuse a return bound that is not a finite number > 0."""
    if not f_max > 0 or not math.isfinite(f_max):
        raise ValueError(f"F_max must be a finite number > 0, got {f_max!r}")


def ldp_means(n_noisy: np.ndarray, g_noisy: np.ndarray, tau: float, f_max: float) -> np.ndarray:
    """The LDP plug-in means: clip(g~ / max(n~, tau), 0, F_max) (post-processing)."""
    if not tau > 0:
        raise ValueError(f"the LDP count threshold tau must be > 0, got {tau!r}")
    return np.clip(np.asarray(g_noisy) / np.maximum(n_noisy, tau), 0.0, f_max)
