"""The trust-boundary contract (`privrl.trust`): what a boundary declares and owns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from privrl.algorithms.base import Algorithm
    from privrl.config import RunConfig
    from privrl.privacy.calibration import Calibration
    from privrl.privacy.privatizers import Privatizer
    from privrl.stats import Stats


class CohortExchange:
    """A cohort's exchange stage (a boundary with `cohort_size` > 1): the server groups claims
    into cohorts and releases each cohort as one item, `combine` of its survivors' inputs, never
    a member's report alone. Secure aggregation's rounds (key advertisement, shares, masked
    inputs, unmasking) end in the masked inputs that `combine` unmasks and sums; a cohort
    completes once every member has reported or lapsed and at least `threshold` reported, and
    is aborted (nothing of it counted) below. The default: every member sends its input in
    one round and the item is their plain sum."""

    rounds: ClassVar[tuple[str, ...]] = ("inputs",)  # the last round's messages are the reports

    def threshold(self, size: int) -> int:
        """The fewest members whose inputs complete a cohort of `size` (default: all)."""
        return size

    def combine(self, inputs: Sequence[Stats]) -> Stats:
        """The cohort's one item from its survivors' inputs (default: their sum)."""
        return {name: sum((x[name] for x in inputs[1:]), start=inputs[0][name].copy())
                for name in inputs[0]}


class TrustBoundary:
    """One trust boundary. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]  # what `RunConfig.privacy` says, on the wire and in the CLI
    label: ClassVar[str]  # in tables and legends, e.g. "JDP"
    colour: ClassVar[str]  # in every figure and the dashboard
    summary: ClassVar[str]  # who is trusted with what, in a few words (CLI help)
    private: ClassVar[bool] = True  # whether it releases noise and spends a budget
    counters: ClassVar[bool] = False  # releases through the run's central counter and schedule
    local_noise: ClassVar[bool] = False  # users noise their statistics before they leave
    cohort_size: ClassVar[int] = 1  # users whose reports are exchanged together (1: none)
    # the run's schedule delimits cohorts of users whose reports are summed together (and
    # its dropout and collusion fractions apply)
    cohorts: ClassVar[bool] = False
    # the mechanisms it can release with (None: every one)
    mechanisms: ClassVar[tuple[str, ...] | None] = None

    def __repr__(self) -> str:
        return f"<trust boundary {self.name!r}>"

    def exchange(self) -> CohortExchange | None:
        """The per-cohort exchange stage of a boundary with cohorts (None: size 1, none)."""
        return CohortExchange() if self.cohort_size > 1 else None

    def report_numbers(self, algorithm: Algorithm) -> int:
        """How many numbers one user's report carries at most (a server's body limit): every
        released array where users noise their statistics before they leave, else the
        algorithm's raw report."""
        if self.local_noise:
            return sum(math.prod(family.shape) for family in algorithm.families())
        return algorithm.raw_report_numbers()

    def report_kind(self, raw_kind: str) -> str:
        """The report kind users send, given the algorithm's raw kind (its trajectory or
        returns, for a curator that sees raw data): raw by default. A boundary that turns raw
        reports into a kind of its own declares that kind (`privrl.reports.ReportKind`: model,
        acceptance check, description) in its module, as `privrl.trust.local` does."""
        return raw_kind

    def randomize(self, stats: Stats, calibration: Calibration,
                  noise: Sequence[np.random.Generator],
                  rounding: Sequence[np.random.Generator]) -> Stats | None:
        """The users' side: what user r sends of its clean `stats` row r, randomized from its
        own `noise[r]` (grid rounding from `rounding[r]`); None: it sends its raw report."""
        return None

    def privatizer(self, calibration: Calibration, seeds: Sequence[int],
                   max_items: int) -> Privatizer:
        """The server's side: what turns accepted reports into the public release."""
        raise NotImplementedError

    def counter_items(self, calibration: Calibration, episodes: int) -> int:
        """How many items the release sums once `episodes` episodes were reported: one per
        report by default."""
        return max(int(episodes), 0)

    def variance_factor(self, calibration: Calibration, items: int) -> float:
        """A release's noise variance after `items` items, in units of one draw's variance:
        a sum of as many independent draws by default."""
        return float(items)

    def max_variance_factor(self, calibration: Calibration, items: int) -> float:
        """max over i <= items of `variance_factor(i)` (a data-independent bound)."""
        return float(items)

    def acceptance_margin(self, calibration: Calibration, false_refusal: float,
                          family: str | None) -> float:
        """How far outside its clean range an accepted entry of a report may lie: 0 for raw
        reports (they are checked exactly)."""
        return 0.0

    def default_schedule(self, episodes: int) -> str | None:
        """The release schedule a run takes when it names none (None: the algorithm's
        preset's)."""
        return None

    def check_config(self, config: RunConfig) -> None:
        """Refuse (ValueError) what `config` states that this boundary cannot run, where a run
        is made (kept out of the JSON schema, which states single fields and a few plain rules).
        Default: a cohort's assumptions (dropout, collusion, secagg_noise) on a boundary
        without cohorts."""
        if not self.cohorts and (config.dropout, config.collusion,
                                 config.secagg_noise) != (None, None, None):
            raise ValueError("dropout, collusion and secagg_noise state a secure-aggregation"
                             f" run's assumptions: with privacy {config.privacy!r} leave them"
                             " out")

    def finish_calibration(self, calibration: Calibration, config: RunConfig) -> Calibration:
        """The calibration `calibrate` computed, adjusted to what this boundary releases (its
        noise's actual cost, its assumptions): unchanged by default."""
        return calibration
