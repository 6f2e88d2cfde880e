"""Public, read-only views of a run: billboard, newest policy, ledger, policy log (paged).

Every one is answered from the run's published snapshot (`privrl.server.snapshot`), without
the run's lock: readers never wait for the run, and the run never waits for readers."""

from __future__ import annotations

from fastapi import Query, Request, Response
from privrl.protocol import Billboard, LedgerView, PolicyLog, PolicyPayload
from privrl.server.errors import UNKNOWN_QUERY, error_responses
from privrl.server.routes.common import public_router, snapshot_of
from privrl.server.snapshot import LOG_PAGE, LOG_PAGE_MAX

router = public_router()


def json_bytes(body: bytes) -> Response:
    """A 200 answer of JSON serialized beforehand."""
    return Response(body, media_type="application/json")


@router.get(
    "/{run_id}/billboard",
    response_model=Billboard,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="The privatized statistics the learner plans from",
)
async def billboard(run_id: str, request: Request) -> Response:
    """Released arrays (flattened in C order, with their shapes), radius E and reports counted."""
    return json_bytes(snapshot_of(request, run_id).json("billboard"))


@router.get(
    "/{run_id}/policy",
    response_model=PolicyPayload,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="The newest policy version",
)
async def policy(run_id: str, request: Request) -> Response:
    """The newest planned policy actions[h][s] (reading it never makes the learner plan)."""
    return json_bytes(snapshot_of(request, run_id).json("policy"))


@router.get(
    "/{run_id}/ledger",
    response_model=LedgerView,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="Privacy spent so far and the mechanisms behind it",
)
async def ledger(run_id: str, request: Request) -> Response:
    """Total (epsilon, delta) per user, the pure and zCDP parts, per-mechanism sums, charges."""
    return json_bytes(snapshot_of(request, run_id).json("ledger"))


@router.get(
    "/{run_id}/policies",
    response_model=PolicyLog,
    responses=error_responses(
        404, 422, 503,
        described={422: "`after` or `limit` out of range, or a query parameter this route does"
                   " not take (`code` \"schema\")"},
    ),
    summary="The public policy log, a page of versions at a time (for the evaluator)",
)
async def policies(
    run_id: str,
    request: Request,
    after: int = Query(0, ge=0, description="versions newer than this one (0: from the first)"),
    limit: int = Query(LOG_PAGE, ge=1, le=LOG_PAGE_MAX, description="versions in this page"),
) -> Response:
    """Policy versions after `after` (at most `limit`): each one's actions and the episodes it
    was served to (first episode index, claimed, reported, expired); `next_after` is the cursor
    of the next page (null on the last)."""
    return json_bytes(snapshot_of(request, run_id).log.page_json(run_id, after, limit))
