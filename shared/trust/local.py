"""Local DP (LDP): each user noises its statistics in its own process, from its own seed and
nonce; the untrusted server only sums noisy reports (`privrl.privacy.privatizers.Aggregator`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from privrl.privacy.calibration import Calibration
from privrl.privacy.privatizers import Aggregator, Privatizer, randomize_locally
from privrl.stats import Stats
from privrl.trust import register
from privrl.trust.base import TrustBoundary


class LocalDP(TrustBoundary):
    """Users send locally randomized arrays; the billboard is their sum."""

    name = "ldp"
    label = "LDP"
    colour = "#d62728"
    summary = "users noise their reports"
    local_noise = True

    def report_kind(self, raw_kind: str) -> str:
        return "noisy"

    def randomize(self, stats: Stats, calibration: Calibration,
                  noise: Sequence[np.random.Generator],
                  rounding: Sequence[np.random.Generator]) -> Stats | None:
        return randomize_locally(stats, calibration, noise, rounding)

    def privatizer(self, calibration: Calibration, seeds: Sequence[int],
                   max_items: int) -> Privatizer:
        return Aggregator(calibration, len(seeds))

    def acceptance_margin(self, calibration: Calibration, false_refusal: float,
                          family: str | None) -> float:
        """The mechanism's tail at `false_refusal / entries` per entry: an honest report has any
        entry beyond it with probability at most `false_refusal` (a union bound)."""
        if calibration.mechanism is None:
            return 0.0
        mech = (calibration.mechanism if family is None
                else calibration.mechanism_of(family))
        entries = calibration.report_entries()
        if not calibration.integer:
            return mech.max_abs_bound(entries, false_refusal)
        # a discrete Laplace tail is at most twice the continuous one; rounding moves a clean
        # value by less than one grid step
        step = 1.0 if family is None else calibration.family(family).grid
        return mech.max_abs_bound(2 * entries, false_refusal) + step


LOCAL = register(LocalDP())
