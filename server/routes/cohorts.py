"""The rounds of a secure-aggregation cohort over HTTP (`privrl.server.secagg_rounds`): a
member posts its message of each round with its claim ticket, then long-polls (`?wait=`,
bounded) for the round to close and fetches what the next one needs. 202: not closed yet. A
post with `?wait=` does both in one request: it answers with what the next round needs when
the round closes within the wait, else with only the acceptance (then poll)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse
from privrl.protocol import CohortsView
from privrl.server.cohort_view import cohorts_view
from privrl.server.errors import error_responses
from privrl.server.routes.common import v1_router
from privrl.server.secagg_rounds import CohortRounds, SecaggRounds
from privrl.trust.secagg.wire import b64, roster_body
from pydantic import BaseModel, ConfigDict, Field

router = v1_router(["cohorts"])

WAIT_LIMIT = 30.0  # the longest long poll


async def _rounds(request: Request) -> SecaggRounds:
    state = request.app.state
    if getattr(state, "cohort_rounds", None) is None:
        state.cohort_rounds = SecaggRounds(state.service)
    return state.cohort_rounds


Rounds = Annotated[SecaggRounds, Depends(_rounds)]
Wait = Annotated[float, Query(ge=0, le=WAIT_LIMIT, description="seconds to wait (long poll)")]
TicketQ = Annotated[str, Query(max_length=64, description="the member's claim ticket")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Keys(Strict):
    ticket: str = Field(max_length=64)
    cipher_key: str = Field(max_length=64, description="X25519 public key, base64")
    mask_key: str = Field(max_length=64, description="X25519 public key, base64")


class Sealed(Strict):
    ticket: str = Field(max_length=64)
    shares: dict[str, str] = Field(description="user index -> base64 message")


class Masked(Strict):
    ticket: str = Field(max_length=64)
    masked: list[int] = Field(description="the masked vector: residues mod 2^bits")


def _pending() -> JSONResponse:
    return JSONResponse({"pending": True}, status_code=202)


BASE = "/{run_id}/cohorts/{cohort}"
# what a round answers besides its result: the refusals, and 202 while the round is open
ROUND = {**error_responses(400, 403, 404, 408, 409, 410, 413, 422),
         202: {"description": "the round is still open: poll again (`?wait=`)"}}


def _roster(got: CohortRounds, ticket: str) -> dict:
    adverts, me = got.aggregator.adverts, got.members[ticket]
    return {"keys": roster_body(adverts, (me, *got.setup.neighbours(me, adverts)))}


def _inbox(got: CohortRounds, ticket: str) -> dict:
    inbox = got.aggregator.inbox(got.members[ticket])
    return {"shares": {str(u): b64(s) for u, s in inbox.items()}}


def _survivors(got: CohortRounds, ticket: str) -> dict:
    return {"survivors": sorted(got.aggregator.survivors)}


async def _next(rounds: SecaggRounds, run_id: str, cohort: int, ticket: str, after: int,
                wait: float, answer: Callable[[CohortRounds, str], dict]) -> dict:
    """A post's answer: with `?wait=`, what the next round needs once round `after` closed
    within `wait` seconds (one request instead of a post and a poll), else only that the
    message was taken."""
    got = await rounds.await_round(run_id, cohort, ticket, after, wait) if wait else None
    return {} if got is None else answer(got, ticket)


@router.post(BASE + "/keys", responses=ROUND,
             summary="Round 0: a member's public keys (`?wait=`: and the roster)")
async def post_keys(run_id: str, cohort: int, body: Keys, rounds: Rounds,
                    wait: Wait = 0.0) -> dict:
    index = await rounds.advertise(run_id, cohort, body.ticket, body.cipher_key,
                                   body.mask_key)
    return {"index": index, **await _next(rounds, run_id, cohort, body.ticket, 0, wait, _roster)}


@router.get(BASE + "/roster", responses=ROUND,
             summary="Closes round 0: every member's public keys")
async def get_roster(run_id: str, cohort: int, ticket: TicketQ, rounds: Rounds,
                     wait: Wait = 0.0) -> object:
    got = await rounds.await_round(run_id, cohort, ticket, 0, wait)
    return _pending() if got is None else _roster(got, ticket)


@router.post(BASE + "/shares", responses=ROUND,
             summary="Round 1: encrypted shares, one per neighbour (`?wait=`: and the inbox)")
async def post_shares(run_id: str, cohort: int, body: Sealed, rounds: Rounds,
                      wait: Wait = 0.0) -> dict:
    rounds.share(run_id, cohort, body.ticket, body.shares)
    return {"accepted": True,
            **await _next(rounds, run_id, cohort, body.ticket, 1, wait, _inbox)}


@router.get(BASE + "/inbox", responses=ROUND,
             summary="Closes round 1: the shares addressed to this member")
async def get_inbox(run_id: str, cohort: int, ticket: TicketQ, rounds: Rounds,
                    wait: Wait = 0.0) -> object:
    got = await rounds.await_round(run_id, cohort, ticket, 1, wait)
    return _pending() if got is None else _inbox(got, ticket)


@router.post(BASE + "/masked", responses=ROUND,
             summary="Round 2: the member's masked input, its report (`?wait=`: and the"
                     " survivors)")
async def post_masked(run_id: str, cohort: int, body: Masked, rounds: Rounds,
                      wait: Wait = 0.0) -> dict:
    rounds.submit(run_id, cohort, body.ticket, body.masked)
    return {"accepted": True,
            **await _next(rounds, run_id, cohort, body.ticket, 2, wait, _survivors)}


@router.get(BASE + "/survivors", responses=ROUND,
             summary="Closes round 2: the members whose inputs arrived")
async def get_survivors(run_id: str, cohort: int, ticket: TicketQ, rounds: Rounds,
                        wait: Wait = 0.0) -> object:
    got = await rounds.await_round(run_id, cohort, ticket, 2, wait)
    return _pending() if got is None else _survivors(got, ticket)


@router.post(BASE + "/unmask", responses=ROUND,
             summary="Round 3: the member's shares of its neighbours' secrets (`?wait=`: and"
                     " the cohort's outcome)")
async def post_unmask(run_id: str, cohort: int, body: Sealed, rounds: Rounds,
                      wait: Wait = 0.0) -> dict:
    rounds.reveal(run_id, cohort, body.ticket, body.shares)
    outcome = await rounds.status(run_id, cohort, wait) if wait else None
    return {"accepted": True, **({} if outcome is None else {"outcome": outcome})}


@router.get(BASE, responses=ROUND,
             summary="A cohort's outcome once it ended: released, refused or aborted")
async def get_cohort(run_id: str, cohort: int, rounds: Rounds, wait: Wait = 0.0) -> object:
    got = await rounds.status(run_id, cohort, wait)
    return _pending() if got is None else got


@router.get("/{run_id}/cohorts", response_model=CohortsView, responses=error_responses(404),
            summary="A secure-aggregation run's cohorts and assumptions (public)")
async def get_cohorts(run_id: str, rounds: Rounds) -> CohortsView:
    """Each cohort's members so far, open round, survivors and outcome (since the server
    started), and the run's cohort size, dropout and collusion bounds: counts only."""
    return cohorts_view(rounds, run_id)
