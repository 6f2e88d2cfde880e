"""What every route needs: the registry, the metrics, a locked call into one hosted run, and the
grouped commit of what it changed (`record`, then `durable` after the lock is released)."""

from __future__ import annotations

import asyncio
from asyncio import Future
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.metrics import Metrics
from privrl.server.registry import Registry
from privrl.server.settings import Settings
from privrl.server.store import Statement
from privrl.server.writer import Writer
from pydantic import BaseModel

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def registry_of(request: Request) -> Registry:
    """The app's run registry."""
    return request.app.state.registry


def metrics_of(request: Request) -> Metrics:
    """The app's metrics."""
    return request.app.state.metrics


def settings_of(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


@contextmanager
def in_flight(request: Request, report: bool) -> Iterator[None]:
    """Count a claim or report as in flight for its whole handling (503 beyond the bound)."""
    bound = request.app.state.in_flight
    try:
        bound.enter(report)
    except Refusal as exc:
        if not report:  # refused reports are counted by the error handler
            metrics_of(request).claims_refused.labels(exc.reason).inc()
        raise
    try:
        yield
    finally:
        bound.leave()


def json_answer(message: BaseModel) -> Response:
    """A 200 answer of one protocol message, serialized once by pydantic (the route's
    `response_model` still documents it; FastAPI would validate and encode it again)."""
    return Response(message.model_dump_json(), media_type="application/json")


def ensure_alive(hosted: HostedRun) -> None:
    """Refuse when the run was deleted while the request waited for its lock."""
    if hosted.deleted:
        raise Refusal(404, "deleted", f"run {hosted.id} was deleted")


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """Run blocking work (numpy, SQLite) in a worker thread; cancellation waits for it to end."""
    return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=False)


async def on_run(hosted: HostedRun, fn: Callable[..., T], *args: object) -> T:
    """Under the run's lock: call `fn(*args)` on the event loop for a small run (no thread hop,
    no GIL handoff), in a worker thread for a large one (the loop keeps answering meanwhile)."""
    if hosted.inline:
        return fn(*args)
    return await in_thread(fn, *args)


def writer_of(request: Request) -> Writer:
    """The app's writer (grouped commits)."""
    return request.app.state.writer


async def fresh(hosted: HostedRun) -> None:
    """Under the run's lock: refuse a deleted run, rebuild a stale one (after a failed write,
    once every write it queued has ended) before it serves anything."""
    ensure_alive(hosted)
    if not hosted.stale:
        return
    if hosted.durable is not None:
        await asyncio.wait([hosted.durable])
    hosted.durable = None  # it failed; what the store holds is durable
    try:
        await in_thread(hosted.rebuild)
    except Exception as exc:
        raise Refusal(503, "store", f"run {hosted.id} could not be rebuilt from the store;"
                      " retry") from exc


def record(request: Request, hosted: HostedRun, rows: list[Statement]) -> Future[None] | None:
    """Under the run's lock: queue the rows of its change; the future of its newest write."""
    if rows:
        hosted.durable = writer_of(request).submit(rows, hosted.mark_stale, hosted.published())
    return hosted.durable


async def durable(future: Future[None] | None) -> None:
    """After the lock: wait until a queued write is committed (503 when it failed)."""
    if future is None:
        return
    try:
        await asyncio.shield(future)
    except Exception as exc:
        raise Refusal(503, "store", "the server could not record this change; nothing was"
                      " counted, retry") from exc


async def locked(hosted: HostedRun, fn: Callable[..., T], *args: object) -> T:
    """Call `fn(*args)` in a worker thread while holding the run's lock (one writer per run);
    answer only once every change it may show is committed."""
    async with hosted.lock:
        await fresh(hosted)
        result = await in_thread(fn, *args)
        barrier = hosted.durable
    await durable(barrier)
    return result


def _declared_query(dependant: Dependant) -> frozenset[str]:
    """The query parameter names a route (and its dependencies) declares."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared_query(sub)
    return frozenset(names)


DirectArgs = Callable[[Request], Awaitable[dict[str, Any] | None]]


def direct(args: DirectArgs) -> Callable[[F], F]:
    """Give a hot endpoint a direct path: `args(request)` returns its keyword arguments for the
    common, well-formed request, or None to let FastAPI solve them (every unusual or invalid
    request: FastAPI's own parsing and errors, unchanged). The route is declared as usual, so
    the OpenAPI is FastAPI's; only the per-request work of solving it is skipped. Such a route
    may not have dependencies (they would be skipped too): declaring one raises TypeError."""

    def mark(endpoint: F) -> F:
        endpoint.direct_args = args  # type: ignore[attr-defined]
        return endpoint

    return mark


class StrictQueryRoute(APIRoute):
    """A route that refuses query parameters it does not declare, as unknown body fields are: a
    typo (?wiat=5) is a 422, never silently ignored. The names are computed once per route and
    checked before FastAPI solves the parameters (as a dependency, the check cost a dependency
    resolution on every request of the hot claim and report routes). An endpoint marked with
    `direct` is called with its own arguments when they apply."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, behind the query check (and the endpoint's direct path)."""
        handler = super().get_route_handler()
        known = _declared_query(self.dependant)
        args: DirectArgs | None = getattr(self.endpoint, "direct_args", None)
        if args is not None and self.dependant.dependencies:  # e.g. an admin check: the direct
            raise TypeError(  # path would skip it, so such a route cannot have one
                f"{self.path}: an endpoint with a direct path cannot have dependencies"
            )
        endpoint = self.endpoint

        async def checked(request: Request) -> Response:
            if request.scope.get("query_string"):
                unknown = [name for name in request.query_params if name not in known]
                if unknown:
                    raise RequestValidationError(
                        [{"type": "extra_forbidden", "loc": ("query", name),
                          "msg": "Extra inputs are not permitted (this route takes no such query"
                          " parameter)"} for name in unknown]
                    )
            if args is not None:
                values = await args(request)
                if values is not None:
                    return await endpoint(**values)
            return await handler(request)

        return checked


def json_body_of(request: Request) -> bool:
    """Whether the request declares a plain JSON body (`application/json`, as FastAPI parses)."""
    kind = request.headers.get("content-type", "")
    return kind == "application/json" or kind.startswith("application/json;")


def v1_router(tags: list[str | Enum]) -> APIRouter:
    """A router of the v1 run API (/v1/runs/...): its routes refuse unknown query parameters."""
    return APIRouter(prefix="/v1/runs", tags=tags, route_class=StrictQueryRoute)
