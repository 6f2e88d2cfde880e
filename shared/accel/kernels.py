"""DP-UCBVI's compiled kernels: planning (projection, bonus, optimistic value iteration), the
in-process episode loop, the episode rollout every user plays, and the exact values of
deterministic policies that every regret is computed from. The only implementation of each; a
kernel receives its random draws as arrays (drawn with numpy's Generator), it never draws.

Every kernel and its callees sit in this one module, so numba's cache (keyed by this file) never
loads a kernel with a stale callee. Each kernel has one explicit signature: importing this
module compiles (or loads from numba's cache) exactly one specialization each, so callers pass
C-contiguous, writable float64 / int64 / bool arrays.
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from numba import types
from privrl.accel import KERNELS

_STARTED = time.perf_counter()  # IMPORT_SECONDS: what compiling (or loading) them took

# the kernels compiled (or loaded from numba's cache) at import, one signature each
__all__ = list(KERNELS)

F8, I8, B1 = types.float64, types.int64, types.boolean


def _arr(dtype: types.Type, ndim: int, readonly: bool = False) -> types.Array:
    return types.Array(dtype, ndim, "C", readonly=readonly)


RELEASE = types.Tuple((_arr(F8, 5), _arr(F8, 4), _arr(F8, 4)))  # sums of sas, sa, r
# a model (R, Hs, S, A[, S]): P~, N~, r~, (r~ + bonus, variance coefficient), g, stale, then
# two public arrays that are empty unless the learner declares them: the transition support
# (S, A, S) (P~ restricted to it) and each (s, a)'s threshold factor (S, A)
MODEL = types.Tuple((_arr(F8, 5), _arr(F8, 4), _arr(F8, 4), _arr(F8, 5), _arr(F8, 3),
                     _arr(B1, 4), _arr(B1, 3), _arr(F8, 2)))
NOISE = types.Tuple((_arr(F8, 6), _arr(F8, 5), _arr(F8, 5)))  # (B, R, Hs, S, A[, S])
# a world's read-only cum d1, cum P and mean rewards
WORLD = types.Tuple((_arr(F8, 1, True), _arr(F8, 4, True), _arr(F8, 3, True)))
TRUTH = types.Tuple((_arr(F8, 4, True), _arr(F8, 1, True)))  # a world's read-only P and d1
# what the episode loop reports of each policy played: the last policy (R, H, S) and its values
# (R, H+1, S), kept between calls; each episode's expected return and whether it changed (B, R)
TRACE = types.Tuple((_arr(I8, 3), _arr(F8, 3), _arr(F8, 2), _arr(B1, 2)))
SCHEDULE = types.Tuple((_arr(F8, 1), _arr(F8, 1), _arr(F8, 2)))  # radius, threshold, consts
OPTIONS = dict(nogil=True, error_model="numpy")

# plan_replicas' and run_episodes' flags (a bool array)
PRIVATE, CLIP_PREVIOUS, VARIANCE_TERMS, HAS_SA, BERNOULLI, INTEGER_REWARDS = range(6)


@numba.njit(**OPTIONS)
def _sorted_copy(w: np.ndarray, start: int, n: int, out: int) -> None:
    """w[start:start+n] sorted ascending into w[out:out+n] (disjoint), by Shell sort: a few
    lines, where numba's own sort costs seconds of compilation."""
    for i in range(n):
        w[out + i] = w[start + i]
    gap = 1
    while gap < n // 3:
        gap = 3 * gap + 1
    while gap > 0:
        for i in range(out + gap, out + n):
            value = w[i]
            j = i
            while j >= out + gap and w[j - gap] > value:
                w[j] = w[j - gap]
                j -= gap
            w[j] = value
        gap //= 3


@numba.njit(**OPTIONS)
def _water_level(w: np.ndarray, start: int, n: int, d: float, tmp: int) -> float:
    """Smallest mu >= 0 with sum_i min(w_i, mu) >= d over w[start:start+n] (w[tmp:tmp+n] is
    scratch): the water levels of the canonical projection. For d == 0 and w >= 0: d/n."""
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
        top = max(top, (d - w[tmp + m]) / (n - 1 - m))
    return max(max(best, top), 0.0)


