"""What every route needs: the run table, the metrics, a locked call into one hosted run, the
grouped commit of what it changed (`record`, then `durable` after the lock is released) and the
run's published snapshot that public reads answer from without the lock (`snapshot_of`)."""

from __future__ import annotations

import asyncio
import time
from asyncio import Future
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.metrics import Metrics
from privrl.server.runs import RunTable
from privrl.server.settings import Settings
from privrl.server.snapshot import Snapshot
from privrl.server.store import Statement
from privrl.server.writer import Writer
from pydantic import BaseModel

T = TypeVar("T")


def run_table_of(request: Request) -> RunTable:
    """The app's run table."""
    return request.app.state.run_table


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


def changed(hosted: HostedRun, change: Callable[..., tuple[T, list[Statement]]], *args: object
            ) -> tuple[T, list[Statement], Snapshot | None]:
    """Under the run's lock: make a change (a claim, a report) and capture the public snapshot
    after it (None when nothing changed: no rows)."""
    result, rows = change(*args)
    return result, rows, hosted.capture(time.time()) if rows else None


def record(request: Request, hosted: HostedRun, rows: list[Statement],
           snapshot: Snapshot | None = None) -> Future[None] | None:
    """Under the run's lock: queue the rows of its change; the future of its newest write.
    `snapshot` (the run after the change) is published once they are committed."""
    if rows:
        future = writer_of(request).submit(rows, hosted.mark_stale, hosted.published())
        hosted.durable = future
        if snapshot is not None:
            def publish(done: Future[None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    hosted.publish(snapshot)

            future.add_done_callback(publish)
    return hosted.durable


def snapshot_of(request: Request, run_id: str) -> Snapshot:
    """The published public state of a run (no lock: a reader never waits for the run)."""
    return run_table_of(request).get(run_id).readable(time.time())


async def durable(future: Future[None] | None) -> None:
    """After the lock: wait until a queued write is committed (503 when it failed)."""
    if future is None:
        return
    try:
        await asyncio.shield(future)
    except Exception as exc:
        raise Refusal(503, "store", "the server could not record this change; nothing was"
                      " counted, retry") from exc


def _documented_query(app: Any, path: str, method: str) -> frozenset[str]:
    """The query parameter names the OpenAPI documents for one operation."""
    operation = app.openapi()["paths"].get(path, {}).get(method.lower(), {})
    return frozenset(p["name"] for p in operation.get("parameters", ()) if p.get("in") == "query")


async def refuse_unknown_query(request: Request) -> None:
    """Refuse a query parameter the route does not take, as unknown body fields are: a typo
    (?wiat=5) is a 422, never silently ignored. The route's names are what its OpenAPI
    documents (FastAPI's public schema of the route), computed once per operation."""
    if not request.scope.get("query_string"):
        return
    route = request.scope["route"]
    key = (route.path_format, request.method)
    known = _KNOWN_QUERY.get(key)
    if known is None:
        known = _KNOWN_QUERY[key] = _documented_query(request.app, *key)
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        raise RequestValidationError(
            [{"type": "extra_forbidden", "loc": ("query", name),
              "msg": "Extra inputs are not permitted (this route takes no such query"
              " parameter)"} for name in unknown]
        )


_KNOWN_QUERY: dict[tuple[str, str], frozenset[str]] = {}


async def read_slot(request: Request) -> AsyncIterator[None]:
    """Hold one of the client address's public-read slots while the read is answered."""
    address = request.client.host if request.client is not None else "unknown"
    async with request.app.state.read_slots.held(address):
        yield


def public_router() -> APIRouter:
    """A router of the v1 public views: unknown query refused, reads bounded per address."""
    return APIRouter(prefix="/v1/runs", tags=["public"], dependencies=[
        Depends(refuse_unknown_query), Depends(read_slot)])


def v1_router(tags: list[str | Enum]) -> APIRouter:
    """A router of the v1 run API (/v1/runs/...): its routes refuse unknown query parameters."""
    return APIRouter(prefix="/v1/runs", tags=tags, dependencies=[Depends(refuse_unknown_query)])
