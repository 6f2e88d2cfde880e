"""No privacy: the server sums raw reports exactly and publishes the sums (the baseline)."""

from __future__ import annotations

from collections.abc import Sequence

from privrl.privacy.calibration import Calibration
from privrl.privacy.privatizers import Identity, Privatizer
from privrl.trust import register
from privrl.trust.base import TrustBoundary


class NoPrivacy(TrustBoundary):
    """Users send raw reports; the billboard holds the exact sums; nothing is spent."""

    name = "none"
    label = "non-private"
    colour = "#2ca02c"
    summary = "non-private"
    private = False

    def privatizer(self, calibration: Calibration, seeds: Sequence[int],
                   max_items: int) -> Privatizer:
        return Identity(calibration, len(seeds))


NONE = register(NoPrivacy())
