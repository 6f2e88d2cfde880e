"""Did a run learn? The one rule the CLI (`privrl demo`, `privrl compare`) and the dashboard
(the server's regret view) both apply, its intervals over seeds, and a stated two-sample test.

The rule: the last 10% of the reported episodes (`verdict_tail`), their mean exact regret as a
percentage of the uniformly random policy's (0% = optimal, 100% = no better than random), cut
into `WINDOWS` consecutive windows; 'yes' (learned) when every window is at or below `LEARNED`%,
'no' when every window is at or above `NOT_LEARNED`%, 'partly' when every window is between, and
'unsteady' when the windows disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from privrl.protocol import Verdict

TAIL_SHARE = 10  # the verdict reads the last K // TAIL_SHARE episodes (10%)
WINDOWS = 5  # ... cut into this many windows to show how steady it is
LEARNED, NOT_LEARNED = 25.0, 75.0  # % of random: at or below learned, at or above did not
LEVEL = 0.95  # confidence of the intervals over seeds
# Student t quantiles t_{0.975, df} for df = 1..30, to six decimals (tests check them against
# scipy.stats.t): the 95% intervals need no scipy. Beyond 30 degrees of freedom, or at another
# level, `interval` takes scipy's exact value.
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004,
        2.262157, 2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905,
        2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
        2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
RULE = (f"the last {100 // TAIL_SHARE}% of the episodes' mean regret as a % of a uniformly random"
        f" policy's: learned (yes) at or below {LEARNED:g}%, no at or above {NOT_LEARNED:g}%,"
        f" partly between, when all {WINDOWS} windows of those episodes agree, else unsteady")
TESTS = {
    "welch": "Welch's two-sample t-test (unequal variances), two-sided, on each seed's last-10%"
             " mean regret",
    "permutation": "a two-sample permutation test of the difference of means (exact when the"
                   " seeds allow, else 9,999 resamples), two-sided, on each seed's last-10% mean"
                   " regret",
}


def verdict_tail(episodes: int) -> int:
    """The episodes a run's verdict averages: its last 10% (at least one)."""
    return max(1, episodes // TAIL_SHARE)


def verdict(pct: float) -> str:
    """'yes' at or below 25% of random, 'no' at or above 75%, else 'partly'."""
    return "yes" if pct <= LEARNED else ("no" if pct >= NOT_LEARNED else "partly")


def window_percents(per_episode: np.ndarray, tail: int, random: float,
                    windows: int = WINDOWS) -> np.ndarray:
    """The last `tail` episodes of `per_episode` (regret, mean over seeds) cut into up to
    `windows` consecutive windows: each one's mean regret as a % of random."""
    per = np.asarray(per_episode, dtype=np.float64)
    last = per[per.size - tail:]
    parts = np.array_split(last, min(windows, last.size))
    return np.array([100 * p.mean() / random if random > 0 else math.nan for p in parts])


def steady(pcts: np.ndarray) -> str:
    """The windows' common verdict, or 'unsteady' when they disagree."""
    verdicts = {verdict(p) for p in pcts}
    return verdicts.pop() if len(verdicts) == 1 else "unsteady"


def judge(regret: Sequence[float] | np.ndarray, random: float) -> Verdict:
    """The verdict of one run's per-episode regret (every reported episode, in order)."""
    per = np.asarray(regret, dtype=np.float64)
    tail = verdict_tail(per.size)
    pcts = window_percents(per, tail, random)
    mean = float(per[per.size - tail:].mean()) if per.size else math.nan
    return Verdict(tail_episodes=tail, tail_regret_per_episode=round(mean, 6),
                   percent_of_random=round(100 * mean / random, 3) if random > 0 else None,
                   windows=[round(float(p), 3) for p in pcts], learned=steady(pcts), rule=RULE)


def interval(values: Sequence[float] | np.ndarray, level: float = LEVEL,
             floor: float = -math.inf) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of the mean of independent seeds' values
    (low = high = NaN with one seed), cut at `floor`, a bound the mean is known to respect (an
    exact regret is never below 0%), so that it never states an impossible value. At the 95%
    level and up to 31 seeds from the t table (no scipy: a bare install's `privrl demo` and
    compose print it), else from scipy's quantile."""
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    if level == LEVEL and x.size - 1 <= len(T975):
        t = T975[x.size - 2]
    else:
        from scipy import stats

        t = float(stats.t.ppf(0.5 + level / 2, x.size - 1))
    half = t * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, max(mean - half, floor), mean + half


def compare(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
            test: str = "welch", seed: int = 0) -> dict[str, float | str | int]:
    """Two samples of per-seed values (each seed's last-10% mean regret) under a stated test:
    the means, their difference (a - b), the statistic and the two-sided p-value."""
    from scipy import stats

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2 or y.size < 2:
        raise ValueError(f"a test needs at least 2 seeds on each side, got {x.size} and"
                         f" {y.size}: run more seeds (privrl demo --seeds N, privrl run"
                         " --seeds N)")
    if test == "welch":
        res = stats.ttest_ind(x, y, equal_var=False)
        statistic, p = float(res.statistic), float(res.pvalue)
    elif test == "permutation":
        import inspect

        draws = np.random.default_rng(seed)  # `rng` since SciPy 1.15, `random_state` before
        named = ("rng" if "rng" in inspect.signature(stats.permutation_test).parameters
                 else "random_state")
        res = stats.permutation_test(
            (x, y), lambda u, v, axis: np.mean(u, axis=axis) - np.mean(v, axis=axis),
            permutation_type="independent", alternative="two-sided", n_resamples=9_999,
            vectorized=True, **{named: draws})
        statistic, p = float(res.statistic), float(res.pvalue)
    else:
        raise ValueError(f"unknown test {test!r}: one of {', '.join(TESTS)}")
    return {"test": test, "test_detail": TESTS[test], "n_a": int(x.size), "n_b": int(y.size),
            "mean_a": float(x.mean()), "mean_b": float(y.mean()),
            "difference": float(x.mean() - y.mean()), "statistic": statistic, "p_value": p}
