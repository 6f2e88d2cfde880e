"""The run's budget is a limit: its privacy filter, and the refusal of an overspending plan.

Every run's ledger carries the run's (epsilon, delta) as a filter (`Ledger.budget`): a release
that would take it past the budget is refused before its noise is drawn (`BudgetExhausted`).
And before a run starts, the whole release plan of its privatizer (`Privatizer.plan`: every tree
level, local report and release round the K episodes can charge, at the scales in use) is
charged to a scratch ledger: a preset or knob whose calibration would spend more than the budget
is refused at creation (`OverspendingPlan`), with its true spend and the budgets it fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from privrl.algorithms.registry import bind
from privrl.config import RunConfig
from privrl.privacy.accountant import Budget, Charge, Ledger, Totals

# the epsilons the bisection for a fitting budget looks between
SEARCH_RANGE = (1e-3, 1e7)


class OverspendingPlan(ValueError):
    """A run whose calibration would spend more than its budget over its K episodes."""


def run_budget(config: RunConfig) -> Budget | None:
    """The (epsilon, delta) a run's ledger may never pass (None: nothing private is claimed)."""
    if not config.boundary.private or math.isinf(config.epsilon):
        return None
    return Budget(float(config.epsilon), config.accounting_delta)


def plan_totals(plan: Sequence[Charge], delta: float) -> Totals:
    """The totals at `delta` of a release plan."""
    return Ledger().totals_with(plan, delta)


def release_plan(config: RunConfig) -> list[Charge]:
    """Every charge `config`'s run can make over its K episodes (no run, no noise drawn)."""
    algorithm = bind(config)
    return algorithm.privatizer(algorithm.calibration(), [0], config.episodes).plan()


def planned_totals(config: RunConfig) -> Totals:
    """What `config`'s run spends at most over its K episodes."""
    return plan_totals(release_plan(config), config.accounting_delta)


def check_budget(config: RunConfig) -> None:
    """Refuse (OverspendingPlan) `config` if its release plan would pass its budget."""
    refuse_overspending(config, release_plan(config))


def fits(config: RunConfig) -> bool:
    """Whether `config`'s release plan stays within its own budget."""
    budget = run_budget(config)
    return budget is None or budget.admits(planned_totals(config))


def largest_fitting_epsilon(config: RunConfig, iterations: int = 40) -> float | None:
    """Bisection (in log epsilon, same algorithm, preset and knobs) for the largest epsilon
    below `config.epsilon` whose plan fits its own budget; None when no epsilon from
    SEARCH_RANGE[0] up fits. Where small budgets have no calibration at all (e.g. noise shares
    beyond exact integer sampling), the bisection starts from the smallest that fits on a grid
    of half decades. Assumes one crossing (spend / epsilon growing with epsilon) above it."""
    def at(eps: float) -> bool:
        try:
            return fits(config.model_copy(update={"epsilon": eps}))
        except ValueError:  # no calibration exists there (e.g. noise beyond integer sampling)
            return False

    lo, hi = SEARCH_RANGE[0], min(float(config.epsilon), SEARCH_RANGE[1])
    if hi <= lo:
        return None
    while not at(lo):
        lo *= math.sqrt(10.0)
        if lo >= hi:
            return None
    for _ in range(iterations):
        if hi / lo <= 1.0 + 1e-4:
            break
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if at(mid) else (lo, mid)
    return lo


def refuse_overspending(config: RunConfig, plan: Sequence[Charge]) -> None:
    """Refuse (OverspendingPlan) a run whose release plan would pass its budget, saying what it
    would spend and which budgets it fits."""
    budget = run_budget(config)
    if budget is None:
        return
    totals = plan_totals(plan, budget.delta)
    if budget.admits(totals):
        return
    knobs = f", knobs {config.knobs}" if config.knobs else ""
    what = f"{config.algo} ({config.privacy}, preset {config.preset}{knobs})"
    fitting = largest_fitting_epsilon(config)
    if fitting is not None:  # stated to 4 digits, rounded down: the stated budget fits
        step = 10.0 ** (math.floor(math.log10(fitting)) - 3)
        fitting = math.floor(fitting / step) * step
    advice = (f"with this calibration the plan fits its budget up to epsilon = {fitting:.4g}"
              f" (bisection): lower epsilon, or choose a calibration that spends exactly the"
              " budget" if fitting is not None else
              f"with this calibration the plan fits no budget from epsilon = {SEARCH_RANGE[0]:g}"
              " up: choose a calibration that spends exactly the budget")
    raise OverspendingPlan(
        f"{what} would spend epsilon = {totals.epsilon:.6g} (delta = {totals.delta:.3g}) over"
        f" its {config.episodes} episodes, past its budget epsilon = {config.epsilon:g}. The"
        f" smallest budget covering this noise is epsilon = {totals.epsilon:.6g}, but the noise"
        f" is calibrated from epsilon; {advice}"
    )
