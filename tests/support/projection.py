"""The numpy reference of the post-processing of noisy counts into valid private counts (Qiao &
Wang, Lemma 5.4), which DP-UCBVI's compiled planner does per cell (`privrl.accel.kernels`).

For every cell `(h, s, a)` the noisy transition counts `N^(s')` (may be negative or fractional)
and the noisy pair count `n^` are mapped to an optimal solution `x*` of the paper's LP (eq. 4/6)

    minimise t  s.t.  |x_{s'} - N^(s')| <= t,  x >= 0,  |sum x - n^| <= E/4,

and then shifted by the never-under-count offset: `N~(s,a,s') = x* + E/(2S)`,
`N~(s,a) = sum_{s'} N~(s,a,s') (= sum x* + E/2)`.

The LP has many optimal `x`; we return a *canonical* one (erratum E6),
computed in closed form and fully vectorised over any number of leading batch dimensions (no
per-cell loop, no bisection): both `t2` and the shift `lambda` are "water levels" of a
piecewise-linear monotone function, obtained exactly from one sort and prefix sums each.
Cost per call is `O(cells * S log S)`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["Projection", "lp_objective", "project_counts"]


class Projection(NamedTuple):
    """Result of `project_counts`; every field has the batch shape `(...)` except `sas`."""

    sas: np.ndarray  # (..., S) private transition counts N~(s,a,s') = x* + E/(2S)
    sa: np.ndarray  # (...) private pair counts N~(s,a) = sum x* + E/2 (== sas.sum(-1))
    t: np.ndarray  # (...) the LP optimum t*
    infeasible: np.ndarray  # (...) bool, where n^ + E/4 < 0 and the sum-x=0 fallback was used


def _prepare(
    noisy_sas: ArrayLike, noisy_sa: ArrayLike, radius: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate inputs; return float64 `(N^ (..., S), n^ (...), E (...))`."""
    n_sas = np.asarray(noisy_sas, dtype=np.float64)
    n_sa = np.asarray(noisy_sa, dtype=np.float64)
    if n_sas.ndim < 1 or n_sas.shape[-1] < 1:
        raise ValueError(f"noisy_sas must have shape (..., S) with S >= 1, got {n_sas.shape}")
    if n_sa.shape != n_sas.shape[:-1]:
        raise ValueError(
            f"noisy_sa must have shape {n_sas.shape[:-1]} (noisy_sas without its last axis), "
            f"got {n_sa.shape}"
        )
    e = np.asarray(radius, dtype=np.float64)
    try:
        e = np.broadcast_to(e, n_sa.shape)
    except ValueError as err:
        raise ValueError(
            f"radius of shape {e.shape} does not broadcast to the batch shape {n_sa.shape}"
        ) from err
    if not (np.all(np.isfinite(n_sas)) and np.all(np.isfinite(n_sa))):
        raise ValueError("noisy counts must be finite")
    if not np.all(np.isfinite(e) & (e >= 0)):
        raise ValueError("radius E must be finite and >= 0")
    return n_sas, n_sa, e


