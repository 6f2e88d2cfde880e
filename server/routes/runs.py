"""Run management: create and delete (admin token), list and show (public)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

from fastapi import Depends, Query, Request, Response
from privrl.protocol import Recovery, RunInfo, RunList, RunRequest
from privrl.server.auth import require_admin
from privrl.server.errors import UNKNOWN_QUERY, Refusal, error_responses
from privrl.server.heap import settle
from privrl.server.routes.common import (
    ensure_alive,
    in_thread,
    locked,
    metrics_of,
    registry_of,
    settings_of,
    v1_router,
)

router = v1_router(["runs"])


@router.post(
    "",
    response_model=RunInfo,
    status_code=201,
    dependencies=[Depends(require_admin)],
    responses=error_responses(
        400,
        401,
        403,
        413,
        422,
        503,
        described={
            422: "Refused run spec: not the schema (`code` \"schema\": a missing field, a value"
            " of the wrong JSON type or out of range, Laplace with delta > 0, Gaussian without"
            " delta, a privacy mode or knobs the algorithm does not have), a run the learner"
            " cannot be built for (`code` \"invalid_run\"), or a run too large for this server"
            " (`code` \"too_large\"); or a query parameter this route does not take"
            " (`code` \"schema\")."
        },
    ),
    summary="Create a run from a public run spec and an optional secret seed (admin)",
)
async def create_run(
    body: RunRequest,
    request: Request,
    sequential: bool | None = Query(
        None,
        description="at most one outstanding claim at a time; default: the server's"
        " --sequential setting (PRIVRL_SEQUENTIAL)",
    ),
) -> RunInfo:
    """Create a run; the learner plans policy version 1 before any report.

    The answer holds the public config only: the seed, given or drawn, is never returned.
    """
    registry = registry_of(request)
    seq = settings_of(request).sequential if sequential is None else sequential
    hosted = await in_thread(registry.create, body.public(), seq, body.seed)
    if settings_of(request).freeze_heap:  # the new run (and kernels it loaded), frozen too
        await in_thread(settle)
    return hosted.info(time.time())


@router.get(
    "",
    response_model=RunList,
    responses=error_responses(422, 503, described={422: UNKNOWN_QUERY}),
    summary="List runs",
)
async def list_runs(request: Request) -> RunList:
    """Every live run with its status."""
    now = time.time()
    return RunList(runs=[h.info(now) for h in registry_of(request).live()])


@router.get(
    "/{run_id}",
    response_model=RunInfo,
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="Show one run",
)
async def show_run(run_id: str, request: Request) -> RunInfo:
    """The run's spec and status (episodes claimed, outstanding, reported; finished or not)."""
    hosted = registry_of(request).get(run_id)
    return await locked(hosted, hosted.info, time.time())


@router.delete(
    "/{run_id}",
    status_code=204,
    response_class=Response,
    dependencies=[Depends(require_admin)],
    responses=error_responses(401, 403, 404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="Delete a run (admin)",
)
async def delete_run(run_id: str, request: Request) -> Response:
    """Flag the run deleted and purge its stored reports; its id is never reused."""
    registry = registry_of(request)
    try:
        if run_id in registry.failed or run_id in registry.held:
            await in_thread(registry.delete, run_id)
        else:
            hosted = registry.get(run_id)
            async with hosted.slot_freed:
                ensure_alive(hosted)
                if hosted.durable is not None:  # no queued row of this run lands after the purge
                    await asyncio.wait([hosted.durable])
                await in_thread(registry.delete, run_id)
                hosted.slot_freed.notify_all()
    except (sqlite3.Error, OSError) as exc:
        raise Refusal(503, "store", f"the server could not delete run {run_id}; retry") from exc
    metrics_of(request).forget_run(run_id)
    return Response(status_code=204)


@router.post(
    "/{run_id}/recovery",
    response_model=RunInfo | None,
    dependencies=[Depends(require_admin)],
    responses=error_responses(
        400, 401, 403, 404, 409, 413, 422, 503,
        described={
            409: "The run is not held (`code` \"not_held\"), continuing it would exceed its"
            " budget (`code` \"budget\"), it was deleted before the store went back (`code`"
            " \"deleted\"), or the store has no such run to continue (`code` \"gone\")",
        },
    ),
    summary="Continue or stop a run held because the store went back (admin)",
)
async def recover_run(run_id: str, body: Recovery, request: Request) -> RunInfo | None:
    """A run whose store is behind what the server published (a lost `-wal`, a restored
    backup) is held at start: 503 on its routes, /readyz not ready. 'continue' starts a new
    noise epoch, so no published noise is ever reused over other data, charged to the ledger
    (refused when it would exceed the run's budget); 'stop' keeps it read-only. Either way it
    is served again. Stopping a run the store lost forgets it (the answer is null)."""
    registry = registry_of(request)
    try:
        hosted = await in_thread(registry.recover, run_id, body.action)
    except (sqlite3.Error, OSError) as exc:
        raise Refusal(503, "store", f"the server could not record this for run {run_id};"
                      " retry") from exc
    return None if hosted is None else hosted.info(time.time())
