"""What every route needs besides its dependencies (`privrl.server.deps`): one answer's JSON,
the run's published snapshot that public reads answer from without the lock (`snapshot_of`),
and the v1 routers (unknown query parameters refused, public reads bounded per address)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Coroutine
from enum import Enum
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from privrl.server.deps import run_table_of
from privrl.server.snapshot import Snapshot
from pydantic import BaseModel


def json_answer(message: BaseModel) -> Response:
    """A 200 answer of one protocol message, serialized once by pydantic (the route's
    `response_model` still documents it; FastAPI would validate and encode it again)."""
    return Response(message.model_dump_json(), media_type="application/json")


def snapshot_of(request: Request, run_id: str) -> Snapshot:
    """The published public state of a run (no lock: a reader never waits for the run)."""
    return run_table_of(request).get(run_id).readable(time.time())


def _documented_query(app: Any, path: str, method: str) -> frozenset[str]:
    """The query parameter names the OpenAPI documents for one operation."""
    operation = app.openapi()["paths"].get(path, {}).get(method.lower(), {})
    return frozenset(p["name"] for p in operation.get("parameters", ()) if p.get("in") == "query")


def refuse_unknown_query(request: Request, route: APIRoute) -> None:
    """Refuse a query parameter the route does not take, as unknown body fields are: a typo
    (?wiat=5) is a 422, never silently ignored. The route's names are what its OpenAPI
    documents (FastAPI's public schema of the route), computed once per operation."""
    if not request.scope.get("query_string"):
        return
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


class StrictQueryRoute(APIRoute):
    """A route that refuses unknown query parameters before FastAPI solves its parameters
    (checked here, not as a dependency: a dependency costs a resolution on every request of
    the hot claim and report routes)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, behind the query check."""
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            refuse_unknown_query(request, self)
            return await handler(request)

        return checked


_KNOWN_QUERY: dict[tuple[str, str], frozenset[str]] = {}


async def read_slot(request: Request) -> AsyncIterator[None]:
    """Hold one of the client address's public-read slots while the read is answered."""
    address = request.client.host if request.client is not None else "unknown"
    async with request.app.state.read_slots.held(address):
        yield


def public_router() -> APIRouter:
    """A router of the v1 public views: unknown query refused, reads bounded per address."""
    return APIRouter(prefix="/v1/runs", tags=["public"], route_class=StrictQueryRoute,
                     dependencies=[Depends(read_slot)])


def v1_router(tags: list[str | Enum], prefix: str = "/v1/runs") -> APIRouter:
    """A router of the v1 API (/v1/runs/... by default): its routes refuse unknown query
    parameters."""
    return APIRouter(prefix=prefix, tags=tags, route_class=StrictQueryRoute)
