"""The users' two calls: claim an episode (ticket + policy), report its statistics (Ack)."""

from __future__ import annotations

import time

from fastapi import Query, Response
from privrl.protocol import Ack, Report, Ticket
from privrl.server.deps import Runs, Source
from privrl.server.errors import error_responses
from privrl.server.routes.common import json_answer, v1_router

router = v1_router(["episodes"])

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
    service: Runs,
    source: Source,
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
    return json_answer(await service.claim(run_id, source, wait))


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
async def report(run_id: str, report: Report, service: Runs) -> Response:
    """Validate and count one report; a retry with the same ticket and body gets the stored Ack.

    JDP / non-private runs take kind='trajectory' (raw states, actions, rewards); LDP runs take
    kind='noisy' (the locally randomized arrays only). Refused reports change nothing.
    """
    arrived = time.time()  # lateness is judged by arrival, not by the turn in the queue
    return json_answer(await service.report(run_id, report, arrived))
