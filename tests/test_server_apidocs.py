"""/docs and /redoc load their scripts and style sheets from this server only."""

from __future__ import annotations

import re

import pytest
from support.server import Apps

TAG_URL = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']", re.I)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_nothing_from_another_origin(apps: Apps, page: str) -> None:
    client = apps()
    resp = client.get(page)
    assert resp.status_code == 200
    urls = TAG_URL.findall(resp.text)
    assert any(u.endswith(".js") for u in urls), resp.text  # the page does load its script
    own = str(client.base_url)
    for url in urls:
        assert not re.match(r"(?i)^(https?:)?//", url) or url.startswith(own), url
    assert "fonts.googleapis" not in resp.text and "cdn." not in resp.text
    csp = resp.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "http" not in csp
    for url in urls:  # each one is served, with its type
        asset = client.get(url)
        assert asset.status_code == 200 and asset.content, url
    assert client.get("/openapi.json").json()["info"]["title"] == "privrl server"


def test_only_the_shipped_asset_names_are_served(apps: Apps) -> None:
    client = apps()
    assert client.get("/apidocs/LICENSE-redoc").status_code == 404
    assert client.get("/apidocs/..%2Fapp.py").status_code == 404
