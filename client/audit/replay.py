"""`privrl audit replay-proxy`: the episode-replay attack on LDP users, as an attacker's tool.

A reverse proxy in front of an honest server that rewrites the episode index of every claim's
answer to one value (issue 40): a user whose local noise were keyed by the index the server
sends would draw the same noise for every report, and the difference of two reports would be
the exact difference of their data. privrl's users randomize at nonces of their own and refuse
an index they have already played, so behind this proxy their reports stay independent. Put
`privrl audit proxy` between the users and this one to measure it
(`scripts/attacks/episode_replay.py`).
"""

from __future__ import annotations

import json

import httpx
import uvicorn
from privrl.client.audit.proxy import forwarding_app
from starlette.applications import Starlette
from starlette.requests import Request


def rewrite_ticket(body: bytes, episode: int) -> bytes:
    """A claim's answer with its episode index replaced (anything else unchanged)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if isinstance(doc, dict) and "episode" in doc:
        doc["episode"] = episode
    return json.dumps(doc).encode()


def replaying_app(upstream: str, episode: int) -> Starlette:
    """A reverse proxy to `upstream` that rewrites every claim's episode index to `episode`."""

    async def rewrite(client: httpx.AsyncClient, request: Request, body: bytes,
                      resp: httpx.Response) -> bytes:
        """A granted claim's ticket with the episode index replaced; anything else as is."""
        if (request.method == "POST" and request.url.path.endswith("/claims")
                and resp.status_code == 200):
            return rewrite_ticket(resp.content, episode)
        return resp.content

    return forwarding_app(upstream, rewrite)


def serve_replay_proxy(host: str, port: int, upstream: str, episode: int) -> None:
    """Serve the rewriting proxy until SIGINT/SIGTERM."""
    uvicorn.run(replaying_app(upstream, episode), host=host, port=port, log_level="warning",
                access_log=False, server_header=False, proxy_headers=False)
