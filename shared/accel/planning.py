"""Compiled DP-UCBVI planning: projection, bonus and optimistic backward induction in one pass.

One kernel call plans every replica from the billboard. Per step h it projects the noisy counts
of that step's cells (Lemma 5.4, the canonical LP solution of `privrl.privacy.postprocess`),
builds the model and the Bernstein-type bonus and backs the values up (Qiao & Wang, Alg. 1),
so no (H, S, A, S) temporary is ever allocated: scratch is O(S^2 A) per step. Arithmetic follows
`privrl.algorithms.ucbvi.learner`'s numpy path operation by operation.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from privrl.ties import TIE_TOL

from . import streams  # noqa: F401  (loaded with the planner: seeding then uses it too)
from .arrays import START


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _block_sum(a: np.ndarray, start: int, n: int) -> float:
    """numpy's pairwise-sum leaf (n <= 128): 8 lanes, then the rest in order (no allocation)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[start + i]
        return res
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    i = 8
    while i < n - (n % 8):
        j = start + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@numba.njit(cache=True, nogil=True, error_model="numpy")
def pairwise_sum(a: np.ndarray, start: int, n: int) -> float:
    """numpy's float64 add-reduction of a[start:start+n], in numpy's order."""
    if n <= 128:
        return _block_sum(a, start, n)
    return _halving_sum(a, start, n)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _halving_sum(a: np.ndarray, start: int, n: int) -> float:
    """pairwise_sum above 128 entries (numpy halves the run), without recursion: numba cannot
    reload a cached recursive function."""
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    phase = np.zeros(64, np.int64)  # 0: new, 1: left half pending, 2: right half pending
    left = np.empty(64)
    top = 0
    starts[0], sizes[0] = start, n
    result = 0.0
    while True:
        size = sizes[top]
        if size > 128 and phase[top] == 0:
            half = size // 2
            half -= half % 8
            phase[top] = 1
            top += 1
            starts[top], sizes[top], phase[top] = starts[top - 1], half, 0
            continue
        result = _block_sum(a, starts[top], size) if size <= 128 else result
        while True:  # hand `result` up to the parents
            top -= 1
            if top < 0:
                return result
            if phase[top] == 1:
                left[top] = result
                phase[top] = 2
                half = sizes[top] // 2
                half -= half % 8
                starts[top + 1] = starts[top] + half
                sizes[top + 1] = sizes[top] - half
                phase[top + 1] = 0
                top += 1
                break
            result = left[top] + result


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _sorted_copy(w: np.ndarray, start: int, n: int, out: int) -> None:
    """w[start:start+n] sorted ascending into w[out:out+n] (disjoint): insertion sort on short
    runs (numba's quicksort costs ~300 ns even on 6 entries), numba's sort on long ones."""
    if n > 16:
        for i in range(n):  # a loop: a slice assignment compiles a costly shape check
            w[out + i] = w[start + i]
        w[out : out + n].sort()
        return
    for i in range(n):
        value = w[start + i]
        j = out + i - 1
        while j >= out and w[j] > value:
            w[j + 1] = w[j]
            j -= 1
        w[j + 1] = value


