"""Claims and reports of the hosted runs: the concurrency protocol, apart from HTTP.

One change of a run (a claim, a report) goes: take the run's lock (its asyncio condition, one
writer per run) -> `fresh` (refuse a deleted run, rebuild a stale one) -> the change itself
(`HostedRun.claim` / `HostedRun.report`, on the event loop for a small run, in a worker thread
for a large one) with the public snapshot captured after it -> queue its rows on the writer
(grouped commits, in order) -> release the lock -> wait until the rows are committed, and only
then answer; the snapshot is published when its rows are. A claim that finds no free slot may
wait for one (`?wait=`): a report frees one slot and wakes one waiter, and a waiter that gets
its ticket wakes the next while slots remain, so a report costs O(1) whatever the number of
waiting users.
"""

from __future__ import annotations

import asyncio
import time
from asyncio import Future
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
from privrl.protocol import Ack, Report, Ticket
from privrl.server.admission import InFlight
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.metrics import Metrics
from privrl.server.runs import RunTable
from privrl.server.snapshot import Snapshot
from privrl.server.store import Statement
from privrl.server.writer import Writer

T = TypeVar("T")

RETRYABLE = ("busy", "full", "admission")  # refusals a claim may wait out (?wait=)


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """Run blocking work (numpy, SQLite) in a worker thread; cancellation waits for it to end."""
    return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=False)


async def on_run(hosted: HostedRun, fn: Callable[..., T], *args: object) -> T:
    """Under the run's lock: call `fn(*args)` on the event loop for a small run (no thread hop,
    no GIL handoff), in a worker thread for a large one (the loop keeps answering meanwhile)."""
    if hosted.inline:
        return fn(*args)
    return await in_thread(fn, *args)


def ensure_alive(hosted: HostedRun) -> None:
    """Refuse when the run was deleted while the request waited for its lock."""
    if hosted.deleted:
        raise Refusal(404, "deleted", f"run {hosted.id} was deleted")


async def fresh(hosted: HostedRun) -> None:
    """Under the run's lock: refuse a deleted run, rebuild a stale one (after a failed write,
    once every write it queued has ended) before it serves anything."""
    ensure_alive(hosted)
    if not hosted.stale:
        return
    if hosted.durable is not None:
        await asyncio.wait([hosted.durable])
    hosted.durable = None  # it failed; what the store holds is durable
    try:
        await in_thread(hosted.rebuild)
    except Exception as exc:
        raise Refusal(503, "store", f"run {hosted.id} could not be rebuilt from the store;"
                      " retry") from exc


def changed(hosted: HostedRun, change: Callable[..., tuple[T, list[Statement]]], *args: object
            ) -> tuple[T, list[Statement], Snapshot | None]:
    """Under the run's lock: make a change (a claim, a report) and capture the public snapshot
    after it (None when nothing changed: no rows)."""
    result, rows = change(*args)
    return result, rows, hosted.capture(time.time()) if rows else None


async def durable(future: Future[None] | None) -> None:
    """After the lock: wait until a queued write is committed (503 when it failed)."""
    if future is None:
        return
    try:
        await asyncio.shield(future)
    except Exception as exc:
        raise Refusal(503, "store", "the server could not record this change; nothing was"
                      " counted, retry") from exc


