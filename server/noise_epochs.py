"""Noise epochs: continuing a run whose store went back, with fresh noise and an honest ledger.

When the store lost reports the server had published, the counts after the store's are about to
be published again over other data. A new noise epoch draws every tree node from then on
afresh (`Central.start_noise_epoch`), so no published noise is reused over other data. Its
price, charged to the run's ledger when the epoch starts (and again, identically, by every
replay):
  - the levels of the store's epoch 0 tree that were published after the store's count (the
    users it still counts were in those nodes), up to what was published (all levels when that
    is not known);
  - the whole tree again for the new epoch: it re-releases every user already counted under
    independent noise, so it costs what a fresh tree mechanism costs. Levels opening later are
    then not charged again.
A run the server draws no noise for (LDP, non-private) needs no epoch and pays nothing. The
admin is refused a continuation whose total would exceed the run's budget.
"""

from __future__ import annotations

import math

from privrl.privacy.accountant import Ledger
from privrl.privacy.privatizers import Central, charge_families
from privrl.privacy.tree import levels_released
from privrl.run import Run

UNKNOWN = -1  # `published` when the store's epoch was left before the mark knew its count


def supported(run: Run) -> bool:
    """Whether `run` can continue under a fresh noise epoch: its server draws no noise, or its
    counters are trees released after every episode (whose levels the epochs charge)."""
    priv = run.privatizer
    return not isinstance(priv, Central) or priv.trees_every_episode


def _charge(run: Run, ledger: Ledger, epoch: int, published: int, first: bool) -> None:
    """Record in `ledger` what starting `epoch` now costs (`first`: the run is in epoch 0)."""
    if not isinstance(run.privatizer, Central):
        return
    cal, at = run.calibration, run.reported
    if first and at > 0:
        upto = cal.levels if published == UNKNOWN else levels_released(published)
        for level in range(levels_released(at), upto):
            charge_families(ledger, cal, "tree", f"tree level {level} released before the"
                            " store went back", at)
    for level in range(cal.levels):
        charge_families(ledger, cal, "tree", f"noise epoch {epoch}: tree level {level} drawn"
                        " afresh", at)


def start(run: Run, epoch: int, published: int) -> None:
    """Charge `epoch` and draw every tree node of `run` from now on under it."""
    if isinstance(run.privatizer, Central):
        _charge(run, run.ledger, epoch, published, run.privatizer.noise_epoch == 0)
        run.privatizer.start_noise_epoch(epoch)


def epsilon_after(run: Run, epochs: list[int], published: int) -> float:
    """The run's total epsilon if `epochs` started now (its ledger is left as it is)."""
    scratch = Ledger(run.ledger.entries)
    if isinstance(run.privatizer, Central):
        for i, epoch in enumerate(epochs):
            _charge(run, scratch, epoch, published, i == 0 and run.privatizer.noise_epoch == 0)
    return float(scratch.totals(run.config.accounting_delta).epsilon)


def fits(run: Run, epochs: list[int], published: int) -> tuple[bool, float]:
    """Whether starting `epochs` now keeps the run within its budget, and the total then."""
    total = epsilon_after(run, epochs, published)
    budget = float(run.config.epsilon)
    return math.isinf(budget) or total <= budget * (1 + 1e-9), total
