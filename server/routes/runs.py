"""Run management: create and delete (admin token), list and show (public)."""

from __future__ import annotations

import sqlite3
import time

from fastapi import Depends, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from privrl.algorithms import configure
from privrl.protocol import CredentialList, Recovery, RunInfo, RunList, RunRequest
from privrl.server.auth import require_admin
from privrl.server.deps import AppSettings, Runs, Table
from privrl.server.errors import UNKNOWN_QUERY, Refusal, error_responses
from privrl.server.ops.credentials import MAX_ISSUED, credential_key, issue
from privrl.server.routes.common import read_slot, snapshot_of, v1_router
from privrl.server.service import in_thread
from pydantic import ValidationError

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
        408,
        413,
        422,
        503,
        described={
            422: "Refused run spec: not the schema (`code` \"schema\": a missing field, a value"
            " of the wrong JSON type or out of range, Laplace with delta > 0, Gaussian without"
            " delta, a privacy mode or knobs the algorithm does not have), a run the learner"
            " cannot be built for (`code` \"invalid_run\": e.g. a release schedule outside JDP),"
            " or a run too large for this server"
            " (`code` \"too_large\"); or a query parameter this route does not take"
            " (`code` \"schema\")."
        },
    ),
    summary="Create a run from a public run spec and an optional secret seed (admin)",
)
async def create_run(
    body: RunRequest,
    table: Table,
    settings: AppSettings,
    sequential: bool | None = Query(
        None,
        description="at most one outstanding claim at a time; default: the server's"
        " --sequential setting (PRIVRL_SEQUENTIAL)",
    ),
    credentials: bool = Query(
        False,
        description="claims need a user credential issued by the admin (POST"
        " /v1/runs/{id}/credentials), each with its own limit of outstanding claims; without,"
        " the limit applies per client address",
    ),
) -> RunInfo:
    """Create a run; the learner plans policy version 1 before any report.

    The answer holds the public config only: the seed, given or drawn, is never returned.
    """
    seq = settings.sequential if sequential is None else sequential
    try:  # no mechanism given: the algorithm's (the frontier's row), then its delta
        config = configure(body.public())
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None
    hosted = await in_thread(table.create, config, seq, body.seed, credentials)
    return hosted.info(time.time())


@router.post(
    "/{run_id}/credentials",
    response_model=CredentialList,
    status_code=201,
    dependencies=[Depends(require_admin)],
    responses=error_responses(
        401, 403, 404, 409, 422, 503,
        described={409: "The run does not require credentials (`code` \"open_run\")",
                   422: "`count` out of range, or a query parameter this route does not take"},
    ),
    summary="Issue user credentials of a run that requires them (admin)",
)
async def issue_credentials(
    run_id: str,
    table: Table,
    settings: AppSettings,
    count: int = Query(1, ge=1, le=MAX_ISSUED, description="how many credentials to issue"),
) -> CredentialList:
    """New bearer tokens for the run's claims (HMAC of the run id and a random credential id
    under the server's credential key; nothing is stored, and none is ever shown again)."""
    hosted = table.get(run_id)
    if not hosted.row.credentials:
        raise Refusal(409, "open_run", f"run {run_id} does not require credentials (create it"
                      " with ?credentials=true)")
    key = credential_key(settings)
    if key is None:  # pragma: no cover - require_admin already needs the admin token
        raise Refusal(503, "no_credential_key", "this server has no credential key")
    return CredentialList(run_id=run_id, credentials=issue(key, run_id, count))


@router.get(
    "",
    response_model=RunList,
    dependencies=[Depends(read_slot)],
    responses=error_responses(422, 503, described={422: UNKNOWN_QUERY}),
    summary="List runs",
)
async def list_runs(table: Table) -> RunList:
    """Every live run with its status."""
    now = time.time()
    return RunList(runs=[h.readable(now).info for h in table.live()])


@router.get(
    "/{run_id}",
    response_model=RunInfo,
    dependencies=[Depends(read_slot)],
    responses=error_responses(404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="Show one run",
)
async def show_run(run_id: str, request: Request) -> Response:
    """The run's spec and status (episodes claimed, outstanding, reported; finished or not)."""
    return Response(snapshot_of(request, run_id).json("info"), media_type="application/json")


@router.delete(
    "/{run_id}",
    status_code=204,
    response_class=Response,
    dependencies=[Depends(require_admin)],
    responses=error_responses(401, 403, 404, 422, 503, described={422: UNKNOWN_QUERY}),
    summary="Delete a run (admin)",
)
async def delete_run(run_id: str, service: Runs) -> Response:
    """Flag the run deleted and purge its stored reports; its id is never reused."""
    try:
        await service.delete(run_id)
    except (sqlite3.Error, OSError) as exc:
        raise Refusal(503, "store", f"the server could not delete run {run_id}; retry") from exc
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
async def recover_run(run_id: str, body: Recovery, table: Table) -> RunInfo | None:
    """A run whose store is behind what the server published (a lost `-wal`, a restored
    backup), or whose high-water mark is lost (deleted, empty, unreadable, another database's),
    is held at start: 503 on its routes, /readyz not ready. 'continue' starts a new
    noise epoch, so no published noise is ever reused over other data, charged to the ledger
    (refused when it would exceed the run's budget); 'stop' keeps it read-only. Either way it
    is served again. Stopping a run the store lost forgets it (the answer is null)."""
    try:
        hosted = await in_thread(table.recover, run_id, body.action)
    except (sqlite3.Error, OSError) as exc:
        raise Refusal(503, "store", f"the server could not record this for run {run_id};"
                      " retry") from exc
    return None if hosted is None else hosted.info(time.time())