@numba.njit(cache=True, nogil=True, error_model="numpy")
def water_level(w: np.ndarray, start: int, n: int, d: float, tmp: int) -> float:
    """Smallest mu >= 0 with sum_i min(w_i, mu) >= d over w[start:start+n] (w[tmp:tmp+n] is
    scratch); see postprocess. For d == 0 and w >= 0 every level (d - L_m)/(n - m) is <= d/n,
    so the answer is d/n (sign of zero included) without the sort."""
    best = d / n
    if n == 1:
        return max(best, 0.0)
    if d == 0.0:
        nonnegative = True
        for i in range(start, start + n):
            nonnegative = nonnegative and w[i] >= 0.0
        if nonnegative:
            return best
    _sorted_copy(w, start, n, tmp)
    for j in range(tmp + 1, tmp + n - 1):
        w[j] += w[j - 1]
    top = -np.inf
    for m in range(n - 1):
        level = (d - w[tmp + m]) / (n - 1 - m)
        top = max(top, level)
    return max(max(best, top), 0.0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _level_below(w: np.ndarray, start: int, n: int, d: float, m: float) -> bool:
    """Whether water_level(w[start:start+n] >= 0, d) is surely below m, so that max(m, it) is m
    without the sort: f(mu) = sum_i min(w_i, mu) grows by at most n per unit of mu, so
    f(m) >= d + margin puts the level at least margin / n below m, far beyond the rounding of
    the sorted prefix sums that compute it (margin: 1e-9 n times the magnitudes involved)."""
    if not m > 0.0:
        return False
    f, size = 0.0, abs(d) + n * m
    for i in range(start, start + n):
        f += min(w[i], m)
        size += w[i]
    return f >= d + 1e-9 * n * size


@numba.njit(cache=True, nogil=True, error_model="numpy")
def project_cell(sas: np.ndarray, s: int, a: int, n_sa: float, e: float, out: np.ndarray,
                 scratch: np.ndarray) -> float:
    """The canonical projection of cell (s, a) of `sas` (S, A, S) into out[s, a] (x* + E/(2S));
    returns N~(s,a). Three passes over the row, each filling scratch (4 S) with the terms numpy
    sums; below 8 terms numpy sums in order, so the passes sum as they go, else they call
    pairwise_sum. Indexes instead of slicing (a view per cell costs reference counting)."""
    n = sas.shape[2]
    short = n < 8
    quarter = e / 4.0
    hi_sum = n_sa + quarter
    if hi_sum < 0.0:
        hi_sum = 0.0
        lo_sum = 0.0
    else:
        lo_sum = max(n_sa - quarter, 0.0)
    low = np.inf
    total, sum_x0 = 0.0, 0.0
    for i in range(n):  # N^ and x0 = max(N^, 0)
        noisy = sas[s, a, i]
        x0 = max(noisy, 0.0)
        low = min(low, noisy)
        total += noisy
        sum_x0 += x0
        scratch[i] = noisy
        scratch[n + i] = x0
    if not short:
        total = pairwise_sum(scratch, START, n)
        sum_x0 = pairwise_sum(scratch, n, n)
    t0 = max(-low, 0.0)
    t1 = (lo_sum - total) / n
    d = max(sum_x0 - hi_sum, 0.0)
    t = max(t0, t1)
    if d > 0.0 and not _level_below(scratch, n, n, d, t):  # d == 0: t2 is 0
        t = max(t, water_level(scratch, n, n, d, 3 * n))
    target = min(max(sum_x0, lo_sum), hi_sum)
    up = target >= sum_x0
    sum_lo, sum_hi = 0.0, 0.0
    for i in range(n):  # box ends lo, hi and the gaps to them on lambda's side
        noisy = sas[s, a, i]
        x0 = max(noisy, 0.0)
        lo = max(noisy - t, 0.0)
        hi = noisy + t
        sum_lo += lo
        sum_hi += hi
        scratch[i] = lo
        scratch[n + i] = hi
        scratch[2 * n + i] = hi - x0 if up else x0 - lo
    if not short:
        sum_lo = pairwise_sum(scratch, START, n)
        sum_hi = pairwise_sum(scratch, n, n)
    # where target is an end of f's range x is that box corner, and lambda is not needed
    corner_lo, corner_hi = target <= sum_lo, target >= sum_hi
    shift = 0.0
    if not (corner_lo or corner_hi):
        mu = water_level(scratch, 2 * n, n, abs(target - sum_x0), 3 * n)
        shift = mu if up else -mu
    offset = e / (2.0 * n)
    n_tilde = 0.0
    for i in range(n):
        lo, hi = scratch[i], scratch[n + i]
        if corner_hi:
            x = hi
        elif corner_lo:
            x = lo
        else:
            x = min(max(max(sas[s, a, i], 0.0) + shift, lo), hi)
        x += offset
        n_tilde += x
        scratch[2 * n + i] = x
        out[s, a, i] = x
    return n_tilde if short else pairwise_sum(scratch, 2 * n, n)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _model_steps(sas: np.ndarray, sa: np.ndarray, r_sum: np.ndarray, rep: int, first: int,
                 last: int, radius: float, private: bool, threshold: float, p: np.ndarray,
                 n_eff: np.ndarray, r_hat: np.ndarray, cur: int, scratch: np.ndarray,
                 kept: bool, stale: np.ndarray) -> None:
    """Model of replica rep's steps first..last-1 (release (R, Hs, S, A[, S])): P~ (S, A, S),
    thresholded N~ (S, A) and r~ (S, A) into p, n_eff, r_hat [cur + j - first]; with a kept
    model (`plan_replicas`) only of the cells marked stale (R, Hs, S, A). Whole arrays and
    indexes, so a kept model is refreshed in one call: a call with views per step cost more
    than the rest of the step."""
    n_states, n_actions = sa.shape[2], sa.shape[3]
    for j in range(first, last):
        c = cur + j - first
        if private:  # project_cell's rows (never with a kept model)
            noisy, projected = sas[rep, j], p[c]
        for s in range(n_states):
            for a in range(n_actions):
                if kept and not stale[rep, j, s, a]:
                    continue
                if private:
                    n = project_cell(noisy, s, a, sa[rep, j, s, a], radius, projected, scratch)
                else:
                    n = sa[rep, j, s, a]
                    for t in range(n_states):
                        p[c, s, a, t] = sas[rep, j, s, a, t]
                if n > 0:
                    for t in range(n_states):
                        p[c, s, a, t] = p[c, s, a, t] / n
                    r_hat[c, s, a] = min(max(r_sum[rep, j, s, a] / n, 0.0), 1.0)
                else:
                    for t in range(n_states):
                        p[c, s, a, t] = 1.0 / n_states
                    r_hat[c, s, a] = 0.0
                n_eff[c, s, a] = n if (threshold <= 0 or n >= threshold) else 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _next_weights(n_eff: np.ndarray, cur: int, c1: float, c23: float, h2: float,
                  g: np.ndarray, rep: int, j: int, stale: np.ndarray, kept: bool) -> bool:
    """g[rep, j](s') = min(c1/N' + c23/N'^2, H^2) with N' = sum_a N~[cur](s', a) (H^2 where
    N' = 0); with a kept model only at the s' with a cell marked stale [rep, j] (S, A).
    Returns whether any g(s') changed. Whole arrays and indexes: no view per call."""
    n_states, n_actions = n_eff.shape[1], n_eff.shape[2]
    changed = False
    for t in range(n_states):
        if kept:
            rebuilt = False
            for a in range(n_actions):
                rebuilt = rebuilt or stale[rep, j, t, a]
            if not rebuilt:
                continue
        if n_actions < 8:  # numpy's order below 8 terms, inline: a call per state costs more
            n = 0.0
            for a in range(n_actions):
                n += n_eff[cur, t, a]
        else:
            n = pairwise_sum(n_eff[cur, t], START, n_actions)
        weight = min(c1 / n + c23 / (n * n), h2) if n > 0 else h2
        changed = changed or weight != g[rep, j, t]
        g[rep, j, t] = weight
    return changed


@numba.njit(cache=True, nogil=True, error_model="numpy")
def row_dot(p: np.ndarray, c: int, s: int, a: int, y: np.ndarray, scratch: np.ndarray) -> float:
    """sum_t p[c, s, a, t] y_t as numpy's (p * y).sum(-1) computes it (products rounded, then
    summed in numpy's order: in order below 8 terms). Indexes p instead of slicing it: a view
    per call costs reference counting in this innermost loop."""
    n = y.shape[0]
    if n < 8:
        res = 0.0
        for t in range(n):
            res += p[c, s, a, t] * y[t]
        return res
    for t in range(n):
        scratch[t] = p[c, s, a, t] * y[t]
    return pairwise_sum(scratch, START, n)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def plan_replicas(sas: np.ndarray, sa: np.ndarray, r_sum: np.ndarray, radius: float,
                  private: bool, threshold: float, consts: np.ndarray, caps: np.ndarray,
                  q_prev: np.ndarray, clip_previous: bool, use_term3: bool,
                  variance_terms: bool, q_out: np.ndarray, actions: np.ndarray,
                  tied: np.ndarray, model_p: np.ndarray, model_n: np.ndarray,
                  model_r: np.ndarray, model_bonus: np.ndarray, model_g: np.ndarray,
                  stale: np.ndarray) -> None:
    """Optimistic value iteration of every replica from the release (R, Hs, S, A[, S]).

    consts = [iota, bonus_scale, privacy_scale, c3, c1, c23, cb]; writes Q~ (R, H, S, A), the
    greedy actions (first maximiser) and whether a replica has a tie to break at random.
    model_* (R, Hs, S, A[, S]) keep P~, N~ and r~ between calls, with each cell's r~ + bonus
    and variance coefficient (model_bonus (R, Hs, S, A, 2)) and the weights g read by the step
    below (model_g (R, Hs, S)), recomputed only where `stale` (R, Hs, S, A) says the release
    changed (or, for the bonus, where g changed): for a caller whose threshold stays 0, who
    marks every changed cell, and every cell when the constants change (the non-private
    episode loop). Empty, the model is rebuilt per step in O(S^2 A) scratch.
    """
    io, bs, ps, c3, c1, c23, cb = (consts[0], consts[1], consts[2], consts[3], consts[4],
                                   consts[5], consts[6])
    n_rep, horizon, n_states, n_actions = q_out.shape
    pooled = sas.shape[1] == 1
    kept = model_p.shape[0] > 0
    h2 = float(horizon) ** 2
    c4 = 4.0 * math.sqrt(io)
    p_step = np.empty((2, n_states, n_actions, n_states))
    n_step = np.empty((2, n_states, n_actions))
    r_step = np.empty((2, n_states, n_actions))
    g = np.empty(n_states)
    g_rows = g.reshape(1, 1, n_states)  # g as _next_weights writes it without a kept model
    hs = sas.shape[1]
    fresh_at = np.zeros(hs, np.bool_)  # kept model: whether step j's g changed
    scratch = np.empty(4 * n_states)  # project_cell's terms per s'
    v = np.empty(n_states)  # V_{h+1}, V_{h+1}^2
    v2 = np.empty(n_states)
    v_new = np.empty(n_states)
    weighted = variance_terms and horizon > 1
    for rep in range(n_rep):
        p = model_p[rep] if kept else p_step
        n_eff = model_n[rep] if kept else n_step
        r_hat = model_r[rep] if kept else r_step
        tied[rep] = False
        for t in range(n_states):
            v[t] = 0.0
            v2[t] = 0.0
        if kept or pooled:  # every step's stale cells (or the pooled step) in one call
            _model_steps(sas, sa, r_sum, rep, START, hs, radius, private, threshold, p, n_eff,
                         r_hat, START, scratch, kept, stale)
        if kept and weighted:  # the weights each step's cells read, where they changed
            for j in range(0 if pooled else 1, hs):
                fresh_at[j] = _next_weights(n_eff, j, c1, c23, h2, model_g, rep, j, stale,
                                            kept)
        elif pooled and weighted:
            _next_weights(n_eff, START, c1, c23, h2, g_rows, START, START, stale, kept)
        for h in range(horizon - 1, -1, -1):
            cur = 0 if pooled else (h if kept else h % 2)
            if not (pooled or kept):
                if h < horizon - 1 and weighted:
                    _next_weights(n_eff, 1 - cur, c1, c23, h2, g_rows, START, START, stale,
                                  kept)
                _model_steps(sas, sa, r_sum, rep, h, h + 1, radius, private, threshold, p,
                             n_eff, r_hat, cur, scratch, kept, stale)
            # whether g changed since the kept bonuses read it (pooled: once, at the first step)
            fresh = False
            if kept and weighted and (pooled or h < horizon - 1):
                fresh = fresh_at[0] if pooled else fresh_at[h + 1]
                fresh = fresh and (h == horizon - 1 or not pooled)
                for t in range(n_states):
                    g[t] = model_g[rep, 0 if pooled else h + 1, t]
            for s in range(n_states):
                best = -np.inf
                for a in range(n_actions):
                    n = n_eff[cur, s, a]
                    if n_states < 8:  # both sums in one pass (numpy's order: in order)
                        pv, pv2 = 0.0, 0.0
                        for t in range(n_states):
                            pv += p[cur, s, a, t] * v[t]
                            pv2 += p[cur, s, a, t] * v2[t]
                    else:
                        pv = row_dot(p, cur, s, a, v, scratch)
                        pv2 = row_dot(p, cur, s, a, v2, scratch)
                    if kept and not (fresh or stale[rep, cur, s, a]):
                        r_bonus = model_bonus[rep, cur, s, a, 0]
                        spread = model_bonus[rep, cur, s, a, 1]
                    else:  # r~ + bonus and the variance term's coefficient
                        r_bonus, spread = np.inf, 0.0
                        if n > 0:
                            inv_n = 1.0 / n
                            bonus = bs * math.sqrt((2.0 * io) * inv_n)
                            if use_term3:
                                bonus = bonus + ps * (c3 * inv_n)
                            else:
                                bonus = bonus + 0.0
                            if weighted:
                                w = 0.0
                                if h < horizon - 1 or pooled:  # pooled: E5 unapplied, as numpy
                                    if n_states < 8:
                                        for t in range(n_states):
                                            w += p[cur, s, a, t] * g[t]
                                    else:
                                        w = row_dot(p, cur, s, a, g, scratch)
                                bonus = bonus + bs * (c4 * math.sqrt(w * inv_n))
                            r_bonus = r_hat[cur, s, a] + bonus
                            if cb > 0:
                                spread = 2.0 * cb * math.sqrt(io / n)
                        if kept:
                            model_bonus[rep, cur, s, a, 0] = r_bonus
                            model_bonus[rep, cur, s, a, 1] = spread
                            stale[rep, cur, s, a] = False
                    q = np.inf
                    if n > 0:
                        q = r_bonus + pv
                        if cb > 0:
                            q += spread * math.sqrt(max(pv2 - pv * pv, 0.0))
                    ceiling = min(caps[h], q_prev[rep, h, s, a]) if clip_previous else caps[h]
                    q = min(q, ceiling)
                    q_out[rep, h, s, a] = q
                    best = max(best, q)
                v_new[s] = best
                count = 0
                first = -1
                for a in range(n_actions):
                    if q_out[rep, h, s, a] >= best - TIE_TOL:
                        count += 1
                        if first < 0:
                            first = a
                actions[rep, h, s] = first
                if count > 1:
                    tied[rep] = True
            for t in range(n_states):
                v[t] = v_new[t]
                v2[t] = v_new[t] * v_new[t]

