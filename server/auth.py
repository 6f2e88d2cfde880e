"""Admin authentication: a bearer token from PRIVRL_ADMIN_TOKEN, compared in constant time."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from privrl.server.errors import Refusal
from privrl.server.settings import Settings

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="The server's admin token (environment variable PRIVRL_ADMIN_TOKEN)",
)


def require_admin(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Pass only with the right admin token (401 missing, 403 wrong, 503 not configured)."""
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
