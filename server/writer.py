"""Grouped commits: one writer task commits the claims and reports of all runs in batches.

A handler changes its run in memory under the run's lock, queues the rows that record the change
(`submit`) and, after releasing the lock, awaits the returned future: it resolves once those rows
are committed (durable), and only then is the answer sent. While one COMMIT runs, new groups
queue up; the next transaction takes all of them (up to `max_batch`), so one fsync serves many
acknowledgements. The rows are staged on the event loop (in SQLite's page cache: microseconds
each, and no GIL handoff per statement) and only the COMMIT, the fsync, runs in a worker
thread. Groups are committed in the order they were queued, so a run's rows reach the
disk in the order its memory changed; a run's `durable` future is its newest group's, and readers
await it before they answer, so nothing is published before the change behind it is on disk
(a restart could otherwise rebuild a different release with the same counter-based noise).

After each COMMIT the high-water mark (`privrl.server.ops.highwater`) is raised to every run's
newest committed (noise epoch, reports) and fsynced, in the same worker thread, before any
future resolves: nothing is answered or published beyond the mark.

If a transaction fails, every group in it and every group queued behind it fails: their runs are
marked stale (`HostedRun.stale`) before any future resolves, and rebuild from the store before
they serve anything again; their callers answer 503.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio.to_thread
from privrl.server.ops.highwater import HighWater
from privrl.server.store import Statement, Store

log = logging.getLogger("privrl.server")


@dataclass
class Group:
    """The rows of one change of one run, and who waits for them."""

    statements: Sequence[Statement]
    future: asyncio.Future[None]
    on_failure: Callable[[], None]
    mark: tuple[str, int, int] | None = None  # (run, noise epoch, reports) once committed


class Writer:
    """The single writer of a store: queue groups, commit them in batches, resolve futures."""

    def __init__(self, store: Store, max_batch: int = 512,
                 on_commit: Callable[[int], None] | None = None,
                 highwater: HighWater | None = None) -> None:
        """`on_commit(n)` is told the number of groups of every committed transaction;
        `highwater` is raised after each."""
        self.store = store
        self.highwater = highwater
        self.max_batch = max_batch
        self.on_commit = on_commit
        self.queue: list[Group] = []
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.closing = False
        self.batches = 0  # transactions committed (for tests and metrics)
        self.groups = 0  # groups committed

    def start(self) -> None:
        """Start the writer task (in the running event loop)."""
        self.task = asyncio.create_task(self._run())

    def submit(self, statements: Sequence[Statement], on_failure: Callable[[], None],
               mark: tuple[str, int, int] | None = None) -> asyncio.Future[None]:
        """Queue one group (`mark`: its run, noise epoch and reports once it is committed);
        the future resolves after its COMMIT (or fails with the error)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append(Group(statements, future, on_failure, mark))
        self.wake.set()
        return future

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.queue:
                batch, self.queue = self.queue[: self.max_batch], self.queue[self.max_batch:]
                try:
                    self.store.stage_groups([g.statements for g in batch])
                    await anyio.to_thread.run_sync(self._commit, batch, abandon_on_cancel=False)
                except Exception as exc:
                    log.exception("a grouped commit of %d writes failed", len(batch))
                    failed, self.queue = batch + self.queue, []
                    for group in failed:
                        group.on_failure()
                    for group in failed:
                        if not group.future.done():
                            group.future.set_exception(exc)
                    continue
                self.batches += 1
                self.groups += len(batch)
                if self.on_commit is not None:
                    self.on_commit(len(batch))
                for group in batch:
                    if not group.future.done():
                        group.future.set_result(None)
            if self.closing:
                return

    def _commit(self, batch: Sequence[Group]) -> None:
        """COMMIT the staged batch, then raise the high-water mark to it (a worker thread)."""
        self.store.commit()
        if self.highwater is not None:
            published = {g.mark[0]: (g.mark[1], g.mark[2]) for g in batch if g.mark is not None}
            if published:
                try:
                    self.highwater.advance(published)
                except OSError as exc:
                    self.store.failing = f"the high-water mark: {type(exc).__name__}: {exc}"
                    raise

    async def close(self) -> None:
        """Commit everything queued, then stop the task."""
        self.closing = True
        self.wake.set()
        if self.task is not None:
            await self.task
