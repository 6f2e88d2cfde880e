"""One run's users from P processes (`privrl users --processes P`), with an aggregated live
progress line.

Process i plays its share of the users (--users and --concurrency split evenly) with
`privrl.client.users.run_users` over a `BoundedTransport` of `connections` slots. A given seed
(reproducible simulation) is shared: user k plays from (seed, 'user', k) whichever process plays
episode k, the processes take their noise nonces from the seed's one counter
(`privrl.client.user_state`), and process i's own draws (retry jitter) come from
`derived_seed(seed, 'process', i)`. Without one, every process draws a seed of its own. The seed
reaches the children through multiprocessing's pipe, never a command line.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import queue
import sys
import threading
import time
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import httpx
from privrl.client.api import ApiError
from privrl.client.load.meter import ACKS, COUNTERS, ERRORS, REQUESTS, BoundedTransport, Meter
from privrl.client.users import Backoff, UserError, run_users
from privrl.seeding import derived_seed

POLL = 0.25  # seconds between looks at the children


@dataclass(frozen=True)
class Share:
    """What one process plays: its users, concurrency and connection slots."""

    index: int
    server: str
    run_id: str
    users: int | None  # None: until the run is finished
    concurrency: int
    connections: int
    seed: int | None  # None: each process draws its own from the OS CSPRNG
    mdp: Any
    backoff: Backoff
    duration: float | None  # seconds from the common start after which no episode starts
    mode: str = "episodes"  # or "healthz": GET /healthz in a loop for `duration` (the ceiling)
    credentials: tuple[str, ...] = ()  # user credentials its users present (runs needing them)


def split(total: int, parts: int) -> list[int]:
    """`total` spread over `parts` as evenly as possible (the first ones get one more)."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def shares(server: str, run_id: str, users: int | None, concurrency: int, processes: int,
           connections: int, seed: int | None, mdp: Any, backoff: Backoff,
           duration: float | None, mode: str = "episodes",
           credentials: tuple[str, ...] = ()) -> list[Share]:
    """The P shares of a swarm (never more processes than concurrent users)."""
    processes = min(processes, concurrency, users or concurrency)
    users_of = split(users, processes) if users is not None else [None] * processes
    def dealt(i: int) -> tuple[str, ...]:  # each process its own credentials, when enough
        return credentials[i::processes] if len(credentials) >= processes else credentials

    return [Share(i, server, run_id, n, c, min(connections, c), seed, mdp, backoff, duration,
                  mode, dealt(i))
            for i, (n, c) in enumerate(zip(users_of, split(concurrency, processes),
                                           strict=True))]


async def healthz(share: Share, transport: BoundedTransport, stop_at: float
                  ) -> dict[str, Any]:
    """`share.concurrency` loops of GET /healthz until `stop_at`: the trivial endpoint."""
    started = time.time()

    async def loop(http: httpx.AsyncClient) -> None:
        while time.time() < stop_at:
            try:
                await http.get("/healthz")
            except httpx.HTTPError:  # counted by the meter; the ceiling goes on
                await asyncio.sleep(0.01)

    async with httpx.AsyncClient(base_url=share.server, transport=transport, timeout=30) as http:
        await asyncio.gather(*(loop(http) for _ in range(share.concurrency)))
    return {"run_id": "", "reported": 0, "duplicates": 0, "refused": 0, "finished": False,
            "started_at": started, "ended_at": time.time(), "report_bytes_max": 0,
            "errors": []}


async def play_share(share: Share, live: MutableSequence[int] | None = None) -> dict[str, Any]:
    """Play one share in this process (from now on); its swarm summary, every request's timing
    and the CPU seconds this process spent."""
    meter = Meter(live=live, base=share.index * COUNTERS)
    transport = BoundedTransport(share.connections, meter, polls=share.concurrency)
    cpu = time.process_time()
    stop_at = None if share.duration is None else time.time() + share.duration
    if share.mode == "healthz":
        summary = await healthz(share, transport, stop_at or time.time())
    else:
        result = await run_users(
            share.server, share.run_id, share.users, share.concurrency, share.seed, share.mdp,
            backoff=share.backoff, progress=False, transport=transport, stop_at=stop_at,
            jitter_seed=(None if share.seed is None
                         else derived_seed(share.seed, "process", share.index)),
            credentials=share.credentials,
        )
        summary = result.summary()
    return {"summary": summary, "meter": meter.arrays(), "errors": dict(meter.errors),
            "cpu_seconds": time.process_time() - cpu}


