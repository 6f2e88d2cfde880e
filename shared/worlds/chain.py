"""The chain Markov reward process of Balle, Gomrokchi & Precup 2016 §6.

States 0..N-1; state N-1 is the absorbing goal and belongs to S. From s < N-1 the (single-action)
policy stays with probability p, else moves to s+1; a trajectory ends when the goal is reached.
The paper leaves the details open; the defaults are ours (see the docs) and the
alternatives are flags:

* `reward="goal"` (reading (b), default): the step in the goal is recorded as the last triple
  with reward 1, so F_{x,s} = gamma^(T_s) where T_s is the time spent in states s..N-2, and
  V(s) = q^(N-1-s), q = (1-p) gamma / (1 - p gamma).
  `reward="entry"` (reading (a)): the reward 1 belongs to the transition into the goal, which
  never appears in a trajectory: F_{x,s} = gamma^(T_s - 1), V(s) = q^(N-1-s) / gamma, V(N-1) = 0.
* `start="uniform"` (default): s_1 uniform over the N-1 non-absorbing states, so
  P(x visits s) = (s+1)/(N-1); `start="first"`: always s_1 = 0 (every trajectory visits every
  non-absorbing state).

Dwell times in each state are Geometric(1-p) on {1, 2, ...}, drawn as floor(E / -ln p) + 1 with
E ~ Exp(1) (exact: P(floor(E/c) + 1 > k) = e^(-kc) = p^k). `first_visits` simulates one user per
generator (the users' path); `statistics` is the fast simulator: it draws only the
sufficient statistics (n, g) of m trajectories, in chunks, which reaches m = 10^7.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from .first_visit import FirstVisits

StartRule = Literal["uniform", "first"]
RewardTiming = Literal["goal", "entry"]
CHUNK = 1 << 18  # trajectories per chunk of the fast simulator (part of its random stream)
LUT_TAIL = 2.0**-64  # dwell times beyond the table (probability p^L below this) are exact anyway


@dataclass(frozen=True)
class ChainMRP:
    """The chain MRP: N states (goal N-1 included), stay probability p, discount gamma."""

    n_states: int = 40
    stay: float = 0.5
    gamma: float = 0.99
    start: StartRule = "uniform"
    reward: RewardTiming = "goal"

    def __post_init__(self) -> None:
        """Refuse parameters outside the model: N >= 2, 0 < p < 1, 0 < gamma < 1."""
        if isinstance(self.n_states, bool) or int(self.n_states) != self.n_states:
            raise ValueError(f"n_states must be a whole number, got {self.n_states!r}")
        if self.n_states < 2:
            raise ValueError(f"the chain needs at least 2 states, got {self.n_states}")
        if not 0.0 < self.stay < 1.0:
            raise ValueError(f"the stay probability p must lie in (0, 1), got {self.stay}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"the discount gamma must lie in (0, 1), got {self.gamma}")
        if self.start not in ("uniform", "first"):
            raise ValueError(f"start must be 'uniform' or 'first', got {self.start!r}")
        if self.reward not in ("goal", "entry"):
            raise ValueError(f"reward must be 'goal' or 'entry', got {self.reward!r}")

    # -- public model facts ------------------------------------------------------------------------

    @property
    def S(self) -> int:
        """Number of states N (the goal included)."""
        return int(self.n_states)

    @property
    def A(self) -> int:
        """One action: the evaluated policy is fixed, so this is a Markov reward process."""
        return 1

    @property
    def H(self) -> int:
        """Rows of the policy table a run serves: 1, the evaluated policy is stationary (a
        trajectory itself runs until the goal, however long that takes)."""
        return 1

    @property
    def goal(self) -> int:
        """The absorbing goal state N-1."""
        return self.S - 1

    @property
    def r_max(self) -> float:
        """Largest reward of a step (all rewards lie in [0, r_max])."""
        return 1.0

    @property
    def q(self) -> float:
        """Discounted probability of moving one state right: (1-p) gamma / (1 - p gamma)."""
        return (1.0 - self.stay) * self.gamma / (1.0 - self.stay * self.gamma)

    def start_distribution(self) -> np.ndarray:
        """The distribution of s_1 over the N states (never the goal)."""
        d = np.zeros(self.S)
        if self.start == "uniform":
            d[: self.goal] = 1.0 / self.goal
        else:
            d[0] = 1.0
        return d

    def values(self) -> np.ndarray:
        """Exact V(s) in closed form: q^(N-1-s) (reading b) or q^(N-1-s)/gamma, V(N-1) = 0 (a)."""
        v = self.q ** (self.goal - np.arange(self.S, dtype=np.float64))
        if self.reward == "entry":
            v = v / self.gamma
            v[self.goal] = 0.0
        return v

    # -- simulation -------------------------------------------------------------------------------

    @cached_property
    def _dwell_rate(self) -> float:
        """c = -ln p: a dwell time is floor(E / c) + 1 with E ~ Exp(1)."""
        return -math.log(self.stay)

    @cached_property
    def _discount_table(self) -> np.ndarray:
        """gamma^(k+1) for k = 0..L-1 with p^L < LUT_TAIL (longer dwells are computed exactly)."""
        size = max(2, math.ceil(math.log(LUT_TAIL) / math.log(self.stay)))
        table = self.gamma ** np.arange(1, size + 1, dtype=np.float64)
        table.setflags(write=False)
        return table

    def _discounted_dwell(self, exp_draws: np.ndarray) -> np.ndarray:
        """gamma^G for dwell times G = floor(E / c) + 1 drawn from Exp(1) variates E."""
        k = (exp_draws * (1.0 / self._dwell_rate)).astype(np.int64)
        table = self._discount_table
        out = table.take(k, mode="clip")
        beyond = k >= table.size
        if beyond.any():
            out[beyond] = self.gamma ** (k[beyond] + 1.0)
        return out

    def _starts(self, u: np.ndarray) -> np.ndarray:
        """s_1 by inverse CDF of the start distribution from uniforms u in [0, 1)."""
        cdf = np.cumsum(self.start_distribution()[: self.goal])
        cdf[-1] = 1.0
        return np.minimum(np.searchsorted(cdf, u, side="right"), self.goal - 1)

    def _dwells(self, rngs: Sequence[np.random.Generator]) -> tuple[np.ndarray, np.ndarray]:
        """Each user's start and dwell times (R, N-1): one uniform then N-1 Exp(1) draws per
        user, always in this order (the users' draw layout)."""
        starts = np.empty(len(rngs), dtype=np.int64)
        dwell = np.empty((len(rngs), self.goal), dtype=np.int64)
        for i, rng in enumerate(rngs):  # one user = one generator (R users, not a cell loop)
            starts[i] = self._starts(np.array([rng.random()]))[0]
            dwell[i] = (rng.standard_exponential(self.goal) / self._dwell_rate).astype(np.int64)
        return starts, dwell + 1

    def first_visits(self, rngs: Sequence[np.random.Generator]) -> FirstVisits:
        """One trajectory per user generator, as first-visit returns (R, N)."""
        starts, dwell = self._dwells(rngs)
        remaining = np.cumsum(dwell[:, ::-1], axis=1)[:, ::-1]  # T_s = sum_{j >= s} G_j
        visited = np.zeros((len(rngs), self.S), dtype=bool)
        visited[:, : self.goal] = np.arange(self.goal)[None, :] >= starts[:, None]
        returns = np.zeros((len(rngs), self.S))
        power = remaining if self.reward == "goal" else remaining - 1
        returns[:, : self.goal] = np.where(visited[:, : self.goal], self.gamma**power, 0.0)
        if self.reward == "goal":
            visited[:, self.goal] = True
            returns[:, self.goal] = 1.0
        return FirstVisits(visited, returns)

    def trajectories(
        self, rngs: Sequence[np.random.Generator]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The same users' trajectories step by step: (states s_1..s_T, rewards r_1..r_T)."""
        starts, dwell = self._dwells(rngs)
        out = []
        for start, g in zip(starts, dwell, strict=True):
            states = np.repeat(np.arange(start, self.goal), g[start:])
            if self.reward == "goal":
                states = np.append(states, self.goal)
            rewards = np.zeros(states.size)
            rewards[-1] = 1.0
            out.append((states, rewards))
        return out

    def statistics(
        self, m: int, rng: np.random.Generator, chunk: int = CHUNK
    ) -> tuple[np.ndarray, np.ndarray]:
        """The fast simulator: visit counts n (N,) and first-visit return sums g (N,) of m
        trajectories, drawn chunk by chunk without ever building a trajectory.

        Within a chunk the trajectories are ordered by start (their counts are multinomial), so
        the ones visiting s are a prefix; walking s from N-2 down to 0 multiplies each prefix
        trajectory's running gamma^(T_s) by gamma^(G_s) and adds the prefix sum to g_s. Work and
        memory: O(sum of visited states) draws and O(chunk) floats.
        """
        if isinstance(m, bool) or int(m) != m or m < 0:
            raise ValueError(f"m must be a whole number >= 0, got {m!r}")
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        n = np.zeros(self.S, dtype=np.int64)
        g = np.zeros(self.S)
        probs = self.start_distribution()[: self.goal]
        buf = np.empty(min(int(m), chunk))
        done = 0
        while done < m:
            size = min(chunk, int(m) - done)
            prefix = np.cumsum(rng.multinomial(size, probs))
            n[: self.goal] += prefix
            running = buf[:size]
            running.fill(1.0)
            for s in range(self.goal - 1, -1, -1):
                k = int(prefix[s])
                if k == 0:
                    break  # no trajectory starts at or below s
                head = running[:k]
                head *= self._discounted_dwell(rng.standard_exponential(k))
                g[s] += head.sum()
            done += size
        if self.reward == "goal":
            n[self.goal] = m
            g[self.goal] = float(m)
        else:
            g[: self.goal] /= self.gamma
        return n, g

    def __repr__(self) -> str:
        """Short description with the flags."""
        return (
            f"ChainMRP(N={self.S}, p={self.stay:g}, gamma={self.gamma:g}, start={self.start},"
            f" reward={self.reward})"
        )
