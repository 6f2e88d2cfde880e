"""Compiled in-process episodes of DP-UCBVI: plan, roll out, count, repeat, in one kernel call.

The kernel runs episodes k0..k1 of every replica exactly as `privrl.run.run_in_process` does
(plan from the release after k reports, greedy with the seeded tie-break stream, the user's
rollout from its seeded stream, the count increments), with everything random drawn from the
same streams: uniforms from the compiled PCG64 (`streams`), noise drawn beforehand with numpy
(`ldp_noise`: each user's report noise, `jdp_noise`: the tree's noise in each release). Each
episode's exact regret is the evaluator's number (`privrl.accel.evaluation`), computed for
every changed policy: on RiverSwim that costs less than checking whether a changed policy acts
as the last evaluated one wherever that one reaches (and so has its regret), which was dropped.
"""

from __future__ import annotations

import numba
import numpy as np

from .arrays import START, copy_rows
from .evaluation import policy_regret
from .planning import pairwise_sum, plan_replicas
from .streams import fill_uniform, pcg64_seed, seed_words


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _uniforms(entropy: np.ndarray, key: np.uint32, episode: int, out: np.ndarray,
              spawn: np.ndarray, words: np.ndarray, state: np.ndarray) -> None:
    """generator(seed, <key>, episode).random(out.shape) into `out` (episode < 2^32); spawn (2),
    words (8, uint32) and state (4, uint64) are the caller's scratch: twice per episode."""
    spawn[0] = key
    spawn[1] = np.uint32(episode)
    seed_words(entropy, spawn, words)
    pcg64_seed(words, state)
    fill_uniform(state, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _draw(cdf: np.ndarray, start: int, size: int, u: float) -> int:
    """Inverse CDF of cdf[start:start+size]: #{cdf <= u}, clipped to the last index (as
    `rollout`). Indexes a flat array: a view per step costs reference counting."""
    n = 0
    for i in range(start, start + size):
        if cdf[i] <= u:
            n += 1
    return min(n, size - 1)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def run_episodes(k0: int, k1: int, entropy: np.ndarray, entropy_len: np.ndarray,
                 user_key: np.uint32, tie_key: np.uint32, given_u: np.ndarray,
                 ldp_sas: np.ndarray, ldp_sa: np.ndarray, ldp_r: np.ndarray,
                 jdp_sas: np.ndarray, jdp_sa: np.ndarray, jdp_r: np.ndarray,
                 acc_sas: np.ndarray, acc_sa: np.ndarray, acc_r: np.ndarray, has_sa: bool,
                 cum_d1: np.ndarray, cum_p: np.ndarray, r_mean: np.ndarray, bernoulli: bool,
                 d1: np.ndarray, p_true: np.ndarray, optimal: float,
                 radius: np.ndarray, threshold: np.ndarray, consts: np.ndarray,
                 private: bool, caps: np.ndarray, q: np.ndarray, clip_previous: bool,
                 variance_terms: bool, last: np.ndarray, has_last: bool,
                 regret_now: np.ndarray, changes: np.ndarray, regret_out: np.ndarray) -> int:
    """Episodes k0..k1-1 of R replicas; returns how many new policy versions they made.

    given_u (B, R, 2H+1) are the users' uniforms when drawn outside (LDP), else empty; ldp_*
    (B, R, ...) is each user's report noise (LDP), jdp_* (B, R, ...) the noise in the release
    after k reports (JDP); empty arrays when the mode has none. acc_* hold the exact sums (none,
    JDP) or the sums of noisy reports (LDP) and are updated in place, as are q and `last`.
    regret_out (R, B) gets each episode's exact regret (`optimal` - d1 . V^pi_1 in the true
    world); regret_now (R,) is the regret of each replica's current policy and changes (R,)
    counts the policies each replica played. Both are updated in place.
    """
    n_rep, horizon, n_states, n_actions = q.shape
    hs = acc_sas.shape[1]
    ldp, jdp = ldp_sas.shape[0] > 0, jdp_sas.shape[0] > 0
    rel_sas = np.empty_like(acc_sas)
    rel_sa = np.empty((n_rep, hs, n_states, n_actions))
    rel_r = np.empty_like(acc_r)
    q_new = np.empty_like(q)
    actions = np.empty((n_rep, horizon, n_states), np.int64)
    tied = np.empty(n_rep, np.bool_)
    keys = np.empty(horizon * n_states * n_actions)  # 1-D, as `u`: one _uniforms
    u = np.empty(2 * horizon + 1)
    clean_sas = np.zeros(acc_sas.shape[1:])
    clean_sa = np.zeros(acc_r.shape[1:])
    clean_r = np.zeros(acc_r.shape[1:])
    states = np.empty(horizon + 1, np.int64)
    q_flat, q_new_flat, cum_p_flat = q.reshape(-1), q_new.reshape(-1), cum_p.reshape(-1)
    eval_scratch = np.empty(3 * n_states)
    spawn = np.empty(2, np.uint32)
    words = np.empty(8, np.uint32)
    pcg = np.empty(4, np.uint64)
    # non-private: the model (P~, N~, r~) changes only at the visited cells, so it is kept
    kept = not (private or ldp or jdp) and (threshold <= 0.0).all()
    kept_shape = (n_rep if kept else 0, hs, n_states, n_actions)
    model_p = np.empty((*kept_shape, n_states))
    model_n = np.empty(kept_shape)
    model_r = np.empty(kept_shape)
    model_bonus = np.empty((*kept_shape, 2))
    model_g = np.empty(kept_shape[:3])
    stale = np.ones(kept_shape, np.bool_)
    versions = 0
    for k in range(k0, k1):
        i = k - k0
        # the billboard after k reports: the sums themselves unless JDP noise is added
        if jdp:
            for rep in range(n_rep):
                for j in range(hs):
                    for s in range(n_states):
                        for a in range(n_actions):
                            for t in range(n_states):
                                rel_sas[rep, j, s, a, t] = (acc_sas[rep, j, s, a, t]
                                                            + jdp_sas[i, rep, j, s, a, t])
                            rel_r[rep, j, s, a] = acc_r[rep, j, s, a] + jdp_r[i, rep, j, s, a]
                            if has_sa:
                                rel_sa[rep, j, s, a] = (acc_sa[rep, j, s, a]
                                                        + jdp_sa[i, rep, j, s, a])
        board_sas = rel_sas if jdp else acc_sas
        board_r = rel_r if jdp else acc_r
        if not has_sa and (jdp or ldp or k == k0):  # else only the visited cells changed
            for rep in range(n_rep):
                for j in range(hs):
                    for s in range(n_states):
                        for a in range(n_actions):
                            rel_sa[rep, j, s, a] = pairwise_sum(board_sas[rep, j, s, a], START,
                                                               n_states)
        board_sa = acc_sa if has_sa and not jdp else rel_sa
        if kept and i > 0:  # the kept bonuses read the radius and the constants
            renew = radius[i] != radius[i - 1]
            for c in range(consts.shape[1]):
                renew = renew or consts[i, c] != consts[i - 1, c]
            if renew:
                every = stale.reshape(-1)
                for c in range(every.shape[0]):
                    every[c] = True
        plan_replicas(board_sas, board_sa, board_r, radius[i], private, threshold[i], consts[i],
                      caps, q, clip_previous, radius[i] > 0, variance_terms, q_new, actions,
                      tied, model_p, model_n, model_r, model_bonus, model_g, stale)
        for c in range(q_flat.shape[0]):
            q_flat[c] = q_new_flat[c]
        changed_any = not has_last
        for rep in range(n_rep):
            ent = entropy[rep, : entropy_len[rep]]
            if tied[rep]:  # as DPUCBVI._break_ties
                _uniforms(ent, tie_key, k, keys, spawn, words, pcg)
                for h in range(horizon):
                    for s in range(n_states):
                        best = -np.inf
                        for a in range(n_actions):
                            best = max(best, q[rep, h, s, a])
                        top, arg = -np.inf, 0
                        for a in range(n_actions):
                            drawn = keys[(h * n_states + s) * n_actions + a]
                            key = 1.0 + drawn if q[rep, h, s, a] >= best - 1e-9 else -1.0
                            if key > top:
                                top, arg = key, a
                        actions[rep, h, s] = arg
            changed = not has_last
            if has_last:
                for h in range(horizon):
                    for s in range(n_states):
                        if actions[rep, h, s] != last[rep, h, s]:
                            changed = True
            if changed:
                changed_any = True
                changes[rep] += 1
                regret_now[rep] = policy_regret(p_true, r_mean, d1, optimal, actions[rep],
                                                eval_scratch)
                copy_rows(actions[rep], last[rep])
            regret_out[rep, i] = regret_now[rep]
            # the user's episode: rollout from its stream, then its counts (and LDP noise)
            if ldp:
                for j in range(u.shape[0]):
                    u[j] = given_u[i, rep, j]
            else:
                _uniforms(ent, user_key, k, u, spawn, words, pcg)
            states[0] = _draw(cum_d1, START, n_states, u[0])
            for h in range(horizon):
                s = states[h]
                a = actions[rep, h, s]
                states[h + 1] = _draw(cum_p_flat, ((h * n_states + s) * n_actions + a) * n_states,
                                      n_states, u[1 + h])
                mean = r_mean[h, s, a]
                reward = (1.0 if u[1 + horizon + h] < mean else 0.0) if bernoulli else mean
                j = 0 if hs == 1 else h
                clean_sas[j, s, a, states[h + 1]] += 1.0
                clean_sa[j, s, a] += 1.0
                clean_r[j, s, a] += reward
            if ldp:  # every entry of every released family is noised and summed
                for j in range(hs):
                    for s in range(n_states):
                        for a in range(n_actions):
                            for t in range(n_states):
                                acc_sas[rep, j, s, a, t] += (clean_sas[j, s, a, t]
                                                             + ldp_sas[i, rep, j, s, a, t])
                                clean_sas[j, s, a, t] = 0.0
                            if has_sa:
                                acc_sa[rep, j, s, a] += clean_sa[j, s, a] + ldp_sa[i, rep, j, s, a]
                            acc_r[rep, j, s, a] += clean_r[j, s, a] + ldp_r[i, rep, j, s, a]
                            clean_sa[j, s, a] = 0.0
                            clean_r[j, s, a] = 0.0
            else:  # only the visited cells change
                for h in range(horizon):
                    s, a, t = states[h], actions[rep, h, states[h]], states[h + 1]
                    j = 0 if hs == 1 else h
                    acc_sas[rep, j, s, a, t] += clean_sas[j, s, a, t]
                    clean_sas[j, s, a, t] = 0.0
                    if not (has_sa or jdp) and n_states < 8:  # N(s,a) the next plan reads
                        n_sa = 0.0  # numpy's order below 8 terms, without a view and a call
                        for c in range(n_states):
                            n_sa += acc_sas[rep, j, s, a, c]
                        rel_sa[rep, j, s, a] = n_sa
                    elif not (has_sa or jdp):
                        rel_sa[rep, j, s, a] = pairwise_sum(acc_sas[rep, j, s, a], START,
                                                            n_states)
                    if has_sa:
                        acc_sa[rep, j, s, a] += clean_sa[j, s, a]
                    acc_r[rep, j, s, a] += clean_r[j, s, a]
                    clean_sa[j, s, a] = 0.0
                    clean_r[j, s, a] = 0.0
                    if kept:
                        stale[rep, j, s, a] = True
        if changed_any:
            versions += 1
        has_last = True
    return versions