def _child(share: Share, live: MutableSequence[int], out: Any, go: Any) -> None:
    """Entry point of a user process: say it is ready, wait until every process is, play the
    share, send back the result or one error line."""
    try:
        out.put(("ready", share.index, None))
        go.wait()
        out.put(("ok", share.index, asyncio.run(play_share(share, live))))
    except (UserError, ApiError) as exc:
        out.put(("error", share.index, str(exc)))
    except KeyboardInterrupt:
        out.put(("error", share.index, "interrupted"))
    except Exception as exc:  # noqa: BLE001 (one line to the parent beats a silent death)
        out.put(("error", share.index, f"{type(exc).__name__}: {exc}"))


class Progress(threading.Thread):
    """Prints the swarm's aggregated counters: one live line on a terminal, else a line every
    `every` seconds (for logs)."""

    def __init__(self, label: str, live: Sequence[int], total: int | None, every: float | None,
                 enabled: bool = True, stream: TextIO = sys.stderr) -> None:
        """`every` None: a live line on a terminal, only the last line elsewhere."""
        super().__init__(daemon=True)
        self.label, self.live, self.total, self.stream = label, live, total, stream
        self.tty = enabled and stream.isatty() and every is None
        self.every = None if not enabled else (0.5 if self.tty else every)
        self.enabled = enabled
        self.started, self.stopped = time.time(), threading.Event()

    def line(self) -> str:
        """The counters summed over processes, with rates since the start."""
        acks = sum(self.live[i + ACKS] for i in range(0, len(self.live), COUNTERS))
        reqs = sum(self.live[i + REQUESTS] for i in range(0, len(self.live), COUNTERS))
        errs = sum(self.live[i + ERRORS] for i in range(0, len(self.live), COUNTERS))
        elapsed = max(time.time() - self.started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        return (f"{self.label}: {acks}{of} acknowledged ({acks / elapsed:.1f} episodes/s), "
                f"{reqs} requests ({reqs / elapsed:.0f}/s), {errs} errors, {elapsed:.0f} s")

    def run(self) -> None:
        """Print until stopped."""
        while self.every is not None and not self.stopped.wait(self.every):
            end = "\r" if self.tty else "\n"
            print(self.line(), end=end, file=self.stream, flush=True)

    def stop(self) -> None:
        """Stop and print the last line."""
        self.stopped.set()
        self.join()
        if self.enabled:
            print(self.line(), file=self.stream, flush=True)


def run_swarm(parts: list[Share], label: str, total: int | None, *, progress: bool = True,
              progress_every: float | None = None) -> list[dict[str, Any]]:
    """Play every share (in this process when there is one, else one process each); the
    per-process results in order. The first failing process stops the others (UserError)."""
    ctx = mp.get_context("spawn")
    live = ctx.Array("q", COUNTERS * len(parts), lock=False)
    ticker = Progress(label, live, total, progress_every, enabled=progress)
    ticker.start()
    try:
        if len(parts) == 1:
            return [asyncio.run(play_share(parts[0], live))]
        return _run_children(ctx, parts, live)
    finally:
        ticker.stop()


def _run_children(ctx: Any, parts: list[Share], live: Any) -> list[dict[str, Any]]:
    """One spawned process per share; collect their results, stop them all on a failure."""
    out, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_child, args=(share, live, out, go),
                         name=f"privrl-users-{share.index}") for share in parts]
    results: dict[int, dict[str, Any]] = {}
    ready = 0
    try:
        for proc in procs:
            proc.start()
        while len(results) < len(procs):
            try:
                status, index, body = out.get(timeout=POLL)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise UserError(f"user process {dead[0].name} exited with code "
                                    f"{dead[0].exitcode} without a result") from None
                continue
            if status == "error":
                raise UserError(f"user process {index}: {body}")
            if status == "ready":
                ready += 1
                if ready == len(procs):  # a common start: spawning takes seconds
                    go.set()
                continue
            results[index] = body
        for proc in procs:
            proc.join(timeout=10)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    return [results[i] for i in range(len(procs))]
