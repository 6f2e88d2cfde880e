"""/docs (Swagger UI) and /redoc (ReDoc) from files shipped in the package, no other origin.

The admin pastes the token into /docs: a script from a CDN would run with it. The scripts and
style sheet are the npm releases swagger-ui-dist 5.35.0 and redoc 2.5.4 (their licences beside
them in `server/ops/vendor/`), served from this server, and the pages carry a
Content-Security-Policy that allows no other origin.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from privrl.server.errors import Refusal

router = APIRouter(include_in_schema=False)

APIDOCS = Path(__file__).resolve().parent / "vendor"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
}
PREFIX = "/apidocs"
# the pages' own inline start-up script and styles; everything else from this server only
# (ReDoc runs its search in a blob: worker, Swagger UI shows data: images)
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline';"
    " style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self';"
    " worker-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def _openapi_url(request: Request) -> str:
    """The app's OpenAPI document path (under any root path)."""
    return request.scope.get("root_path", "") + (request.app.openapi_url or "/openapi.json")


def _asset(request: Request, name: str) -> str:
    """The path of one shipped asset on this server."""
    return f"{request.scope.get('root_path', '')}{PREFIX}/{name}"


@router.get("/docs")
async def swagger(request: Request) -> HTMLResponse:
    """Swagger UI of this server's OpenAPI document."""
    page = get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=_asset(request, "swagger-ui-bundle.js"),
        swagger_css_url=_asset(request, "swagger-ui.css"),
        swagger_favicon_url=f"{request.scope.get('root_path', '')}/dashboard/favicon.svg",
    )
    return HTMLResponse(page.body, headers=HEADERS)


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    """ReDoc of this server's OpenAPI document."""
    page = get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=_asset(request, "redoc.standalone.js"),
        redoc_favicon_url=f"{request.scope.get('root_path', '')}/dashboard/favicon.svg",
        with_google_fonts=False,
    )
    return HTMLResponse(page.body, headers=HEADERS)


@router.get(PREFIX + "/{name}")
async def asset(name: str) -> FileResponse:
    """A shipped script or style sheet (only these names: no path is joined)."""
    if name not in ASSETS:
        raise Refusal(404, "not_found", f"no API documentation file {name!r}")
    return FileResponse(APIDOCS / name, media_type=ASSETS[name],
                        headers={"X-Content-Type-Options": "nosniff",
                                 "Cache-Control": "public, max-age=86400"})
