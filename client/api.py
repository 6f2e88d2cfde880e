"""A thin synchronous HTTP client of the privrl server's public and admin routes, and the retry
rule every client of the server follows on overload.

Every failure becomes an `ApiError` whose message is one clear line (unreachable server, bad URL,
unknown run, refused token, ...), so the CLI can print it without a traceback.

Overload (429 from admission control, 503 when the server handles too much at once) comes with
a `Retry-After`: a client waits that long times a random factor in [1, 1.5) (`overload_delay`),
so that users refused together do not come back together, and tries again. The factor is drawn
from a generator of its own (the users': `generator(client_seed, "backoff", i)`), never from a
stream that draws privacy noise or rollouts, so retries do not change any number a user reports.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import time
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import numpy as np
from privrl.config import RunConfig
from privrl.protocol import (
    API_VERSION,
    CLIENT_KEEPALIVE_SECONDS,
    Billboard,
    CohortsView,
    CredentialList,
    LedgerView,
    PolicyLog,
    Recovery,
    RunInfo,
    RunList,
)
from pydantic import BaseModel, ValidationError

TOKEN_ENV = "PRIVRL_ADMIN_TOKEN"
M = TypeVar("M", bound=BaseModel)
OVERLOADED = (429, 503)  # answered with Retry-After when the server is overloaded
JITTER = 0.5  # a wait is Retry-After * (1 + JITTER * U[0, 1))


def retry_after(resp: httpx.Response) -> float | None:
    """The seconds a 429/503 answer asks the client to wait (Retry-After as delta-seconds or an
    HTTP date), or None when it does not ask (then it is not an overload answer)."""
    if resp.status_code not in OVERLOADED:
        return None
    value = resp.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def overload_delay(resp: httpx.Response, rng: np.random.Generator, cap: float = 60.0) -> float:
    """Seconds to wait before retrying an overload answer: Retry-After (at most `cap`) stretched
    by a jitter factor in [1, 1 + JITTER) drawn from `rng`."""
    base = min(cap, retry_after(resp) or 0.0)
    return base * (1.0 + JITTER * float(rng.random()))


class ApiError(Exception):
    """A failed call to the server, explained in one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        """Keep the HTTP status (None when the server was not reached)."""
        super().__init__(message)
        self.status = status


def admin_token() -> str:
    """The admin bearer token from PRIVRL_ADMIN_TOKEN (a clear error when it is missing)."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ApiError(f"the admin token is missing: set {TOKEN_ENV} to the server's admin token")
    return token


def check_url(server: str) -> str:
    """Validate a server base URL (http or https, with a host); return it without a trailing /."""
    try:
        url = httpx.URL(server)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ApiError(f"invalid server URL {server!r}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ApiError(f"invalid server URL {server!r}: expected http://HOST:PORT")
    return server.rstrip("/")


def error_detail(resp: httpx.Response) -> str:
    """The server's ErrorBody.detail, or the start of the body when it is not one."""
    try:
        body = resp.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return resp.text[:200] or resp.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        return detail if isinstance(detail, str) else json.dumps(detail)[:300]
    return json.dumps(body)[:200]


def describe_transport_error(server: str, exc: httpx.HTTPError) -> str:
    """One line for a connection-level failure."""
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return f"invalid server URL {server!r}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return f"the server at {server} did not answer in time ({type(exc).__name__})"
    return f"cannot reach the server at {server}: {exc or type(exc).__name__}"


def describe_status(resp: httpx.Response, what: str) -> str:
    """One line for an HTTP error answer."""
    detail = error_detail(resp)
    if resp.status_code in (401, 403):
        return f"{what}: the server refused the admin token ({detail}); check {TOKEN_ENV}"
    if resp.status_code == 404:
        return f"{what}: not found ({detail})"
    return f"{what}: HTTP {resp.status_code}: {detail}"


def run_path(run_id: str) -> str:
    """The URL path of a run (the id percent-encoded, so a bad id cannot change the route)."""
    return f"/runs/{quote(run_id, safe='')}"


