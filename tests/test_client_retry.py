"""Clients honour Retry-After on overload (429/503) with jittered waits, within their patience."""

from __future__ import annotations

import asyncio
import email.utils
import time
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from privrl.client.api import JITTER, ServerAPI, overload_delay, retry_after
from privrl.client.user_state import UserState
from privrl.client.users import Backoff, GaveUp, User

CTX = SimpleNamespace(run_id="r")  # all a User needs to post: the run id (of its path)


def answer(status: int, after: str | None = None) -> httpx.Response:
    """A response with an optional Retry-After header."""
    headers = {"Retry-After": after} if after is not None else {}
    return httpx.Response(status, json={"detail": "x", "code": "c"}, headers=headers)


def test_retry_after_reads_seconds_and_dates_of_overload_answers_only() -> None:
    assert retry_after(answer(429, "3")) == 3.0
    assert retry_after(answer(503, "0.5")) == 0.5
    assert retry_after(answer(503)) is None  # a 503 without it (store failure): not overload
    assert retry_after(answer(409, "3")) is None  # not an overload status
    assert retry_after(answer(429, "soon")) is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after(answer(429, later)) <= 30


def test_overload_delay_is_retry_after_stretched_by_seeded_jitter() -> None:
    delays = [overload_delay(answer(429, "2"), np.random.default_rng(7)) for _ in range(2)]
    assert delays[0] == delays[1]  # same generator state, same wait
    rng = np.random.default_rng(1)
    many = np.array([overload_delay(answer(429, "2"), rng) for _ in range(500)])
    assert many.min() >= 2.0 and many.max() < 2.0 * (1 + JITTER)
    assert many.std() > 0.1  # spread out: refused users do not come back together
    assert overload_delay(answer(429, "1000"), rng, cap=5.0) < 5.0 * (1 + JITTER)


def test_a_user_waits_out_overload_without_using_its_error_attempts() -> None:
    """Six overload answers (more than the 2 error attempts allowed), then success."""
    script = [answer(429, "0.01"), answer(503, "0.01")] * 3
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        resp = script.pop(0) if script else httpx.Response(200, json={})
        seen.append(resp.status_code)
        return resp

    async def post() -> httpx.Response:
        transport = httpx.MockTransport(handler)
        async with httpx.AsyncClient(base_url="http://fake", transport=transport) as http:
            user = User(http, CTX, UserState(0, None),
                        Backoff(attempts=2, base=0.001, patience=5.0))
            resp, waited, retries = await user._post("/v1/runs/r/claims", "claiming", None)
            assert retries == 6  # what the user waited counts every refusal, not one request
            assert waited >= 6 * 0.01
            return resp

    assert asyncio.run(post()).status_code == 200
    assert seen == [429, 503] * 3 + [200]


def test_a_user_gives_up_when_overload_outlasts_its_patience() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return answer(429, "0.02")

    async def post() -> None:
        transport = httpx.MockTransport(handler)
        async with httpx.AsyncClient(base_url="http://fake", transport=transport) as http:
            user = User(http, CTX, UserState(0, None), Backoff(patience=0.1))
            await user._post("/v1/runs/r/claims", "claiming", None)

    with pytest.raises(GaveUp, match="overloaded"):
        asyncio.run(post())


def test_the_admin_client_retries_overload_a_bounded_number_of_times() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return answer(503, "0") if len(calls) < 3 else httpx.Response(200, json={"runs": []})

    api = ServerAPI("http://fake")
    api.http = httpx.Client(base_url="http://fake", transport=httpx.MockTransport(handler))
    assert api.list_runs().runs == [] and len(calls) == 3
    api.overload_attempts = 1
    calls.clear()
    with pytest.raises(Exception, match="503"):
        api.list_runs()
    assert len(calls) == 2
