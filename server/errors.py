"""Refusals (4xx/503 with a message that says what is wrong) and their HTTP rendering.

Every error answer of the server has the body `ErrorBody {"detail": "..."}`. Validation errors
are rendered from the field location and the message only: the offending input is never echoed
(it may be NaN, which JSON cannot carry, and it may be a raw statistic).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from privrl.protocol import ErrorBody
from privrl.reports import kinds as report_kinds
from privrl.wire import error_text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

log = logging.getLogger("privrl.server")

DESCRIPTIONS: dict[int, str] = {
    400: "Malformed request: the body is not valid JSON or a header is invalid",
    401: "The admin bearer token is missing",
    403: "The admin bearer token is wrong",
    404: "Unknown (or deleted) run, or unknown ticket",
    408: "The request body did not arrive within the server's body timeout (`code` \"timeout\";"
    " the connection is closed)",
    409: "Conflict: no free episode slot right now (retry after Retry-After seconds), or a used"
    " ticket was sent with a different report",
    410: "Gone: the run has finished, or the claim expired before it was reported",
    413: "The request body is larger than the server's limit",
    422: "The request is well-formed JSON but invalid (schema, shape, range, wrong report kind)",
    429: "Too many claims outstanding in this run to count another one before it lapses"
    " (admission control, `code` \"admission\"): nothing was claimed; retry after Retry-After"
    " seconds",
    503: "Not available: admin token not configured, runs still being rebuilt, store failure,"
    " or the server is overloaded (`code` \"overloaded\"; retry after Retry-After seconds)",
}


UNKNOWN_QUERY = "A query parameter this route does not take (`code` \"schema\")"


def error_responses(
    *codes: int, described: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries documenting the given error codes with the ErrorBody model
    (`described` replaces the generic description of a code with the route's own)."""
    own = dict(described or {})
    return {
        code: {"model": ErrorBody, "description": own.get(code, DESCRIPTIONS[code])}
        for code in codes
    }


class Refusal(Exception):
    """A request the server refuses: HTTP status, a metrics reason label and a clear message."""

    def __init__(
        self,
        status: int,
        reason: str,
        detail: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.headers = dict(headers or {})


def error_response(
    status: int,
    detail: str,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
) -> JSONResponse:
    """The JSON answer of every error: ErrorBody with `detail` (and `code` when known)."""
    body = ErrorBody(detail=detail, code=code).model_dump(exclude_none=True)
    return JSONResponse(body, status_code=status, headers=headers)


def _location(loc: Sequence[Any]) -> str:
    """'body.states[3]' from a pydantic location tuple."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "request"


# Strict validation: a value of the wrong JSON type is refused, never converted.
TYPE_ERRORS = frozenset(
    {"int_type", "float_type", "bool_type", "string_type", "list_type", "dict_type",
     "model_type", "model_attributes_type"}
)


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, for messages (the value itself is never echoed)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _describe(err: Mapping[str, Any]) -> str:
    """One validation error as 'location: what is wrong' (strict types, report kind explained)."""
    loc = tuple(err.get("loc", ()))
    kind = err.get("type")
    msg = error_text(err)
    if kind == "union_tag_not_found":
        field = str((err.get("ctx") or {}).get("discriminator", "kind")).strip("'")
        kinds = ", ".join(f"{kind.name!r} ({kind.describe})" for kind in report_kinds())
        return (f"{_location((*loc, field))}: field required: the report kind the run's trust"
                f" boundary takes, one of {kinds}")
    if kind in TYPE_ERRORS and "input" in err:
        msg += f", got {_json_type(err['input'])} (values are never converted between types)"
    return f"{_location(loc)}: {msg}"


def describe_validation(errors: Sequence[Mapping[str, Any]], limit: int = 5) -> tuple[int, str]:
    """(status, message) for request validation errors: 400 for malformed JSON, else 422."""
    for err in errors:
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            reason = ctx.get("error", err.get("msg", "JSON decode error"))
            where = err.get("loc", ())
            pos = f" at character {where[-1]}" if where and isinstance(where[-1], int) else ""
            return 400, f"malformed JSON body{pos}: {reason}"
    if any(e.get("type") == "missing" and tuple(e.get("loc", ())) == ("body",) for e in errors):
        return 422, "the request body is missing: send a JSON object"
    parts = [_describe(e) for e in errors[:limit]]
    more = f" (and {len(errors) - limit} more)" if len(errors) > limit else ""
    return 422, "invalid request: " + "; ".join(parts) + more


def _http_detail(detail: Any) -> str:
    """A string for a Starlette HTTPException detail (which may be any JSON value)."""
    return detail if isinstance(detail, str) else json.dumps(detail, default=str)[:500]


def _unparsable(cause: BaseException) -> str:
    """Why FastAPI could not parse a body (it raises its generic 400 from the parser's error)."""
    if isinstance(cause, UnicodeDecodeError):
        return f"not UTF-8 text (byte {cause.start} is {cause.object[cause.start]:#04x})"
    if isinstance(cause, ClientDisconnect):
        return "the client disconnected before the body ended"
    if isinstance(cause, RecursionError):
        return "JSON nested too deeply to read"
    return f"it could not be parsed ({type(cause).__name__})"


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods the OpenAPI documents at this path (Starlette names only one route's)."""
    methods: set[str] = set()
    for template, operations in app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            methods |= {m.upper() for m in operations}
    return sorted(methods)


def install_error_handlers(app: FastAPI, on_report_refused: Any) -> None:
    """Render Refusal, validation and HTTP errors as ErrorBody; count refused reports."""

    def is_report(request: Request) -> bool:
        return request.method == "POST" and request.url.path.endswith("/reports")

    @app.exception_handler(Refusal)
    async def _refusal(request: Request, exc: Refusal) -> JSONResponse:
        if is_report(request):
            on_report_refused(exc.reason)
        if request.method == "POST":
            log.info("%s refused: %s (%d)", request.url.path, exc.reason, exc.status)
        return error_response(exc.status, exc.detail, exc.headers, exc.reason)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, detail = describe_validation(exc.errors())
        code = "malformed" if status == 400 else "schema"
        content_type = request.headers.get("content-type", "")
        about_body = any(tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors())
        if about_body and "json" not in content_type.lower():
            detail += " (send the body as JSON with 'Content-Type: application/json')"
        if is_report(request):
            on_report_refused(code)
        return error_response(status, detail, code=code)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app, request.url.path))
        cause = exc.__cause__
        if exc.status_code == 400 and cause is not None:  # FastAPI's parser gave up on a body
            if is_report(request):
                on_report_refused("malformed")
            return error_response(400, f"malformed request body: {_unparsable(cause)}",
                                  headers, code="malformed")
        return error_response(exc.status_code, _http_detail(exc.detail), headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal server error ({type(exc).__name__})")
