"""Server CPU per episode, in one process:
`python scripts/load/handler_cpu.py jdp|ldp [USERS] [N] [STATES]`.

USERS concurrent users (default 16) claim, play and report N episodes (default 1000) of the
bench's run (RiverSwim H = 20 with STATES states, default its 6: S x A x S = 72 cells; 60 states
make 100 times as many; PRIVRL_AB_NOISE=float: float noise) against an app served in process
(httpx's ASGI transport, a temporary database, the grouped-commit writer on). Prints the
process CPU per episode minus the users' own play (thread CPU), and the thread CPU per episode
of the server's main steps where this version of the package has them. Run it with another
PYTHONPATH (see ab_servers.py) to compare versions.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx

TOKEN = "t" * 32
NOISE_ENV = "PRIVRL_AB_NOISE"  # the run's noise backend (unset: the version's default)
STEPS = [  # (module, qualified name): sync functions timed where they exist
    ("privrl.server.hosted", "HostedRun.claim"),
    ("privrl.server.hosted", "HostedRun.report"),
    ("privrl.run", "Run.ingest_trajectories"),
    ("privrl.run", "Run.ingest_noisy"),
    ("privrl.privacy.tree", "TreeCounter.add"),
    ("privrl.privacy.tree", "TreeCounter._draw"),
    ("privrl.server.hosted", "HostedRun.capture"),
    ("privrl.server.hosted", "HostedRun.info"),
    ("privrl.server.hosted", "HostedRun._board_arrays"),
    ("privrl.server.writer", "Writer._commit"),
]
SPENT: dict[str, list[float]] = {}


def timed(module: str, name: str) -> None:
    """Accumulate the calling thread's CPU time in `module`.`name` (if it exists) in SPENT."""
    try:
        owner: Any = importlib.import_module(module)
    except ImportError:
        return
    *path, attr = name.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return
    fn = getattr(owner, attr, None)
    if fn is None or asyncio.iscoroutinefunction(fn):
        return

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            entry = SPENT.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += time.thread_time() - start

    setattr(owner, attr, wrapper)


async def episodes(client: httpx.AsyncClient, base: str, play: Callable[[bytes], bytes],
                   users: int, count: int) -> int:
    """`count` claims by `users` concurrent users, each reported; the episodes reported."""
    left, done = [count], [0]

    async def user() -> None:
        while left[0] > 0:
            left[0] -= 1
            resp = await client.post(base + "/claims?wait=2", content=b"{}",
                                     headers={"Content-Type": "application/json"})
            if resp.status_code != 200:
                continue
            body = play(resp.content)
            resp = await client.post(base + "/reports", content=body,
                                     headers={"Content-Type": "application/json"})
            assert resp.status_code == 200, resp.text
            done[0] += 1

    await asyncio.gather(*(user() for _ in range(users)))
    return done[0]


def user_state(play: Callable[..., Any]) -> Any:
    """The simulated user's state where this version's `play` takes one, else its seed."""
    if "state" not in inspect.signature(play).parameters:
        return 7
    from privrl.client.user_state import UserState

    return UserState(7, None)


async def main(privacy: str, users: int, count: int, states: int) -> None:
    """Serve the app in process, warm it up (100 episodes), then measure `count` episodes."""
    from privrl.client.load.bench import bench_config
    from privrl.client.users import UserContext
    from privrl.client.users import play as play_episode
    from privrl.protocol import RunInfo, Ticket
    from privrl.server.app import create_app
    from privrl.server.settings import Settings
    from privrl.worlds.tabular import riverswim

    played = [0.0]
    app = create_app(Settings(db=os.path.join(tempfile.mkdtemp(), "handler_cpu.db")))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://inproc") as client:
            while (await client.get("/readyz")).status_code != 200:
                await asyncio.sleep(0.1)
            world = riverswim(20, states)
            config = bench_config(privacy, 10.0).model_copy(update={"n_states": world.S})
            if os.environ.get(NOISE_ENV):  # this version's noise backend, as ab_servers.py
                config = config.model_copy(update={"noise": os.environ[NOISE_ENV]})
            resp = await client.post("/v1/runs", json=config.model_dump(mode="json"),
                                     headers={"Authorization": f"Bearer {TOKEN}"})
            assert resp.status_code == 201, resp.text
            info = RunInfo.model_validate_json(resp.content)
            context = UserContext.create(info, world)

            state = user_state(play_episode)

            def play(ticket: bytes) -> bytes:
                start = time.thread_time()
                _, body = play_episode(context, Ticket.model_validate_json(ticket), state)
                played[0] += time.thread_time() - start
                return body

            base = f"/v1/runs/{info.id}"
            await episodes(client, base, play, users, 100)
            SPENT.clear()
            played[0] = 0.0
            cpu = time.process_time()
            n = await episodes(client, base, play, users, count)
            cpu = time.process_time() - cpu
    print(f"{privacy}, {states} states: {n} episodes, server CPU"
          f" {1e3 * (cpu - played[0]) / n:.3f} ms/episode (process CPU minus the users' play)")
    for name, (calls, seconds) in SPENT.items():
        print(f"  {name:28s} {calls:6d} calls {1e3 * seconds / n:7.3f} ms/episode")


if __name__ == "__main__":
    os.environ["PRIVRL_ADMIN_TOKEN"] = TOKEN
    for module, name in STEPS:
        timed(module, name)
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 16,
                     int(sys.argv[3]) if len(sys.argv) > 3 else 1000,
                     int(sys.argv[4]) if len(sys.argv) > 4 else 6))
