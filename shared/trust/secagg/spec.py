"""A secure-aggregation run's public assumptions: how many of a cohort may drop out, how many
may collude with the server, and the ring the masked vectors live in.

A cohort of B users releases only if at least ceil(B (1 - dropout)) masked inputs arrived; up
to ceil(B collusion) of them may be the server's accomplices, who know (and could subtract)
their own noise shares. The noise is calibrated for the worst case left: `honest_shares` =
ceil(B (1 - dropout)) - ceil(B collusion) honest shares, each of variance sigma^2 /
honest_shares, so that any released cohort sum carries at least the central sigma^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_COHORT = 100
# the default cohort size: K / 50 cohorts, within [100, 1000] (measured on RiverSwim at K =
# 50,000: pooled DP-UCBVI at eps = 1 ends at 31% of a uniform policy's regret with B = 100 and
# at 0.6% with B = 1000; docs/explanation/secure-aggregation.md)
COHORTS_PER_RUN = 50
MAX_DEFAULT_COHORT = 1000


def default_cohort(episodes: int) -> int:
    """The cohort size a run of `episodes` episodes takes when it names none."""
    size = min(max(episodes // COHORTS_PER_RUN, DEFAULT_COHORT), MAX_DEFAULT_COHORT)
    return max(min(size, episodes), 2)
DEFAULT_DROPOUT = 0.1
DEFAULT_COLLUSION = 0.1
DEFAULT_BITS = 32  # masked vectors live mod 2^32 (Flower's default modulus range)
# the users' noise shares: Skellam (a sum of Skellams is Skellam: one mechanism's cost) or the
# distributed discrete Gaussian (a correction growing with the released coordinates); Skellam
# by measurement (docs/explanation/secure-aggregation.md, "Skellam or discrete Gaussian")
SHARE_NOISES = ("skellam", "ddg")
DEFAULT_SHARE_NOISE = "skellam"


@dataclass(frozen=True)
class CohortSpec:
    """Cohorts of `size` users (the schedule's batch), up to a `dropout` fraction of them
    dropping and a `collusion` fraction colluding with the server; vectors mod 2^`bits`; the
    users' `noise` shares ('skellam' or 'ddg'); the run's `delta`."""

    size: int = DEFAULT_COHORT
    dropout: float = DEFAULT_DROPOUT
    collusion: float = DEFAULT_COLLUSION
    bits: int = DEFAULT_BITS
    noise: str = DEFAULT_SHARE_NOISE  # one of SHARE_NOISES
    # the run's delta: where a Skellam release's Renyi curve is converted to (epsilon, delta)
    delta: float = 0.0

    def __post_init__(self) -> None:
        if self.noise not in SHARE_NOISES:
            raise ValueError(f"secure aggregation's noise shares are one of {SHARE_NOISES},"
                             f" not {self.noise!r}")
        if self.size < 2:
            raise ValueError("a secure-aggregation cohort needs at least 2 users")
        if not (0.0 <= self.dropout < 1.0 and 0.0 <= self.collusion < 1.0):
            raise ValueError("dropout and collusion are fractions in [0, 1)")
        if not 8 <= self.bits <= 64:
            raise ValueError("the masking ring is 2^bits with 8 <= bits <= 64")
        if self.honest_shares < 1:
            raise ValueError(
                f"cohorts of {self.size} users with dropout {self.dropout} and collusion"
                f" {self.collusion} leave no honest noise share: use larger cohorts")

    @property
    def min_survivors(self) -> int:
        """Masked inputs a cohort needs to release: ceil(B (1 - dropout))."""
        return math.ceil(self.size * (1.0 - self.dropout) - 1e-9)

    @property
    def colluders(self) -> int:
        """Users the run allows to collude with the server: ceil(B collusion)."""
        return math.ceil(self.size * self.collusion - 1e-9)

    @property
    def honest_shares(self) -> int:
        """The fewest honest noise shares in a released cohort sum: n_min."""
        return self.min_survivors - self.colluders

    @property
    def degree(self) -> int:
        """Neighbours per user in the SecAgg+ graph: 2 ceil(log2 B), at most B - 1."""
        return min(self.size - 1, max(2, 2 * math.ceil(math.log2(self.size))))

    def variance_factor(self) -> float:
        """A released cohort sum's noise variance in units of sigma^2, at most: B / n_min
        (every user's share in)."""
        return self.size / self.honest_shares

    def describe(self) -> str:
        """One line for the run's banner and ledger."""
        return (f"cohorts of {self.size}, dropout <= {self.dropout:g}, collusion <="
                f" {self.collusion:g} ({self.colluders} user{'s' if self.colluders != 1 else ''}):"
                f" >= {self.min_survivors}"
                f" inputs to release, >= {self.honest_shares} honest {self.noise} noise"
                f" shares, mod 2^{self.bits}")
