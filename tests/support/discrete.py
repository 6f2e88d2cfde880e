"""A goodness-of-fit test for integer draws against an unnormalised pmf on the integers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats


def pmf_pvalue(draws: np.ndarray, weight: Callable[[np.ndarray], np.ndarray],
               min_expected: float = 20.0) -> float:
    """Chi-square p-value of integer `draws` against the pmf proportional to `weight(k)`, with
    every value whose expected count is below `min_expected` pooled into the two tails."""
    draws = np.asarray(draws)
    assert np.issubdtype(draws.dtype, np.integer), "the draws must be integers"
    lo, hi = int(draws.min()), int(draws.max())
    span = max(abs(lo), abs(hi)) * 4 + 64
    k = np.arange(-span, span + 1)
    p = weight(k.astype(np.float64))
    p = p / p.sum()
    expected = p * draws.size
    keep = expected >= min_expected
    inner = k[keep]
    observed = [np.sum(draws < inner[0])]
    want = [expected[k < inner[0]].sum()]
    counts = np.bincount(draws[(draws >= inner[0]) & (draws <= inner[-1])] - inner[0],
                         minlength=inner.size)
    observed += list(counts)
    want += list(expected[keep])
    observed.append(np.sum(draws > inner[-1]))
    want.append(expected[k > inner[-1]].sum())
    observed, want = np.asarray(observed, float), np.asarray(want, float)
    use = want > 0
    return float(stats.chisquare(observed[use], want[use] * observed[use].sum() / want[use].sum()
                                 ).pvalue)
