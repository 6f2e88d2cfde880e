"""The episode-replay attack on LDP users, for tests: a server (here a rewriting proxy in front of
an honest one) that hands every claim the same episode index, and a deliberately vulnerable user
that keys its local noise on that index (the flaw of issue 40: the noise generator re-created
from the user's seed and a server-chosen index). `privrl audit proxy` and `privrl audit server`
must catch it, and pass privrl's own users (`privrl.client.users.play`) behind the same proxy.

    python -m support.replay_attack --listen PORT --upstream URL --episode 7
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import uvicorn
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy.grid import bernoulli_rewards
from privrl.privacy.privatizers import randomize_locally
from privrl.protocol import PolicyPayload
from privrl.seeding import generator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HOP = {"host", "content-length", "connection", "transfer-encoding", "content-encoding"}


def rewrite_ticket(body: bytes, episode: int) -> bytes:
    """A claim's answer with its episode index replaced (anything else unchanged)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if isinstance(doc, dict) and "episode" in doc:
        doc["episode"] = episode
    return json.dumps(doc).encode()


def vulnerable_report(ticket: dict[str, Any], config: RunConfig, world: Any, client_seed: int,
                      nonce: int) -> tuple[dict[str, Any], tuple[list[int], list[int]]]:
    """What a vulnerable LDP user posts for `ticket` (the flaw of issue 40: its noise generator
    is re-created from its seed and the server's episode index, so a server that repeats the
    index gets the same noise again), and its true (states, actions). Its trajectory comes from
    its own stream (`nonce`: a number it never reuses), so the reports differ by their data."""
    algorithm = bind(config)
    calibration = algorithm.calibration()
    message = PolicyPayload.model_validate(ticket["policy"]).message()
    rng = generator(client_seed, "replay-test", "play", nonce)
    played = algorithm.play(world, message, [rng])
    if calibration.integer and algorithm.integer_rewards:
        played = bernoulli_rewards(played, [rng])
    stats = algorithm.user_statistics(played, message)
    noise = generator(client_seed, "replay-test", "episode", int(ticket["episode"]))
    noisy = randomize_locally(stats, calibration, [noise])
    body = {"kind": "noisy", "ticket": ticket["ticket"],
            "arrays": {name: np.asarray(arr[0]).ravel().tolist() for name, arr in noisy.items()}}
    return body, (played.states[0].tolist(), played.actions[0].tolist())


def replaying_app(upstream: str, episode: int) -> Starlette:
    """A reverse proxy to `upstream` that rewrites every claim's episode index to `episode`."""
    state: dict[str, httpx.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(base_url=upstream, timeout=60) as client:
            state["client"] = client
            yield

    async def forward(request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        target = path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        resp = await state["client"].request(request.method, target, headers=headers,
                                             content=body)
        content = resp.content
        if request.method == "POST" and path.endswith("/claims") and resp.status_code == 200:
            content = rewrite_ticket(content, episode)
        out = {k: v for k, v in resp.headers.items() if k.lower() not in HOP}
        return Response(content, status_code=resp.status_code, headers=out)

    return Starlette(routes=[Route("/{path:path}", forward,
                                   methods=["GET", "POST", "PUT", "DELETE"])],
                     lifespan=lifespan)


def main() -> None:
    """Serve the replaying proxy until stopped."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--episode", type=int, default=7)
    args = parser.parse_args()
    uvicorn.run(replaying_app(args.upstream, args.episode), host="127.0.0.1", port=args.listen,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
