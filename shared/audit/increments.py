"""Is a billboard as noisy as declared? A one-sided test on the increments between two polls.

The billboard only shows the current release, so an auditor polls it over time. Between a poll
after t1 reports and one after t2 > t1 reports every released entry moves by

    B(t2) - B(t1) = (data of reports t1+1..t2) + (noise(t2) - noise(t1)).

The noise part is a fixed linear combination of independent draws (JDP: the tree's nodes,
improved by Honaker's upward pass when the tree is smoothed, or the matrix counter's encoder
noise through its decoder, `matrix_increment_coefficients`; LDP: the new users' local noise),
so its variance v and fourth moment are known from the public calibration alone. Entries are
independent. The noise is symmetric and unimodal, so adding data that does not depend on it
only makes |increment| stochastically larger: the sum S of squared increments over v is then
at least as large as for pure noise, whose mean is the number of entries m. Maurer's inequality
for independent non-negative variables, P(S <= m - s) <= exp(-s^2 / (2 sum E[Z^2])), gives the
threshold for a stated false-alarm rate. A billboard whose noise is smaller than declared (or
absent) falls below it.

Caveat (stated in the report): later users' data depends on earlier noise through the policy,
so "data independent of the noise" holds only approximately; the exact statement holds for
fresh nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from privrl.privacy.calibration import Calibration
from privrl.privacy.continual import CounterPlan
from privrl.privacy.matrix_counter import matrix_increment_coefficients
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.tree import levels_released, smoothed_variance

Node = tuple[int, int]  # (level, index) of a tree node; (0, k) is user k's noise in LDP
KURTOSIS = {"laplace": 6.0, "gaussian": 3.0}  # E[X^4] / Var(X)^2 of one noise draw


def _improved(level: int, index: int, smooth: bool) -> dict[Node, float]:
    """The raw-node coefficients of tree node (level, index) as the release uses it."""
    if not smooth or level == 0:
        return {(level, index): 1.0}
    w = smoothed_variance(level)  # the node's own weight in the upward pass
    out = {(level, index): w}
    for child in (2 * index - 1, 2 * index):
        for node, c in _improved(level - 1, child, smooth).items():
            out[node] = out.get(node, 0.0) + (1.0 - w) * c
    return out


def release_coefficients(t: int, central: bool, smooth: bool) -> dict[Node, float]:
    """The noise of the release after t items as a combination of independent draws.

    Through central tree counters (`TrustBoundary.counters`, JDP): the tree nodes of t's binary
    representation (improved when smoothed). Otherwise the sum of the t users' local noise.
    """
    if not central:
        return {(0, k): 1.0 for k in range(1, t + 1)}
    out: dict[Node, float] = {}
    for level in range(levels_released(t)):
        if (t >> level) & 1:
            for node, c in _improved(level, t >> level, smooth).items():
                out[node] = out.get(node, 0.0) + c
    return out


def single_draw(calibration: Calibration, reported: int) -> bool:
    """Whether each entry of the billboard after `reported` reports holds exactly one noise
    draw: LDP, one user's noise; JDP, a tree whose items so far (releases, under a sparse
    schedule) are one raw node; never the matrix counter, whose releases decode many draws."""
    items = calibration.counter_items(reported)
    plan = calibration.plan
    central = calibration.boundary.counters
    if items == 0 or (central and plan is not None and plan.kind == "matrix"):
        return False
    coeffs = release_coefficients(items, central, calibration.smooth)
    return list(coeffs.values()) == [1.0]


def increment_coefficients(t1: int, t2: int, central: bool, smooth: bool,
                           plan: CounterPlan | None = None) -> np.ndarray:
    """Coefficients of noise(t2) - noise(t1) over the independent draws involved, in units of
    one draw of the reference mechanism (a JDP matrix counter `plan`: its encoder noise z_s,
    `plan.unit` such units each, through the counter's decoder)."""
    if central and plan is not None and plan.kind == "matrix":
        return plan.unit * matrix_increment_coefficients(t1, t2, plan.releases, plan.bands)
    a = release_coefficients(t2, central, smooth)
    b = release_coefficients(t1, central, smooth)
    return np.asarray([a.get(n, 0.0) - b.get(n, 0.0) for n in a.keys() | b.keys()])


def moments(coeffs: np.ndarray, kurtosis: float) -> tuple[float, float]:
    """(E[e^2], E[e^4]) of e = sum_j c_j X_j, X_j iid, variance 1 and the given kurtosis."""
    c2, c4 = float(np.sum(coeffs**2)), float(np.sum(coeffs**4))
    return c2, kurtosis * c4 + 3.0 * (c2 * c2 - c4)


def maurer_slack(m: int, ratio: float, alpha: float) -> float:
    """How far below its mean m a sum S of m independent non-negative terms Z (each of mean 1,
    E[Z^2] = `ratio`) falls with probability at most `alpha` (Maurer's inequality)."""
    return math.sqrt(2.0 * m * ratio * math.log(1.0 / alpha))


def maurer_p_value(total: np.ndarray, m: int, ratio: float) -> np.ndarray:
    """Maurer's bound on P(S <= total) for the sum of `maurer_slack` (elementwise; 1 at or
    above the mean m)."""
    short = np.maximum(m - np.asarray(total, float), 0.0)
    return np.exp(-short**2 / (2.0 * m * ratio))


@dataclass(frozen=True)
class IncrementTest:
    """The variance test on one pair of polls (all released families pooled, each scaled to the
    reference mechanism's noise)."""

    t1: int
    t2: int
    entries: int
    declared_std: float  # of each entry's noise increment
    observed_std: float  # root mean square of the increments
    threshold_std: float  # the test flags an observed std below this
    alpha: float  # false-alarm rate of this test
    decisive: bool  # False when there are too few entries to reach the stated rate

    @property
    def flagged(self) -> bool:
        """Whether the increments show less noise than declared (at this false-alarm rate)."""
        return self.decisive and self.observed_std < self.threshold_std

    @property
    def ratio(self) -> float:
        """Observed over declared noise std (about 1 or more when honest)."""
        return self.observed_std / self.declared_std if self.declared_std else math.inf


def increment_test(
    calibration: Calibration,
    t1: int,
    before: Sequence[np.ndarray],
    t2: int,
    after: Sequence[np.ndarray],
    alpha: float,
) -> IncrementTest:
    """Test that the released families moved by at least the declared noise from t1 to t2.

    `before` / `after` hold the released families' arrays (calibration order) at the two polls.
    Each family's increments are scaled by the reference std over its own (families may be
    calibrated apart), and a symmetric family counts its upper triangle only (mirrored noise).
    """
    if not t2 > t1 >= 0:
        raise ValueError(f"need t2 > t1 >= 0, got {t1}, {t2}")
    if calibration.mechanism is None:
        raise ValueError("a non-private run declares no noise")
    sigma = calibration.mechanism.std()
    kind = "gaussian" if isinstance(calibration.mechanism, Gaussian) else "laplace"
    coeffs = increment_coefficients(t1, t2, calibration.boundary.counters, calibration.smooth,
                                    calibration.plan)
    second, fourth = moments(coeffs, KURTOSIS[kind])
    var = sigma**2 * second
    # each family in units of its own noise scale (families may differ), a symmetric family's
    # mirrored entries once (its noise is i.i.d. on the upper triangle only)
    parts = []
    for fam, b1, b2 in zip(calibration.families, before, after, strict=True):
        inc = np.asarray(b2, float) - np.asarray(b1, float)
        if fam.symmetric:
            inc = inc[..., *np.triu_indices(inc.shape[-1])]
        parts.append(inc.ravel() * (sigma / calibration.mechanism_of(fam.name).std()))
    inc = np.concatenate(parts)  # in the reference mechanism's scale
    m = inc.size
    z = float(np.sum(inc**2)) / var  # mean m under pure declared noise
    slack = maurer_slack(m, fourth / second**2, alpha)
    floor = m - slack
    return IncrementTest(
        t1=t1,
        t2=t2,
        entries=m,
        declared_std=math.sqrt(var),
        observed_std=math.sqrt(var * z / m),
        threshold_std=math.sqrt(var * max(floor, 0.0) / m),
        alpha=alpha,
        decisive=floor > 0.0,
    )