@numba.njit(**OPTIONS)
def _level_below(w: np.ndarray, start: int, n: int, d: float, m: float) -> bool:
    """Whether the water level of w[start:start+n] >= 0 for d is surely below m (so max(m, it)
    is m without the sort): sum_i min(w_i, mu) grows by at most n per unit of mu."""
    if not m > 0.0:
        return False
    f, size = 0.0, abs(d) + n * m
    for i in range(start, start + n):
        f += min(w[i], m)
        size += w[i]
    return f >= d + 1e-9 * n * size


@numba.njit(cache=True, **OPTIONS)  # cached: the tests call it from Python
def project_cell(sas: np.ndarray, s: int, a: int, n_sa: float, e: float, out: np.ndarray,
                 scratch: np.ndarray) -> float:
    """The canonical projection (Qiao & Wang, Lemma 5.4) of cell (s, a) of `sas` (S, A, S) into
    out[s, a] (x* + E/(2S)); returns N~(s,a). scratch holds 4 S floats."""
    n = sas.shape[2]
    quarter = e / 4.0
    hi_sum = n_sa + quarter
    if hi_sum < 0.0:
        hi_sum = 0.0
        lo_sum = 0.0
    else:
        lo_sum = max(n_sa - quarter, 0.0)
    low = np.inf
    total, sum_x0 = 0.0, 0.0
    for i in range(n):
        noisy = sas[s, a, i]
        low = min(low, noisy)
        total += noisy
        sum_x0 += max(noisy, 0.0)
        scratch[n + i] = max(noisy, 0.0)
    t = max(max(-low, 0.0), (lo_sum - total) / n)
    d = max(sum_x0 - hi_sum, 0.0)
    if d > 0.0 and not _level_below(scratch, n, n, d, t):
        t = max(t, _water_level(scratch, n, n, d, 3 * n))
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
    corner_lo, corner_hi = target <= sum_lo, target >= sum_hi
    shift = 0.0
    if not (corner_lo or corner_hi):
        mu = _water_level(scratch, 2 * n, n, abs(target - sum_x0), 3 * n)
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
        out[s, a, i] = x
    return n_tilde


@numba.njit(**OPTIONS)
def _model_steps(release: tuple, rep: int, first: int, last: int, radius: float, private: bool,
                 threshold: float, p: np.ndarray, n_eff: np.ndarray, r_hat: np.ndarray,
                 scratch: np.ndarray, stale: np.ndarray, support: np.ndarray,
                 factor: np.ndarray) -> None:
    """Model of replica rep's steps first..last-1, at its cells marked stale: P~, thresholded
    N~ and r~ into p, n_eff, r_hat [j]. A non-empty `support` (S, A, S) restricts P~ to it
    (N~ is the projected count on it); a non-empty `factor` (S, A) scales the threshold."""
    sas, sa, r_sum = release
    n_states, n_actions = sa.shape[2], sa.shape[3]
    restricted, scaled = support.shape[0] > 0, factor.shape[0] > 0
    for c in range(first, last):
        noisy, projected = sas[rep, c], p[c]  # one view per step: a view per cell costs more
        for s in range(n_states):
            for a in range(n_actions):
                if not stale[rep, c, s, a]:
                    continue
                if private:
                    n = project_cell(noisy, s, a, sa[rep, c, s, a], radius, projected, scratch)
                else:
                    n = sa[rep, c, s, a]
                    for t in range(n_states):
                        p[c, s, a, t] = sas[rep, c, s, a, t]
                width = n_states
                if restricted:  # only the possible next states keep mass
                    n, width = 0.0, 0
                    for t in range(n_states):
                        if support[s, a, t]:
                            n += p[c, s, a, t]
                            width += 1
                        else:
                            p[c, s, a, t] = 0.0
                if n > 0:
                    for t in range(n_states):
                        p[c, s, a, t] = p[c, s, a, t] / n
                    r_hat[c, s, a] = min(max(r_sum[rep, c, s, a] / n, 0.0), 1.0)
                else:
                    for t in range(n_states):
                        p[c, s, a, t] = 1.0 / width if not restricted or support[s, a, t] else 0.0
                    r_hat[c, s, a] = 0.0
                bar = threshold * factor[s, a] if scaled else threshold
                n_eff[c, s, a] = n if (bar <= 0 or n >= bar) else 0.0