def project_counts(noisy_sas: ArrayLike, noisy_sa: ArrayLike, radius: ArrayLike) -> Projection:
    """Map noisy counts to private counts satisfying the contract of Qiao & Wang's Lemma 5.4.

    `noisy_sas` has shape `(..., S)`, `noisy_sa` shape `(...)`, `radius` (the error radius `E`,
    `E >= 0`) is a scalar or broadcastable to `(...)`. Implements the canonical closed-form
    closed-form solver exactly:

        t* = max(t0, t1, t2),  x* = clip(max(N^, 0) + lambda, max(0, N^ - t*), N^ + t*)

    with `lambda` chosen so that `sum x* = clip(sum max(N^, 0), lo_sum, hi_sum)`. Where the LP
    is infeasible (`n^ + E/4 < 0`) the sum constraint is replaced by `sum x = 0` (so `x* = 0`)
    and the cell is flagged in `infeasible` for the caller to log.
    """
    n_sas, n_sa, e = _prepare(noisy_sas, noisy_sa, radius)
    s = n_sas.shape[-1]
    quarter = e / 4.0

    # Sum window [lo_sum, hi_sum] (x >= 0 makes a negative lower end irrelevant).
    hi_sum = n_sa + quarter
    infeasible = hi_sum < 0.0
    hi_sum = np.where(infeasible, 0.0, hi_sum)
    lo_sum = np.where(infeasible, 0.0, np.maximum(n_sa - quarter, 0.0))

    # t0: every box [max(0, N^ - t), N^ + t] non-empty; t1: sum of upper ends >= lo_sum.
    x0 = np.maximum(n_sas, 0.0)  # canonical start point, inside every box of t >= t0
    t0 = np.maximum(-n_sas.min(axis=-1), 0.0)
    t1 = (lo_sum - n_sas.sum(axis=-1)) / s
    # t2 = min{t >= 0 : sum (N^ - t)_+ <= hi_sum}: sum of lower ends <= hi_sum. For t >= 0,
    # sum (N^ - t)_+ = sum x0 - sum min(x0, t), so t2 is a water level of x0.
    sum_x0 = x0.sum(axis=-1)
    t2 = _water_level(x0, np.maximum(sum_x0 - hi_sum, 0.0))
    t = np.maximum(np.maximum(t0, t1), t2)

    # Canonical optimal x = clip(x0 + lambda, lo, hi) with sum x = target. f(lambda) =
    # sum clip(x0 + lambda, lo, hi) is nondecreasing, piecewise linear, f(0) = sum x0, with
    # breakpoints lo - x0 <= 0 and hi - x0 >= 0. The sign of lambda is known in advance, so only
    # the S breakpoints on that side matter: for target >= sum x0, f(mu) - f(0) =
    # sum min(hi - x0, mu), for target < sum x0, f(0) - f(-mu) = sum min(x0 - lo, mu); either way
    # |lambda| is a water level of the gaps to the box ends, found exactly by one sort.
    # (In-place ufuncs below only avoid large temporaries; the arithmetic is the same.)
    tt = t[..., None]
    lo = n_sas - tt
    np.maximum(lo, 0.0, out=lo)
    hi = n_sas + tt
    target = np.minimum(np.maximum(sum_x0, lo_sum), hi_sum)
    up = target >= sum_x0
    gaps = hi - x0  # gaps to the box ends on lambda's side, >= 0
    np.subtract(x0, lo, out=gaps, where=~up[..., None])
    mu = _water_level(gaps, np.abs(target - sum_x0), overwrite=True)  # 0 if target == sum x0
    x = np.add(x0, np.where(up, mu, -mu)[..., None], out=gaps)  # reuse the scratch buffer
    np.maximum(x, lo, out=x)
    np.minimum(x, hi, out=x)
    # Where target is an end of f's range, x is exactly that box corner (avoids round-off).
    np.copyto(x, lo, where=(target <= lo.sum(axis=-1))[..., None])
    np.copyto(x, hi, where=(target >= hi.sum(axis=-1))[..., None])

    sas = x
    sas += (e / (2.0 * s))[..., None]  # N~(s,a,s') = x* + E/(2S)
    return Projection(
        sas=sas,
        sa=np.asarray(sas.sum(axis=-1)),
        t=np.asarray(t),
        infeasible=np.asarray(infeasible),
    )


def _water_level(w: np.ndarray, d: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """Smallest `mu >= 0` with `sum_i min(w_i, mu) >= d`, per batch cell, for `w >= 0`.

    `h(mu) = sum_i min(w_i, mu)` is concave, nondecreasing and piecewise linear with breakpoints
    `w_i`. With `w` sorted ascending and `L_m` the sum of its `m` smallest entries,
    `h(mu) = min_{m=0..S} (L_m + (S - m) mu)`, so `h(mu) >= d` iff `mu >= (d - L_m) / (S - m)`
    for every `m < S` (given `d <= sum w`): the answer is a max over `m`, which is the exact
    linear interpolation on the segment containing `d` (no segment search, no bisection). For
    `0 < d <= sum w`, `h(mu) = d` at the returned level. `overwrite=True` uses `w` as scratch.
    """
    s = w.shape[-1]
    best = d / s  # m = 0
    if s == 1:
        return np.maximum(best, 0.0)
    if overwrite:
        w.sort(axis=-1)
    else:
        w = np.sort(w, axis=-1)
    # Prefix sums in place, one vectorised add per column (np.cumsum over a short last axis is
    # ~3x slower); the loop runs over the S axis only, never over cells.
    for j in range(1, s - 1):
        w[..., j] += w[..., j - 1]
    level = w[..., : s - 1]  # L_1 .. L_{S-1}
    np.subtract(d[..., None], level, out=level)
    level /= np.arange(s - 1, 0, -1, dtype=np.float64)  # (d - L_m) / (S - m)
    return np.maximum(np.maximum(best, level.max(axis=-1)), 0.0)


def lp_objective(
    noisy_sas: ArrayLike,
    noisy_sa: ArrayLike,
    radius: ArrayLike,
    x: ArrayLike,
    tol: float = 1e-9,
) -> np.ndarray:
    """LP (paper's eq. 6) objective `max_{s'} |x - N^|` of a candidate `x`, `+inf` if infeasible.

    Feasibility (`x >= 0`, `|sum x - n^| <= E/4`) is checked with the absolute tolerance
    `tol * (1 + max|N^| + |n^| + E)` per cell. Meant for tests and diagnostics.
    """
    n_sas, n_sa, e = _prepare(noisy_sas, noisy_sa, radius)
    xa = np.asarray(x, dtype=np.float64)
    if xa.shape != n_sas.shape:
        raise ValueError(f"x must have shape {n_sas.shape}, got {xa.shape}")
    scale = 1.0 + np.abs(n_sas).max(axis=-1) + np.abs(n_sa) + e
    slack = tol * scale
    feasible = (xa.min(axis=-1) >= -slack) & (np.abs(xa.sum(axis=-1) - n_sa) <= e / 4.0 + slack)
    return np.where(feasible, np.abs(xa - n_sas).max(axis=-1), np.inf)
