"""Cohorts of a run whose trust boundary exchanges its users' reports together
(`TrustBoundary.cohort_size` B > 1, `TrustBoundary.exchange`): built once per hosted run, the same
way for every boundary.

Claims are grouped in claim order: episode k belongs to cohort k // B. An accepted report of a
member is its input to the cohort's exchange, held (stored with its report, counted nowhere)
until the cohort completes: at a member's report that finds every other member reported or
lapsed, with at least the exchange's `threshold(B)` inputs, the cohort's one item,
`exchange.combine` of the inputs, is ingested by that report, in its transaction; below the
threshold the cohort is aborted and nothing of it is counted. A cohort settles only at a report,
and the report's stored Ack says whether it completed (its count jumps by the cohort), so a
replay completes the same cohorts at the same reports: a restart neither releases a partial
cohort nor counts one twice, and a cohort partial at the crash stays held until its remaining
members report. Size 1 (every boundary privrl ships) has no cohorts: a report is its own item.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from privrl.stats import Stats
from privrl.trust.base import CohortExchange


@dataclass
class Cohort:
    """One cohort: its members' inputs so far and the members that lapsed unreported."""

    index: int
    inputs: dict[int, Stats] = field(default_factory=dict)  # member episode -> its input
    lapsed: set[int] = field(default_factory=set)


class Cohorts:
    """The open cohorts of one run (B > 1), by index."""

    def __init__(self, size: int, exchange: CohortExchange) -> None:
        self.size = size
        self.exchange = exchange
        self.threshold = exchange.threshold(size)
        self.open: dict[int, Cohort] = {}

    @property
    def held(self) -> int:
        """Inputs held in cohorts not complete yet (episodes neither counted nor outstanding)."""
        return sum(len(c.inputs) for c in self.open.values())

    def _cohort(self, episode: int) -> Cohort:
        index = episode // self.size
        return self.open.setdefault(index, Cohort(index))

    def reported(self, episode: int, stats: Stats, lapsed: Callable[[int], bool]
                 ) -> list[Stats] | None:
        """Member `episode` sent its input; the cohort's inputs when this completes it (the
        caller ingests their combination), else None. `lapsed(e)`: whether member e's claim
        has lapsed unreported by now."""
        cohort = self._cohort(episode)
        cohort.inputs[episode] = stats
        return self._settle(cohort, lapsed)

    def replayed(self, episode: int, stats: Stats, completed: bool) -> list[Stats] | None:
        """During a replay: member `episode`'s stored input, and whether its stored Ack says
        it completed the cohort; the inputs to ingest then, else None (held)."""
        cohort = self._cohort(episode)
        cohort.inputs[episode] = stats
        if not completed:
            return None
        del self.open[cohort.index]
        return [cohort.inputs[e] for e in sorted(cohort.inputs)]

    def _settle(self, cohort: Cohort, lapsed: Callable[[int], bool]) -> list[Stats] | None:
        """Complete or abort `cohort` when every member has reported or lapsed."""
        first = cohort.index * self.size
        for member in range(first, first + self.size):
            if member not in cohort.inputs and member not in cohort.lapsed:
                if not lapsed(member):
                    return None  # still outstanding (or not claimed yet)
                cohort.lapsed.add(member)
        del self.open[cohort.index]
        if len(cohort.inputs) < self.threshold:
            return None  # aborted: too few survivors, nothing of it is counted
        return [cohort.inputs[e] for e in sorted(cohort.inputs)]