@numba.njit(**OPTIONS)
def _next_weights(n_eff: np.ndarray, c1: float, c23: float, h2: float, g: np.ndarray, rep: int,
                  j: int, stale: np.ndarray) -> bool:
    """g[rep, j](s') = min(c1/N' + c23/N'^2, H^2), N' = sum_a N~[j](s', a) (H^2 where N' = 0),
    where a cell of s' is stale. Returns whether any g(s') changed."""
    n_states, n_actions = n_eff.shape[1], n_eff.shape[2]
    changed = False
    for t in range(n_states):
        rebuilt = False
        for a in range(n_actions):
            rebuilt = rebuilt or stale[rep, j, t, a]
        if not rebuilt:
            continue
        n = 0.0
        for a in range(n_actions):
            n += n_eff[j, t, a]
        weight = min(c1 / n + c23 / (n * n), h2) if n > 0 else h2
        changed = changed or weight != g[rep, j, t]
        g[rep, j, t] = weight
    return changed


@numba.njit(MODEL(I8, I8, I8, I8), cache=True, **OPTIONS)
def new_model(n_rep: int, hs: int, n_states: int, n_actions: int) -> tuple:
    """An empty model for `plan_replicas`, every cell stale."""
    shape = (n_rep, hs, n_states, n_actions)
    return (np.empty((*shape, n_states)), np.empty(shape), np.empty(shape),
            np.empty((*shape, 2)), np.empty(shape[:3]), np.ones(shape, np.bool_),
            np.empty((0, 0, 0), np.bool_), np.empty((0, 0)))


@numba.njit(**OPTIONS)
def _plan(release: tuple, radius: float, threshold: float, consts: np.ndarray, caps: np.ndarray,
          flags: np.ndarray, q_prev: np.ndarray, q_out: np.ndarray, actions: np.ndarray,
          tied: np.ndarray, model: tuple, tie_tol: float) -> None:
    """`plan_replicas`' body (a callee of the episode loop as well)."""
    sas = release[0]
    model_p, model_n, model_r, model_bonus, model_g, stale, support, factor = model
    io, bs, ps, c3, c1, c23, cb = (consts[0], consts[1], consts[2], consts[3], consts[4],
                                   consts[5], consts[6])
    private, clip_previous = flags[PRIVATE], flags[CLIP_PREVIOUS]
    use_term3 = radius > 0
    n_rep, horizon, n_states, n_actions = q_out.shape
    pooled = sas.shape[1] == 1
    h2 = float(horizon) ** 2
    c4 = 4.0 * math.sqrt(io)
    g = np.empty(n_states)
    hs = sas.shape[1]
    fresh_at = np.zeros(hs, np.bool_)  # whether step j's g changed
    scratch = np.empty(4 * n_states)
    v = np.empty(n_states)  # V_{h+1}, V_{h+1}^2
    v2 = np.empty(n_states)
    v_new = np.empty(n_states)
    weighted = flags[VARIANCE_TERMS] and horizon > 1
    for rep in range(n_rep):
        p, n_eff, r_hat = model_p[rep], model_n[rep], model_r[rep]
        tied[rep] = False
        for t in range(n_states):
            v[t] = 0.0
            v2[t] = 0.0
        _model_steps(release, rep, 0, hs, radius, private, threshold, p, n_eff, r_hat, scratch,
                     stale, support, factor)
        if weighted:
            for j in range(0 if pooled else 1, hs):
                fresh_at[j] = _next_weights(n_eff, c1, c23, h2, model_g, rep, j, stale)
        for h in range(horizon - 1, -1, -1):
            cur = 0 if pooled else h
            fresh = False  # whether g changed since the kept bonuses read it
            if weighted and (pooled or h < horizon - 1):
                fresh = fresh_at[0] if pooled else fresh_at[h + 1]
                fresh = fresh and (h == horizon - 1 or not pooled)
                for t in range(n_states):
                    g[t] = model_g[rep, 0 if pooled else h + 1, t]
            for s in range(n_states):
                best = -np.inf
                for a in range(n_actions):
                    n = n_eff[cur, s, a]
                    pv, pv2 = 0.0, 0.0
                    for t in range(n_states):
                        pv += p[cur, s, a, t] * v[t]
                        pv2 += p[cur, s, a, t] * v2[t]
                    if not (fresh or stale[rep, cur, s, a]):
                        r_bonus = model_bonus[rep, cur, s, a, 0]
                        spread = model_bonus[rep, cur, s, a, 1]
                    else:  # r~ + bonus and the variance term's coefficient
                        r_bonus, spread = np.inf, 0.0
                        if n > 0:
                            inv_n = 1.0 / n
                            bonus = bs * math.sqrt((2.0 * io) * inv_n)
                            if use_term3:
                                bonus += ps * (c3 * inv_n)
                            if weighted:
                                w = 0.0
                                if h < horizon - 1 or pooled:  # term 4 is 0 at h = H (E5)
                                    for t in range(n_states):
                                        w += p[cur, s, a, t] * g[t]
                                bonus += bs * (c4 * math.sqrt(w * inv_n))
                            r_bonus = r_hat[cur, s, a] + bonus
                            if cb > 0:
                                spread = 2.0 * cb * math.sqrt(io / n)
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
                count, first = 0, -1
                for a in range(n_actions):
                    if q_out[rep, h, s, a] >= best - tie_tol:
                        count += 1
                        if first < 0:
                            first = a
                actions[rep, h, s] = first
                if count > 1:
                    tied[rep] = True
            for t in range(n_states):
                v[t] = v_new[t]
                v2[t] = v_new[t] * v_new[t]


