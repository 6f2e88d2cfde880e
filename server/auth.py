"""Who is asking: the admin (a bearer token from PRIVRL_ADMIN_TOKEN, compared in constant time)
and the source of a claim (a user credential, or the client's address)."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from privrl.server.errors import Refusal
from privrl.server.ops.credentials import credential_key, verify
from privrl.server.settings import Settings

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="The server's admin token (environment variable PRIVRL_ADMIN_TOKEN)",
)


async def require_admin(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Pass only with the right admin token (401 missing, 403 wrong, 503 not configured).
    Never blocks, so async: FastAPI calls it on the event loop, not in a worker thread."""
    settings: Settings = request.app.state.settings
    if settings.admin_token is None:
        raise Refusal(
            503,
            "no_admin_token",
            "admin routes are disabled: the server was started without PRIVRL_ADMIN_TOKEN",
        )
    if credentials is None:
        raise Refusal(
            401,
            "no_token",
            "missing admin token: send the header 'Authorization: Bearer <PRIVRL_ADMIN_TOKEN>'",
            {"WWW-Authenticate": "Bearer"},
        )
    expected = settings.admin_token.get_secret_value().encode()
    if not secrets.compare_digest(credentials.credentials.encode(), expected):
        raise Refusal(403, "bad_token", "wrong admin token", {"WWW-Authenticate": "Bearer"})


user_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="UserCredential",
    description="A user credential of the run (runs created with ?credentials=true only; the"
    " admin issues them: POST /v1/runs/{id}/credentials)",
)


async def claim_source(
    run_id: str,
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(user_bearer)],
) -> str:
    """Who asks for a claim: its credential's id when the run requires credentials (401 none,
    403 forged or another run's), else its network address. Async like `require_admin`: a
    worker-thread hop per claim cost more than the check itself."""
    hosted = request.app.state.run_table.get(run_id)
    if hosted.row.credentials:
        token = credentials.credentials if credentials is not None else None
        return "credential:" + verify(credential_key(request.app.state.settings), run_id, token)
    return "address:" + (request.client.host if request.client is not None else "unknown")
