"""A trust boundary written as a third-party plug-in (`PRIVRL_PLUGINS=support.toy_boundary`, or
the entry-point group `privrl.trust`): local DP under its own name, label and colour. It
reuses `privrl.trust.local`'s users' side and aggregator, so everything privrl does for it
(calibration, CLI choices, plots, the dashboard, reports, the server) comes from the registry."""

from __future__ import annotations

from privrl.trust import register
from privrl.trust.local import LocalDP


class ToyLocal(LocalDP):
    """Users noise their reports, as in LDP; registered as a plug-in."""

    name = "toy-local"
    label = "toy LDP"
    colour = "#9467bd"
    summary = "a plug-in: users noise their reports"


TOY = register(ToyLocal())
