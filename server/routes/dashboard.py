"""The dashboard: one static page at `/` whose script reads the public API only.

The page, its script and its style sheet are files of the package (`server/dashboard/`),
served with a Content-Security-Policy that allows nothing but this server: no CDN, no inline
script, no other origin. The script polls the public read-only routes (runs, ledger, billboard,
regret in a public named world, metrics); a visitor sees nothing those routes do not show.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from privrl.server.errors import Refusal

router = APIRouter(include_in_schema=False)

DASHBOARD = Path(__file__).resolve().parents[1] / "dashboard"
ASSETS = {"app.js": "text/javascript", "style.css": "text/css", "favicon.svg": "image/svg+xml"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self';"
    " connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


@router.get("/")
async def page() -> FileResponse:
    """The dashboard page."""
    return FileResponse(DASHBOARD / "index.html", media_type="text/html", headers=HEADERS)


@router.get("/dashboard/{name}")
async def asset(name: str) -> FileResponse:
    """The dashboard's script, style sheet and icon (only these names: no path is joined)."""
    if name not in ASSETS:
        raise Refusal(404, "not_found", f"no dashboard file {name!r}")
    return FileResponse(DASHBOARD / name, media_type=ASSETS[name], headers=HEADERS)
