"""The users' two calls: claim an episode (ticket + policy), report its statistics (Ack)."""

from __future__ import annotations

import asyncio
import time
from asyncio import Future
from typing import Annotated

from fastapi import Depends, Query, Request, Response
from privrl.protocol import Ack, Report, Ticket
from privrl.server.auth import claim_source
from privrl.server.errors import Refusal, error_responses
from privrl.server.hosted import HostedRun
from privrl.server.routes.common import (
    changed,
    durable,
    fresh,
    in_flight,
    json_answer,
    metrics_of,
    on_run,
    record,
    run_table_of,
    settings_of,
    v1_router,
)

router = v1_router(["episodes"])

RETRYABLE = ("busy", "full", "admission")  # refusals a claim may wait out (?wait=)
WAIT_LIMIT = 600.0  # largest ?wait= of a claim (above: 422); PRIVRL_MAX_CLAIM_WAIT caps it further


@router.post(
    "/{run_id}/claims",
    response_model=Ticket,
    responses=error_responses(
        401,
        403,
        404,
        409,
        410,
        422,
        429,
        503,
        described={
            401: "The run requires a user credential and none was sent (`code`"
            " \"no_credential\")",
            403: "The credential is forged or was issued for another run (`code`"
            " \"bad_credential\")",
            429: "Too many claims outstanding: the run's admission window (`code`"
            " \"admission\") or this client's own limit (`code` \"source\": per credential, or"
            " per address in a run without credentials; one less for each claim it let lapse)."
            " With `Retry-After`.",
            422: "Invalid query (`code` \"schema\"): `wait` is not a number in [0, 600], or a"
            " query parameter this route does not take"
        },
    ),
    summary="Claim the next episode: index, single-use ticket, current policy",
    # a credential is needed only in runs created with ?credentials=true: optional security
    openapi_extra={"security": [{}]},
)
async def claim(
    run_id: str,
    request: Request,
    source: Annotated[str, Depends(claim_source)],
    wait: float = Query(
        0.0,
        ge=0,
        le=WAIT_LIMIT,
        description="seconds to wait for a free slot (sequential run busy, all K slots"
        " claimed, or admission control) before answering 409 or 429; capped (not refused) at"
        " PRIVRL_MAX_CLAIM_WAIT",
    ),
) -> Response:
    """Hand out episode k = claim counter with the newest policy (and LDP randomizer params).

    409 (with Retry-After) when no slot is free: in a sequential run while another episode is
    outstanding, otherwise when reported + outstanding = K. 429 (with Retry-After) when the run
    has as many claims outstanding as it can count before they lapse (admission control), 503
    (with Retry-After) when the server handles too many requests at once. 410 once the run has
    finished.
    """
    hosted = run_table_of(request).get(run_id)
    try:  # a client at its own limit is refused before it waits for the run's lock
        hosted.sources.check(source, time.time())
    except Refusal as exc:
        metrics_of(request).claims_refused.labels(exc.reason).inc()
        raise
    with in_flight(request, report=False):
        ticket, barrier = await _claim(request, hosted, wait, source)
        await durable(barrier)
    return json_answer(ticket)


async def _claim(request: Request, hosted: HostedRun, wait: float, source: str
                 ) -> tuple[Ticket, Future[None] | None]:
    """Admit a claim (waiting for a slot up to `wait` s, bounded per run) and hand it out.

    A report frees one slot and wakes one waiter; a waiter that gets its ticket wakes the next
    while slots remain, so a report costs O(1) whatever the number of waiting users."""
    metrics = metrics_of(request)
    deadline = time.monotonic() + min(wait, settings_of(request).max_claim_wait)
    admission = hosted.admission
    async with hosted.slot_freed:
        while True:
            await fresh(hosted)
            now = time.time()
            try:
                hosted.admit(now, source)
                ticket, rows, snapshot = await on_run(hosted, changed, hosted, hosted.claim, now,
                                                      source)
                break
            except Refusal as exc:
                remaining = deadline - time.monotonic()
                full = admission.waiting >= hosted.limits.max_waiting
                if exc.reason not in RETRYABLE or remaining <= 0 or full:
                    metrics.claims_refused.labels(exc.reason).inc()
                    raise
                lapse = hosted.next_expiry(time.time())
                timeout = remaining if lapse is None else min(remaining, lapse + 0.005)
                admission.waiting += 1
                try:
                    await asyncio.wait_for(hosted.slot_freed.wait(), timeout)
                except TimeoutError:
                    pass
                finally:
                    admission.waiting -= 1
        if admission.waiting and not hosted.sequential:
            hosted.slot_freed.notify(1)
        barrier = record(request, hosted, rows, snapshot)
        metrics.of_run(hosted.id).claims.inc()
    return ticket, barrier


@router.post(
    "/{run_id}/reports",
    response_model=Ack,
    responses=error_responses(
        400,
        404,
        408,
        409,
        410,
        413,
        422,
        503,
        described={
            422: "Refused report: not the schema (`code` \"schema\": e.g. no `kind`, a value"
            " of the wrong JSON type), the wrong kind for the run's privacy mode (`code`"
            " \"wrong_kind\"), or content that does not fit the run (`code` \"invalid\":"
            " lengths, states/actions outside [0, S)/[0, A), an action the served policy does"
            " not take, missing or extra arrays, implausible magnitudes); or a query parameter"
            " this route does not take (`code` \"schema\")."
        },
    ),
    summary="Report one episode's statistics with its ticket",
)
async def report(run_id: str, report: Report, request: Request) -> Response:
    """Validate and count one report; a retry with the same ticket and body gets the stored Ack.

    JDP / non-private runs take kind='trajectory' (raw states, actions, rewards); LDP runs take
    kind='noisy' (the locally randomized arrays only). Refused reports change nothing.
    """
    arrived = time.time()  # lateness is judged by arrival, not by the turn in the queue
    hosted = run_table_of(request).get(run_id)
    metrics = metrics_of(request)
    with in_flight(request, report=True):
        async with hosted.slot_freed:
            await fresh(hosted)
            ack, rows, snapshot = await on_run(hosted, changed, hosted, hosted.report, report,
                                               arrived)
            barrier = record(request, hosted, rows, snapshot)
            counters = metrics.of_run(hosted.id)
            if ack.duplicate:
                counters.reports_duplicate.inc()
            else:
                counters.reports_accepted.inc()
                if hosted.run.finished:  # every waiting claim learns it at once (410)
                    hosted.slot_freed.notify_all()
                else:
                    hosted.slot_freed.notify(1)
        await durable(barrier)
        hosted.unsettled.pop(report.ticket, None)
    return json_answer(ack)
