"""Helpers of the policy-evaluation tests: a worked example, random data sets and their
adversarial neighbours, run configurations, and the exact hockey-stick divergence of
two isotropic Gaussians."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
from privrl.config import RunConfig
from privrl.worlds.chain import ChainMRP
from privrl.worlds.first_visit import FirstVisits
from scipy import stats

# Worked example: N = 3, Phi = I, gamma = 0.9, F_max = 10 (R_max = 1), eps = 1, delta = 0.1, m = 2.
GOLDEN_KNOBS = {"gamma": 0.9, "f_max": 10.0}


def first_visit_returns(
    states: Sequence[int], rewards: Sequence[float], gamma: float, n_states: int
) -> FirstVisits:
    """One trajectory's first-visit returns, the generic way: a backward pass
    G_t = r_t + gamma G_{t+1}, then G_t at each state's first occurrence (Balle et al. 2016)."""
    s = np.asarray(states, dtype=np.int64)
    r = np.asarray(rewards, dtype=np.float64)
    g = np.empty_like(r)
    acc = 0.0
    for t in range(r.size - 1, -1, -1):
        acc = r[t] + gamma * acc
        g[t] = acc
    visited = np.zeros((1, n_states), dtype=bool)
    returns = np.zeros((1, n_states))
    first = np.unique(s, return_index=True)[1]
    visited[0, s[first]] = True
    returns[0, s[first]] = g[first]
    return FirstVisits(visited, returns)


def visit_probabilities(chain: ChainMRP) -> np.ndarray:
    """p_s = P(a trajectory of `chain` visits s): every state from its start to the end."""
    p = np.cumsum(chain.start_distribution())
    p[chain.goal] = 1.0 if chain.reward == "goal" else 0.0
    return p


def golden_data() -> FirstVisits:
    """x1 = states [0,1,0,2], rewards [0,1,0,1]; x2 = states [1,1], rewards [0.5,0.5]."""
    x1 = first_visit_returns([0, 1, 0, 2], [0, 1, 0, 1], 0.9, 3)
    x2 = first_visit_returns([1, 1], [0.5, 0.5], 0.9, 3)
    return FirstVisits.stack([x1, x2])


def sums(data: FirstVisits) -> tuple[np.ndarray, np.ndarray]:
    """(n, g) of a data set."""
    return data.visited.sum(axis=0).astype(float), data.returns.sum(axis=0)


def pe_config(algo: str, privacy: str, m: int, n_states: int, epsilon: float = 0.1,
              delta: float = 0.1, noise: str = "numpy", **knobs: object) -> RunConfig:
    """A policy-evaluation run: one action, a stationary (H = 1) policy table, m trajectories."""
    return RunConfig(algo=algo, n_states=n_states, n_actions=1, horizon=1, episodes=m,
                     privacy=privacy, epsilon=epsilon,
                     delta=delta if privacy != "none" else 0.0, mechanism="gaussian",
                     noise=noise, knobs=knobs or None)


def random_data(rng: np.random.Generator, m: int, n_states: int, f_max: float,
                p_visit: float = 0.5) -> FirstVisits:
    """m users, each visiting a random subset of states with returns uniform in [0, F_max]."""
    visited = rng.random((m, n_states)) < p_visit
    returns = np.where(visited, rng.random((m, n_states)) * f_max, 0.0)
    return FirstVisits(visited, returns)


def neighbours(data: FirstVisits, f_max: float) -> Iterator[tuple[str, FirstVisits, FirstVisits]]:
    """(name, X, X'): the adversarial replacements of the last trajectory."""
    vis, ret = data.visited.copy(), data.returns.copy()
    last = vis[-1]

    def swap(new_vis: np.ndarray, new_ret: np.ndarray, x_ret: np.ndarray | None = None
             ) -> tuple[FirstVisits, FirstVisits]:
        r0 = ret.copy()
        if x_ret is not None:
            r0[-1] = x_ret
        v1, r1 = vis.copy(), r0.copy()
        v1[-1], r1[-1] = new_vis, new_ret
        return FirstVisits(vis.copy(), r0), FirstVisits(v1, r1)

    n_states = vis.shape[1]
    yield ("complement, F_max", *swap(~last, np.where(~last, f_max, 0.0)))
    yield ("all states F_max vs returns 0",
           *swap(np.ones(n_states, bool), np.full(n_states, f_max), np.zeros(n_states)))
    rare = int(np.argmin(vis.sum(axis=0)))
    only = np.zeros(n_states, bool)
    only[rare] = True
    yield ("least visited only, F_max", *swap(only, np.where(only, f_max, 0.0)))
    yield ("least visited only, 0", *swap(only, np.zeros(n_states)))
    yield ("empty trajectory", *swap(np.zeros(n_states, bool), np.zeros(n_states)))


def hockey_stick(eps: float, mu_p: np.ndarray, sigma_p: float, mu_q: np.ndarray,
                 sigma_q: float, grid: int = 40_001) -> float:
    """E_{Z~P}[(1 - e^{eps - L(Z)})_+] for P = N(mu_p, sigma_p^2 I_d), Q = N(mu_q, sigma_q^2 I_d),
    L = ln dP/dQ: exact in the chi-square coordinate, a fine quadrature in the normal one.

    With Z = mu_p + sigma_p (a u + xi), u the unit vector along mu_p - mu_q, a ~ N(0,1) and
    c = |xi|^2 ~ chi2_{d-1}: L = A(a) + B c, B = (s - 1)/2, s = sigma_p^2 / sigma_q^2, so for each
    a the expectation over c is a chi-square CDF and a tilted chi-square CDF (closed form).
    """
    d = mu_p.size
    dist = float(np.linalg.norm(mu_p - mu_q))
    ratio = sigma_p**2 / sigma_q**2
    b = (ratio - 1.0) / 2.0
    a = np.linspace(-14.0, 14.0, grid)
    big_a = (d * math.log(sigma_q / sigma_p) - a**2 / 2
             + (sigma_p * a + dist) ** 2 / (2 * sigma_q**2))
    k = d - 1
    if k == 0 or b == 0.0:
        inner = np.where(big_a > eps, 1.0 - np.exp(np.minimum(eps - big_a, 700.0)), 0.0)
    else:
        t = (eps - big_a) / b  # the positive part holds for c > t (b > 0) or c < t (b < 0)
        chi, tilted = stats.chi2(k), ratio ** (-k / 2)
        if b > 0:
            tc = np.maximum(t, 0.0)
            prob = chi.sf(tc)
            weight = tilted * chi.sf(ratio * tc)
        else:
            tc = np.maximum(t, 0.0)
            prob = chi.cdf(tc)
            weight = tilted * chi.cdf(ratio * tc)
        inner = prob - np.exp(np.minimum(eps - big_a, 700.0)) * weight
        inner = np.maximum(inner, 0.0)
    density = np.exp(-a**2 / 2) / math.sqrt(2 * math.pi)
    return float(np.trapezoid(inner * density, a))


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided (1 - alpha) upper confidence bound of a binomial proportion."""
    return 1.0 if k >= n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