@numba.njit(types.void(RELEASE, F8, F8, _arr(F8, 1), _arr(F8, 1), _arr(B1, 1), _arr(F8, 4),
                       _arr(F8, 4), _arr(I8, 3), _arr(B1, 1), MODEL, F8), cache=True, **OPTIONS)
def plan_replicas(release: tuple, radius: float, threshold: float, consts: np.ndarray,
                  caps: np.ndarray, flags: np.ndarray, q_prev: np.ndarray, q_out: np.ndarray,
                  actions: np.ndarray, tied: np.ndarray, model: tuple, tie_tol: float) -> None:
    """Optimistic value iteration (Qiao & Wang, Alg. 1) of every replica from the release
    (sums of sas, sa, r: (R, Hs, S, A[, S])), the noisy counts projected first when private.

    consts = [iota, bonus_scale, privacy_scale, c3, c1, c23, cb]; flags = [private,
    clip_previous, variance_terms]. Writes Q~ (R, H, S, A), the greedy actions (first
    maximiser within tie_tol) and whether a replica has a tie to break (`break_ties`).
    `model` (`new_model`) keeps P~, N~, r~, the bonuses and the weights g between calls,
    recomputed only where its stale mask (R, Hs, S, A) says the release changed (a caller
    whose threshold stays 0 and who marks every changed cell), and the cleared mask.
    """
    _plan(release, radius, threshold, consts, caps, flags, q_prev, q_out, actions, tied, model,
          tie_tol)


@numba.njit(**OPTIONS)
def _break_ties(q: np.ndarray, keys: np.ndarray, tie_tol: float, actions: np.ndarray) -> None:
    """Greedy actions (H, S) of one replica's Q~ (H, S, A), each tie broken uniformly at random:
    the tied action of rank floor(key * count) with key (H, S) uniform in [0, 1)."""
    horizon, n_states, n_actions = q.shape
    for h in range(horizon):
        for s in range(n_states):
            best = -np.inf
            for a in range(n_actions):
                best = max(best, q[h, s, a])
            count = 0
            for a in range(n_actions):
                if q[h, s, a] >= best - tie_tol:
                    count += 1
            rank = min(int(keys[h, s] * count), count - 1)
            for a in range(n_actions):
                if q[h, s, a] >= best - tie_tol:
                    if rank == 0:
                        actions[h, s] = a
                        break
                    rank -= 1


