"""A trust boundary with cohorts, written as a plug-in (`PRIVRL_PLUGINS=support.toy_cohort`):
LDP's users' side and aggregator, but the server counts users' reports three at a time, each
cohort's sum one item of the release (the shape secure aggregation takes: the server sees only
the cohort's sum). Nothing in privrl names it."""

from __future__ import annotations

from privrl.trust import register
from privrl.trust.local import LocalDP


class ToyCohort(LocalDP):
    """Users noise their reports; the server counts them by cohorts of three."""

    name = "toy-cohort"
    label = "toy cohorts"
    colour = "#17becf"
    summary = "a plug-in: reports counted by cohorts of three"
    cohort_size = 3


TOY = register(ToyCohort())
