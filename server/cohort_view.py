"""The public view of a secure-aggregation run's cohorts (`GET /v1/runs/{id}/cohorts`): each
cohort's members so far, open round, survivors and outcome, and the run's assumptions. Counts
only: no key, share, masked input or sum of anyone, and nothing of a seed."""

from __future__ import annotations

from privrl.protocol import CohortState, CohortsView
from privrl.server.secagg_rounds import CohortRounds, SecaggRounds
from privrl.trust.secagg.wire import ROUNDS

SHOWN = 20  # the latest cohorts listed (the counts cover every one)
OUTCOMES = ("released", "refused", "aborted")


def cohort_state(rounds: CohortRounds) -> CohortState:
    """One cohort's public state."""
    agg = rounds.aggregator
    step = ROUNDS[rounds.round] if rounds.round < len(ROUNDS) else "done"
    return CohortState(cohort=rounds.index, members=len(rounds.members), round=step,
                       survivors=len(agg.survivors),
                       outcome=rounds.outcome if rounds.ended else None)


def cohorts_view(secagg: SecaggRounds, run_id: str) -> CohortsView:
    """Run `run_id`'s cohorts since this server started (404 for a run without cohorts)."""
    _, spec = secagg._hosted(run_id)
    mine = sorted((c for (run, _), c in secagg.cohorts.items() if run == run_id),
                  key=lambda c: c.index)
    counts = dict.fromkeys((*OUTCOMES, "in_flight"), 0)
    for c in mine:
        counts[c.outcome if c.ended and c.outcome else "in_flight"] += 1
    return CohortsView(run_id=run_id, size=spec.size, dropout=spec.dropout,
                       collusion=spec.collusion, min_survivors=spec.min_survivors,
                       honest_shares=spec.honest_shares, noise=spec.noise,
                       assumptions=spec.describe(), counts=counts,
                       cohorts=[cohort_state(c) for c in mine[-SHOWN:]])