class ServerAPI:
    """Blocking calls to one server (runs, billboard, ledger, policy log)."""

    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0,
                 overload_attempts: int = 5) -> None:
        """Open a connection pool to `server`; `token` is only needed for admin routes.
        Overload answers are retried `overload_attempts` times (after their Retry-After)."""
        self.server = check_url(server)
        self.token = token
        self.http = httpx.Client(base_url=self.server, timeout=timeout,
                                 limits=httpx.Limits(max_connections=100,
                                                     max_keepalive_connections=20,
                                                     keepalive_expiry=CLIENT_KEEPALIVE_SECONDS))
        self.overload_attempts = overload_attempts
        self.jitter = np.random.default_rng()  # not secret, and never near any noise stream

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> ServerAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, what: str, admin: bool = False,
              body: Any = None) -> httpx.Response:
        headers = {}
        if admin:
            headers["Authorization"] = f"Bearer {self.token or admin_token()}"
        for attempt in range(self.overload_attempts + 1):
            try:
                resp = self.http.request(method, f"/{API_VERSION}{path}", headers=headers,
                                         json=body)
            except httpx.HTTPError as exc:
                raise ApiError(describe_transport_error(self.server, exc)) from None
            if retry_after(resp) is None or attempt == self.overload_attempts:
                break
            time.sleep(overload_delay(resp, self.jitter))
        if resp.status_code >= 400:
            raise ApiError(describe_status(resp, what), resp.status_code)
        return resp

    def _model(self, model: type[M], resp: httpx.Response, what: str) -> M:
        try:
            return model.model_validate_json(resp.content)
        except ValidationError as exc:
            msg = f"{what}: unexpected answer from the server: {exc.errors()[:1]}"
            raise ApiError(msg) from None

    def create_run(self, config: RunConfig, seed: int | None = None,
                   credentials: bool = False, sequential: bool | None = None) -> RunInfo:
        """POST /v1/runs (admin). `seed`: the server's secret seed (reproducible experiments
        only; the server draws one from its CSPRNG without it, and never returns it).
        `credentials`: claims need a user credential the admin issues (`credentials`).
        `sequential`: one claim out at a time, or not (None: the server's default)."""
        what = "creating the run"
        body = config.model_dump(mode="json")
        if seed is not None:
            body["seed"] = seed
        query = {"credentials": "true"} if credentials else {}
        if sequential is not None:
            query["sequential"] = str(sequential).lower()
        path = "/runs" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        resp = self._call("POST", path, what, admin=True, body=body)
        return self._model(RunInfo, resp, what)

    def credentials(self, run_id: str, count: int) -> list[str]:
        """POST /v1/runs/{id}/credentials (admin): `count` new user credentials of the run."""
        what = f"issuing credentials of run {run_id!r}"
        resp = self._call("POST", f"{run_path(run_id)}/credentials?count={int(count)}", what,
                          admin=True)
        return self._model(CredentialList, resp, what).credentials

    def list_runs(self) -> RunList:
        """GET /v1/runs."""
        return self._model(RunList, self._call("GET", "/runs", "listing runs"), "listing runs")

    def get_run(self, run_id: str) -> RunInfo:
        """GET /v1/runs/{id}."""
        what = f"run {run_id!r}"
        return self._model(RunInfo, self._call("GET", run_path(run_id), what), what)

    def delete_run(self, run_id: str) -> None:
        """DELETE /v1/runs/{id} (admin)."""
        self._call("DELETE", run_path(run_id), f"deleting run {run_id!r}", admin=True)

    def recover_run(self, run_id: str, action: str) -> RunInfo | None:
        """POST /v1/runs/{id}/recovery (admin): 'continue' a run held because the server's
        store went back under a new noise epoch, or 'stop' it; None when a run the store lost
        was forgotten."""
        what = f"{action} of run {run_id!r}"
        body = Recovery(action=action).model_dump()  # type: ignore[arg-type]
        resp = self._call("POST", f"{run_path(run_id)}/recovery", what, admin=True, body=body)
        return None if resp.content.strip() == b"null" else self._model(RunInfo, resp, what)

    def policies(self, run_id: str) -> PolicyLog:
        """GET /v1/runs/{id}/policies, every page: the whole public policy log."""
        what = f"policy log of run {run_id!r}"
        log: PolicyLog | None = None
        after = 0
        while True:
            path = f"{run_path(run_id)}/policies?after={after}"
            page = self._model(PolicyLog, self._call("GET", path, what), what)
            log = page if log is None else log.merged(page)
            if page.next_after is None:
                return log
            after = page.next_after

    def ledger(self, run_id: str) -> LedgerView:
        """GET /v1/runs/{id}/ledger."""
        what = f"ledger of run {run_id!r}"
        return self._model(LedgerView, self._call("GET", f"{run_path(run_id)}/ledger", what), what)

    def cohorts(self, run_id: str) -> CohortsView:
        """GET /v1/runs/{id}/cohorts (a run that sums cohorts of users)."""
        what = f"cohorts of run {run_id!r}"
        return self._model(CohortsView, self._call("GET", f"{run_path(run_id)}/cohorts", what),
                           what)

    def billboard(self, run_id: str) -> Billboard:
        """GET /v1/runs/{id}/billboard."""
        what = f"billboard of run {run_id!r}"
        resp = self._call("GET", f"{run_path(run_id)}/billboard", what)
        return self._model(Billboard, resp, what)