@numba.njit(types.void(_arr(F8, 3), _arr(F8, 2), F8, _arr(I8, 2)), cache=True, **OPTIONS)
def break_ties(q: np.ndarray, keys: np.ndarray, tie_tol: float, actions: np.ndarray) -> None:
    """`_break_ties` for the planner of one replica (the server's and the generic loop's)."""
    _break_ties(q, keys, tie_tol, actions)


@numba.njit(**OPTIONS)
def _draw(cdf: np.ndarray, u: float) -> int:
    """Inverse CDF: #{cdf <= u}, clipped to the last index (`privrl.worlds.rollout`'s layout)."""
    n = 0
    for i in range(cdf.shape[0]):
        if cdf[i] <= u:
            n += 1
    return min(n, cdf.shape[0] - 1)


@numba.njit(**OPTIONS)
def _episode(world: tuple, policy: np.ndarray, u: np.ndarray, bernoulli: bool,
             states: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> None:
    """One user's episode of policy (H, S) with its uniforms u (2H+1), in the layout of
    `privrl.worlds.rollout`: s_1, each transition and each Bernoulli reward by its own draw."""
    cum_d1, cum_p, r_mean = world
    horizon = policy.shape[0]
    states[0] = _draw(cum_d1, u[0])
    for h in range(horizon):
        s = states[h]
        a = actions[h] = policy[h, s]
        states[h + 1] = _draw(cum_p[h, s, a], u[1 + h])
        mean = r_mean[h, s, a]
        rewards[h] = (1.0 if u[1 + horizon + h] < mean else 0.0) if bernoulli else mean


@numba.njit(**OPTIONS)
def _backward_values(transitions: np.ndarray, rewards: np.ndarray, policy: np.ndarray,
                     values: np.ndarray, top: int) -> None:
    """V^pi_h for h = top .. 0 into values (H+1, S) of the deterministic policy (H, S), whose
    rows top+1 .. H already hold its values: V_h(s) = r_h(s, a) + sum_t P_h(t | s, a) V_{h+1}(t)
    with a = pi_h(s)."""
    n_states = policy.shape[1]
    for h in range(top, -1, -1):
        for s in range(n_states):
            a = policy[h, s]
            acc = 0.0
            for t in range(n_states):
                acc += transitions[h, s, a, t] * values[h + 1, t]
            values[h, s] = rewards[h, s, a] + acc


@numba.njit(**OPTIONS)
def _start_value(d1: np.ndarray, values: np.ndarray) -> float:
    """d1 · V_1: the expected return of the policy whose values (H+1, S) are given."""
    acc = 0.0
    for t in range(d1.shape[0]):
        acc += d1[t] * values[0, t]
    return acc


@numba.njit(**OPTIONS)
def _record_policy(truth: tuple, rewards: np.ndarray, policy: np.ndarray, trace: tuple, i: int,
                   rep: int) -> None:
    """Episode i's entry of replica rep in the trace: whether its policy (H, S) differs from the
    last one, and its expected return, its values redone only from the last differing step."""
    transitions, d1 = truth
    last, values, returns, changed = trace
    horizon, n_states = policy.shape
    top = -1
    for h in range(horizon - 1, -1, -1):
        for s in range(n_states):
            if policy[h, s] != last[rep, h, s]:
                top = h
                break
        if top >= 0:
            break
    for h in range(top + 1):
        for s in range(n_states):
            last[rep, h, s] = policy[h, s]
    _backward_values(transitions, rewards, policy, values[rep], top)
    changed[i, rep] = top >= 0
    returns[i, rep] = _start_value(d1, values[rep])


@numba.njit(types.void(RELEASE, NOISE, _arr(F8, 3), _arr(F8, 4), WORLD, TRUTH,
                       SCHEDULE, _arr(F8, 1), _arr(B1, 1), F8, _arr(F8, 4), TRACE),
            cache=True, **OPTIONS)
def run_episodes(sums: tuple, report_noise: tuple, uniforms: np.ndarray,
                 tie_keys: np.ndarray, world: tuple, truth: tuple, schedule: tuple,
                 caps: np.ndarray, flags: np.ndarray, tie_tol: float, q: np.ndarray,
                 trace: tuple) -> None:
    """B episodes of R replicas of DP-UCBVI: plan from the billboard, break ties, roll out, count.

    sums (R, Hs, S, A[, S]): the exact sums (non-private) or the sums of noisy reports (LDP),
    updated in place, as is Q~ q; they are the billboard. report_noise (B, R, ...) is each
    user's report noise (LDP; no rows when non-private). uniforms (R, B, 2H+1 [+ H]) are the
    users' rollout draws (then, with integer_rewards, the H that turn each realised reward r
    into Bernoulli(r)),
    tie_keys (R, B, H, S) the planner's tie-break draws. schedule: each episode's radius,
    threshold (B,) and constants (B, 7); flags: [private, clip_previous, variance_terms, has_sa,
    bernoulli, integer_rewards]. trace (`TRACE`) gets each episode's expected return d1 · V^pi_1
    of the policy played (from the world's truth: P, d1) and whether it changed, recomputed
    only from the last step where the policy differs from the one played before.
    """
    sas_sum, sa_sum, r_sum = sums
    radius, threshold, consts = schedule
    n_rep, horizon, n_states, n_actions = q.shape
    hs = sas_sum.shape[1]
    has_sa, bernoulli, integer_rewards = flags[HAS_SA], flags[BERNOULLI], flags[INTEGER_REWARDS]
    ldp = report_noise[0].shape[0] > 0
    board_sas, board_r = sas_sum, r_sum
    board_sa = sa_sum if has_sa else np.empty_like(r_sum)
    q_new = np.empty_like(q)
    actions = np.empty((n_rep, horizon, n_states), np.int64)
    tied = np.empty(n_rep, np.bool_)
    clean_sas = np.zeros(sas_sum.shape[1:])
    clean_sa = np.zeros(r_sum.shape[1:])
    clean_r = np.zeros(r_sum.shape[1:])
    states, played_actions = np.empty(horizon + 1, np.int64), np.empty(horizon, np.int64)
    rewards = np.empty(horizon)
    # non-private: the model changes only at the visited cells, so only they are rebuilt
    kept = not (flags[PRIVATE] or ldp) and (threshold <= 0.0).all()
    model = new_model(n_rep, hs, n_states, n_actions)
    stale = model[5]
    stale_flat, q_flat, q_new_flat = stale.reshape(-1), q.reshape(-1), q_new.reshape(-1)
    for i in range(uniforms.shape[1]):
        if not has_sa and (ldp or i == 0):  # N(s,a) derived; else only visits change it
            for rep in range(n_rep):
                for j in range(hs):
                    for s in range(n_states):
                        for a in range(n_actions):
                            n = 0.0
                            for t in range(n_states):
                                n += board_sas[rep, j, s, a, t]
                            board_sa[rep, j, s, a] = n
        renew = not kept  # the kept bonuses read the radius and the constants
        if kept and i > 0:
            renew = radius[i] != radius[i - 1]
            for c in range(consts.shape[1]):
                renew = renew or consts[i, c] != consts[i - 1, c]
        if renew:
            for c in range(stale_flat.shape[0]):
                stale_flat[c] = True
        _plan((board_sas, board_sa, board_r), radius[i], threshold[i], consts[i], caps, flags,
              q, q_new, actions, tied, model, tie_tol)
        for c in range(q_flat.shape[0]):
            q_flat[c] = q_new_flat[c]
        for rep in range(n_rep):
            if tied[rep]:
                _break_ties(q[rep], tie_keys[rep, i], tie_tol, actions[rep])
            _record_policy(truth, world[2], actions[rep], trace, i, rep)
            _episode(world, actions[rep], uniforms[rep, i], bernoulli, states, played_actions,
                     rewards)
            for h in range(horizon):
                s, a = states[h], played_actions[h]
                if integer_rewards:  # the user reports Bernoulli(r): a count, on the grid
                    rewards[h] = 1.0 if uniforms[rep, i, 1 + 2 * horizon + h] < rewards[h] else 0.0
                j = 0 if hs == 1 else h
                clean_sas[j, s, a, states[h + 1]] += 1.0
                clean_sa[j, s, a] += 1.0
                clean_r[j, s, a] += rewards[h]
            if ldp:  # every entry of every released family is noised and summed
                noise_sas, noise_sa, noise_r = report_noise
                for j in range(hs):
                    for s in range(n_states):
                        for a in range(n_actions):
                            for t in range(n_states):
                                sas_sum[rep, j, s, a, t] += (clean_sas[j, s, a, t]
                                                             + noise_sas[i, rep, j, s, a, t])
                                clean_sas[j, s, a, t] = 0.0
                            if has_sa:
                                sa_sum[rep, j, s, a] += (clean_sa[j, s, a]
                                                         + noise_sa[i, rep, j, s, a])
                            r_sum[rep, j, s, a] += clean_r[j, s, a] + noise_r[i, rep, j, s, a]
                            clean_sa[j, s, a] = 0.0
                            clean_r[j, s, a] = 0.0
            else:  # only the visited cells change
                for h in range(horizon):
                    s, a, t = states[h], actions[rep, h, states[h]], states[h + 1]
                    j = 0 if hs == 1 else h
                    sas_sum[rep, j, s, a, t] += clean_sas[j, s, a, t]
                    clean_sas[j, s, a, t] = 0.0
                    if has_sa:
                        sa_sum[rep, j, s, a] += clean_sa[j, s, a]
                    else:  # N(s,a) the next plan reads
                        n = 0.0
                        for c in range(n_states):
                            n += sas_sum[rep, j, s, a, c]
                        board_sa[rep, j, s, a] = n
                    r_sum[rep, j, s, a] += clean_r[j, s, a]
                    clean_sa[j, s, a] = 0.0
                    clean_r[j, s, a] = 0.0
                    if kept:
                        stale[rep, j, s, a] = True


@numba.njit(types.void(WORLD, _arr(I8, 3), _arr(F8, 2), B1, _arr(I8, 2), _arr(I8, 2),
                       _arr(F8, 2)), cache=True, **OPTIONS)
def rollout(world: tuple, policies: np.ndarray, uniforms: np.ndarray, bernoulli: bool,
            states: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> None:
    """R users' episodes (`_episode`): user r plays policies[r] (or the one policy (1, H, S))
    with uniforms[r]; fills states (R, H+1), actions and rewards (R, H)."""
    for r in range(uniforms.shape[0]):
        _episode(world, policies[r if policies.shape[0] > 1 else 0], uniforms[r], bernoulli,
                 states[r], actions[r], rewards[r])


@numba.njit(types.void(_arr(F8, 4, True), _arr(F8, 3, True), _arr(F8, 1, True), _arr(I8, 3),
                       _arr(F8, 3), _arr(F8, 1)), cache=True, **OPTIONS)
def policy_values(transitions: np.ndarray, rewards: np.ndarray, d1: np.ndarray,
                  policies: np.ndarray, values: np.ndarray, returns: np.ndarray) -> None:
    """V^pi (n, H+1, S) into `values` and the expected returns d1 · V^pi_1 (n,) into `returns`
    of n deterministic policies (n, H, S), by backward induction from V_{H+1} = 0: the numbers
    every regret is computed from (the episode loop's trace included). Each policy on its own,
    so a value never depends on the batch it is computed in."""
    horizon = policies.shape[1]
    for i in range(policies.shape[0]):
        values[i, horizon] = 0.0
        _backward_values(transitions, rewards, policies[i], values[i], horizon - 1)
        returns[i] = _start_value(d1, values[i])


IMPORT_SECONDS = time.perf_counter() - _STARTED