class Service:
    """The claim and report operations of a server's runs (what the episode routes call)."""

    def __init__(self, table: RunTable, writer: Writer, metrics: Metrics, in_flight: InFlight,
                 max_claim_wait: float) -> None:
        self.table = table
        self.writer = writer
        self.metrics = metrics
        self.in_flight = in_flight
        self.max_claim_wait = max_claim_wait

    def record(self, hosted: HostedRun, rows: list[Statement], snapshot: Snapshot | None = None
               ) -> Future[None] | None:
        """Under the run's lock: queue the rows of its change; the future of its newest write.
        `snapshot` (the run after the change) is published once they are committed."""
        if rows:
            future = self.writer.submit(rows, hosted.mark_stale, hosted.published())
            hosted.durable = future
            if snapshot is not None:
                def publish(done: Future[None]) -> None:
                    if not done.cancelled() and done.exception() is None:
                        hosted.publish(snapshot)

                future.add_done_callback(publish)
        return hosted.durable

    def _enter(self, report: bool) -> None:
        """Take an in-flight place for a claim or a report (503 beyond the bound)."""
        try:
            self.in_flight.enter(report)
        except Refusal as exc:
            if not report:  # refused reports are counted by the error handler
                self.metrics.claims_refused.labels(exc.reason).inc()
            raise

    async def claim(self, run_id: str, source: str, wait: float) -> Ticket:
        """Hand out the next episode of `run_id` to `source`, waiting up to `wait` s for a
        slot; answered once its rows are committed."""
        hosted = self.table.get(run_id)
        try:  # a client at its own limit is refused before it waits for the run's lock
            hosted.sources.check(source, time.time())
        except Refusal as exc:
            self.metrics.claims_refused.labels(exc.reason).inc()
            raise
        self._enter(report=False)
        try:
            ticket, barrier = await self._claim(hosted, wait, source)
            await durable(barrier)
        finally:
            self.in_flight.leave()
        return ticket

    async def _claim(self, hosted: HostedRun, wait: float, source: str
                     ) -> tuple[Ticket, Future[None] | None]:
        """Admit a claim (waiting for a slot up to `wait` s, bounded per run) and hand it out."""
        deadline = time.monotonic() + min(wait, self.max_claim_wait)
        admission = hosted.admission
        async with hosted.slot_freed:
            while True:
                await fresh(hosted)
                now = time.time()
                try:
                    hosted.admit(now, source)
                    ticket, rows, snapshot = await on_run(hosted, changed, hosted, hosted.claim,
                                                          now, source)
                    break
                except Refusal as exc:
                    remaining = deadline - time.monotonic()
                    full = admission.waiting >= hosted.limits.max_waiting
                    if exc.reason not in RETRYABLE or remaining <= 0 or full:
                        self.metrics.claims_refused.labels(exc.reason).inc()
                        raise
                    lapse = hosted.next_expiry(time.time())
                    timeout = remaining if lapse is None else min(remaining, lapse + 0.005)
                    admission.waiting += 1
                    try:
                        await asyncio.wait_for(hosted.slot_freed.wait(), timeout)
                    except TimeoutError:
                        pass
                    finally:
                        admission.waiting -= 1
            if admission.waiting and not hosted.sequential:
                hosted.slot_freed.notify(1)
            barrier = self.record(hosted, rows, snapshot)
            self.metrics.of_run(hosted.id).claims.inc()
        return ticket, barrier

    async def report(self, run_id: str, report: Report, arrived: float) -> Ack:
        """Count one report of `run_id` (`arrived`: when it reached the server; lateness is
        judged by arrival, not by the turn in the queue); answered once it is committed."""
        hosted = self.table.get(run_id)
        self._enter(report=True)
        try:
            async with hosted.slot_freed:
                await fresh(hosted)
                ack, rows, snapshot = await on_run(hosted, changed, hosted, hosted.report,
                                                   report, arrived)
                barrier = self.record(hosted, rows, snapshot)
                counters = self.metrics.of_run(hosted.id)
                if ack.duplicate:
                    counters.reports_duplicate.inc()
                else:
                    counters.reports_accepted.inc()
                    if hosted.run.finished:  # every waiting claim learns it at once (410)
                        hosted.slot_freed.notify_all()
                    else:
                        hosted.slot_freed.notify(1)
            await durable(barrier)
            hosted.unsettled.pop(report.ticket, None)
        finally:
            self.in_flight.leave()
        return ack

    async def delete(self, run_id: str) -> None:
        """Delete a run: under its lock once its queued writes have ended (no row of it lands
        after the purge); a held or failed run directly. Waiting claims learn it (404)."""
        table = self.table
        if run_id in table.failed or run_id in table.held:
            await in_thread(table.delete, run_id)
        else:
            hosted = table.get(run_id)
            async with hosted.slot_freed:
                ensure_alive(hosted)
                if hosted.durable is not None:
                    await asyncio.wait([hosted.durable])
                await in_thread(table.delete, run_id)
                hosted.slot_freed.notify_all()
        self.metrics.forget_run(run_id)
