"""Joint DP (JDP): a trusted server sees raw reports and publishes only what its central
counters release, noised by the server (binary or smoothed trees, the matrix counter, on the
run's release schedule); the learner reads the billboard only."""

from __future__ import annotations

from collections.abc import Sequence

from privrl.privacy.calibration import Calibration
from privrl.privacy.continual import CounterPlan
from privrl.privacy.privatizers import Central, Identity, Privatizer
from privrl.trust import register
from privrl.trust.base import TrustBoundary


def _plan(calibration: Calibration, items: int) -> CounterPlan:
    """The run's counter plan (a calibration without one: its tree over `items`)."""
    return calibration.plan or CounterPlan("smoothed" if calibration.smooth else "tree",
                                           max(items, 1))


class CentralDP(TrustBoundary):
    """Users send raw reports to a trusted curator; central counters release noisy sums."""

    name = "jdp"
    label = "JDP"
    colour = "#1f77b4"
    summary = "trusted server noises what it publishes"
    counters = True

    def privatizer(self, calibration: Calibration, seeds: Sequence[int],
                   max_items: int) -> Privatizer:
        if calibration.mechanism is None:  # nothing to release: no tree
            return Identity(calibration, len(seeds))
        return Central(calibration, seeds, max_items)

    def counter_items(self, calibration: Calibration, episodes: int) -> int:
        """The schedule's releases so far: each is one item of the counters."""
        return calibration.schedule.releases(episodes) if episodes > 0 else 0

    def variance_factor(self, calibration: Calibration, items: int) -> float:
        return _plan(calibration, items).release_variance(items)

    def max_variance_factor(self, calibration: Calibration, items: int) -> float:
        return _plan(calibration, items).max_release_factor(items)


CENTRAL = register(CentralDP())
