"""A user's side of a secure-aggregation cohort over HTTP (`privrl.server.routes.cohorts`).

After its episode the user holds its vector: its statistics on the grid plus its noise share,
drawn from its own noise stream (`privrl.client.users.play`). It computes the cohort's public
parameters itself from the run's configuration and its episode
(`privrl.trust.secagg.wire.cohort_setup`: nothing the server sends sets them) and runs a
`UserSession` (keys and self-mask seed from the OS CSPRNG) through the four rounds: post keys,
wait for the roster; post encrypted shares, wait for its inbox; post its masked input, wait
for the survivors; post its unmasking shares, wait for the cohort's outcome. Each post waits
for its round to close (`?wait=`) and answers with what the next round needs, so a round
costs one request; a round still open then is long-polled (bounded polls).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import numpy as np
from privrl.privacy.calibration import Calibration
from privrl.privacy.grid import exact_units
from privrl.protocol import Ticket
from privrl.stats import Stats
from privrl.trust.secagg.protocol import (
    CohortAborted,
    MalformedInput,
    UserSession,
)
from privrl.trust.secagg.wire import b64, cohort_setup, roster_of, unb64

POLL = 5.0  # seconds of one long poll
PATIENCE = 120.0  # seconds a user keeps asking a server it cannot reach before it gives up
RETRY = 0.5  # seconds between polls while the server cannot be reached
# a round's request may be held POLL seconds, then queue behind a cohort's others on a loaded
# server: its answer is awaited this long before the member gives up (and drops out)
TIMEOUT = httpx.Timeout(POLL + 60.0, connect=30.0)


class CohortFailed(RuntimeError):
    """The cohort aborted, or refused this user's message: nothing of it was counted."""


def cohort_vector(calibration: Calibration, noisy: Stats) -> np.ndarray:
    """A user's integers (one replica): each family's report in grid units, concatenated in
    the calibration's order (what the in-process cohort privatizer sums)."""
    return np.concatenate([exact_units(np.asarray(noisy[f.name][0]), f.grid).reshape(-1)
                           for f in calibration.families])


async def _send(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        resp = await http.post(path, json=body, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise CohortFailed(f"POST {path.rsplit('/', 1)[-1]}: {exc!r}") from None
    if resp.status_code != 200:
        raise CohortFailed(f"POST {path.rsplit('/', 1)[-1]}: {resp.status_code} {resp.text}")
    return resp.json()


async def _await(http: httpx.AsyncClient, path: str, ticket: str | None) -> dict[str, Any]:
    """The round's answer, long-polling for as long as the server says it is open (202: the
    server bounds every round by its deadlines, and holds this member's claim meanwhile);
    CohortFailed once the server stayed unreachable for PATIENCE seconds."""
    params: dict[str, Any] = {"wait": POLL}
    if ticket is not None:
        params["ticket"] = ticket
    reached = time.monotonic()
    while time.monotonic() - reached < PATIENCE:
        try:
            resp = await http.get(path, params=params, timeout=TIMEOUT)
        except httpx.HTTPError:  # the server is away (restarting?): ask again, patiently
            await asyncio.sleep(RETRY)
            continue
        reached = time.monotonic()
        if resp.status_code == 200:
            return resp.json()
        if resp.status_code != 202:
            raise CohortFailed(f"GET {path.rsplit('/', 1)[-1]}: {resp.status_code} {resp.text}")
    raise CohortFailed(f"GET {path}: the server stayed unreachable for {PATIENCE:g} s")


async def cohort_rounds(http: httpx.AsyncClient, base: str, run_id: str,
                        calibration: Calibration, ticket: Ticket,
                        vector: np.ndarray) -> dict[str, Any]:
    """Run this user's cohort rounds for `ticket`'s episode with `vector`; the cohort's outcome
    (CohortFailed when it aborted or refused this user)."""
    spec = calibration.cohort
    assert spec is not None
    cohort = ticket.episode // spec.size
    setup = cohort_setup(run_id, spec, cohort, int(vector.size))
    user = UserSession(setup, ticket.episode % spec.size, vector)
    path = f"{base}/cohorts/{cohort}"
    me = ticket.ticket

    async def step(what: str, body: dict[str, Any], then: str, key: str) -> Any:
        """Post this round's message, waiting for the round to close (one request); poll for
        what the next round needs when it was still open at the post's answer."""
        got = await _send(http, f"{path}/{what}?wait={POLL:g}", {"ticket": me, **body})
        if key not in got:
            got = await _await(http, f"{path}/{then}" if then else path,
                               me if then else None)
            return got if key == "outcome" else got[key]
        return got[key]

    ad = user.advertise()
    keys = await step("keys", {"cipher_key": b64(ad.cipher_key), "mask_key": b64(ad.mask_key)},
                      "roster", "keys")
    roster = roster_of(keys)
    try:
        sealed = user.share_keys(roster)
        inbox = await step("shares", {"shares": {str(v): b64(s) for v, s in sealed.items()}},
                           "inbox", "shares")
        masked = user.masked_input({int(u): unb64(s) for u, s in inbox.items()})
        survivors = await step("masked", {"masked": masked.tolist()}, "survivors", "survivors")
        reveal = user.unmask(survivors)
    except (CohortAborted, MalformedInput) as exc:
        raise CohortFailed(str(exc)) from None
    return await step("unmask", {"shares": {str(u): b64(s) for u, s in reveal.items()}}, "",
                      "outcome")
