"""Public, read-only views of a run: billboard, newest policy, ledger, policy log."""

from __future__ import annotations

import time

from fastapi import Request
from privrl.protocol import Billboard, LedgerView, PolicyLog, PolicyPayload
from privrl.server.errors import UNKNOWN_QUERY, error_responses
from privrl.server.routes.common import locked, registry_of, v1_router

router = v1_router(["public"])


@router.get(
    "/{run_id}/billboard",
    response_model=Billboard,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="The privatized statistics the learner plans from",
)
async def billboard(run_id: str, request: Request) -> Billboard:
    """Released arrays (flattened in C order, with their shapes), radius E and reports counted."""
    hosted = registry_of(request).get(run_id)
    return await locked(hosted, hosted.billboard)


@router.get(
    "/{run_id}/policy",
    response_model=PolicyPayload,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="The newest policy version",
)
async def policy(run_id: str, request: Request) -> PolicyPayload:
    """The newest planned policy actions[h][s] (reading it never makes the learner plan)."""
    hosted = registry_of(request).get(run_id)
    return await locked(hosted, hosted.policy_payload)


@router.get(
    "/{run_id}/ledger",
    response_model=LedgerView,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="Privacy spent so far and the mechanisms behind it",
)
async def ledger(run_id: str, request: Request) -> LedgerView:
    """Total (epsilon, delta) per user, the pure and zCDP parts, per-mechanism sums, charges."""
    hosted = registry_of(request).get(run_id)
    return await locked(hosted, hosted.ledger_view)


@router.get(
    "/{run_id}/policies",
    response_model=PolicyLog,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="The public policy log (for the evaluator)",
)
async def policies(run_id: str, request: Request) -> PolicyLog:
    """Every policy version's actions and, per episode index, the version served and outcome."""
    hosted = registry_of(request).get(run_id)
    return await locked(hosted, hosted.policy_log, time.time())
