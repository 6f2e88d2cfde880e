"""The FastAPI application: `create_app(settings)` wires store, run table, metrics and routes.

The HTTP layer only moves validated messages; the algorithm lives in `privrl.run.Run`. Runs are
rebuilt from the store in a background thread at startup: /healthz answers at once, /readyz and
the run routes answer 503 until every run is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from privrl import accel, algorithms
from privrl.protocol import API_VERSION
from privrl.server.admission import InFlight, ReadSlots
from privrl.server.errors import install_error_handlers
from privrl.server.limits import BodyLimit, Limit
from privrl.server.metrics import LatencyMiddleware, Metrics
from privrl.server.openapi import install_openapi
from privrl.server.ops import apidocs
from privrl.server.ops.gc_pauses import GcPauses
from privrl.server.ops.highwater import HighWater
from privrl.server.routes import cohorts, dashboard, episodes, ops, public, regret, runs, trust
from privrl.server.runs import RunTable
from privrl.server.service import Service
from privrl.server.settings import Settings
from privrl.server.store import Store
from privrl.server.writer import Writer
from starlette.types import Scope

log = logging.getLogger("privrl.server")

DESCRIPTION = """\
Billboard server of privrl: hosts differentially private episodic RL runs.

Users claim an episode (`POST /v1/runs/{id}/claims`: episode index, single-use ticket, the
current policy and, in LDP runs, the local randomizer's parameters), roll it out in their own
world and report it (`POST /v1/runs/{id}/reports`). JDP / non-private runs take the raw
trajectory (the server is the trusted curator and only publishes privatized statistics); LDP
runs take only locally randomized arrays. Everything published (billboard, policies, ledger) is
post-processing of privatized statistics.

**Slots and sequential mode.** Episode k is the claim counter. A claim is refused with 409
(`code` "full", with `Retry-After`) while reported + outstanding claims = K, and with 409 (`code`
"busy") in a *sequential* run while another claim is outstanding; `?wait=SECONDS` makes the claim
wait for a slot instead. A run is sequential when created with `?sequential=true`, or by default
when the server runs with `--sequential` (PRIVRL_SEQUENTIAL). Claims expire after the claim
timeout; an expired claim frees its slot and its report is refused with 410 (`code` "expired")
unless it *arrived* in time.

**Overload is answered, not queued.** Admission control: a run keeps a window of outstanding
claims, open at first, half as wide after a report that arrives later than a fraction of the
claim timeout after its claim or a lapsed claim, one wider for every timely report
(PRIVRL_QUEUE_FRACTION, between PRIVRL_MIN_OUTSTANDING and PRIVRL_MAX_OUTSTANDING); beyond that
a claim waits for a slot
(`?wait=`, at most PRIVRL_MAX_WAITING claims per run) or is answered 429 (`code` "admission")
with `Retry-After`. Beyond PRIVRL_MAX_IN_FLIGHT claims (twice as
many reports) in flight at once the server answers 503 (`code` "overloaded") with `Retry-After`.
After the K-th report, claims and reports get 410 (`code` "finished").

**One client cannot hoard a run.** Outstanding claims are also counted per source: the user
credential a claim presents when the run requires credentials (created with
`?credentials=true`; the admin issues them, `POST /v1/runs/{id}/credentials`), else the client's
address. A source holding as many as it may (PRIVRL_MAX_CLAIMS_PER_CREDENTIAL /
PRIVRL_MAX_CLAIMS_PER_ADDRESS, one less for every claim it let lapse, one more for every timely
report) is answered 429 (`code` "source") with `Retry-After`; its lapses narrow its own limit,
not the run's window.

**Reads never wait for the run.** The public views (run, billboard, policy, ledger, policy log,
regret) answer from a snapshot of the run published after each commit, without the run's lock.
A client address has at most PRIVRL_MAX_READS_PER_ADDRESS public reads answered at once and
PRIVRL_MAX_READS_PER_SECOND a second on average; the others wait their turn. The policy log is
paged: `GET /v1/runs/{id}/policies?after=VERSION&limit=N` (`next_after` is the next page's cursor).

**Errors** always have the body `{"detail": "...", "code": "..."}`; `detail` says what is wrong.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    """A server app for `settings` (default: from PRIVRL_* environment variables)."""
    settings = settings if settings is not None else Settings()
    algorithms.load_plugins(settings.plugins)
    metrics = Metrics()
    in_flight = InFlight(settings.max_in_flight)
    gc_pauses = GcPauses()
    metrics.registry.register(gc_pauses)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(settings.db, synchronous=settings.db_synchronous,
                      exclusive=settings.db_exclusive)
        highwater = (HighWater.beside(store.path, store.identity) if settings.highwater is None
                     else HighWater(settings.highwater, store.identity))
        table = RunTable(
            store, settings.run_limits(), settings.max_cells, settings.max_body_bytes, highwater
        )
        writer = Writer(store, on_commit=metrics.committed, highwater=highwater)
        writer.start()
        metrics.watch_runs(lambda: list(table.runs.values()))
        app.state.store = store
        app.state.run_table = table
        app.state.writer = writer
        app.state.service = Service(table, writer, metrics, in_flight, settings.max_claim_wait)
        log.info("store %s open; rebuilding runs", settings.db)
        if settings.admin_token is None:
            log.warning("PRIVRL_ADMIN_TOKEN is not set: admin routes answer 503")
        async def rebuild() -> None:
            try:  # kernels first (compiled on a cold cache): not ready until they are
                await anyio.to_thread.run_sync(accel.load)
                await anyio.to_thread.run_sync(table.rebuild_all)
            except Exception as exc:
                log.exception("rebuilding runs from the store failed")
                table.rebuild_error = f"{type(exc).__name__}: {exc}"
                return
            log.info(
                "ready: %d run(s) rebuilt, %d failed, %d held (store behind what was published)",
                len(table.runs), len(table.failed), len(table.held),
            )

        task = asyncio.create_task(rebuild())
        gc_pauses.start()
        try:
            yield
        finally:
            gc_pauses.stop()
            table.stopping = True
            await task
            await writer.close()
        store.close()
        highwater.close()

    app = FastAPI(
        title="privrl server",
        version=API_VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from `apidocs`: shipped files, no CDN
        redoc_url=None,
        # FastAPI's native OpenTelemetry asks for the global providers on every request; privrl
        # exports its own Prometheus metrics (/metrics), so it is off (an older FastAPI ignores
        # the keyword)
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.read_slots = ReadSlots(settings.max_reads_per_address,
                                     settings.max_reads_per_second)
    for module in (runs, episodes, public, regret, trust, cohorts):  # v1: unknown query refused
        app.include_router(module.router)
    app.include_router(ops.router)  # probes and scrapers: lenient
    app.include_router(dashboard.router)  # the page at / (public routes only)
    app.include_router(apidocs.router)  # /docs and /redoc

    def report_refused(reason: str) -> None:
        metrics.reports_refused.labels(reason).inc()

    def body_refused(scope: Scope) -> None:
        if scope.get("method") == "POST" and str(scope.get("path", "")).endswith("/reports"):
            report_refused("too_large")

    def body_limit(scope: Scope) -> Limit | None:
        """A report's own cap: its run's largest legitimate report (a hosted run's)."""
        parts = str(scope.get("path", "")).split("/")  # "", "v1", "runs", id, "reports"
        if scope.get("method") != "POST" or len(parts) != 5 or parts[4] != "reports":
            return None
        table: RunTable | None = getattr(app.state, "run_table", None)
        hosted = table.runs.get(parts[3]) if table is not None else None
        if hosted is None or parts[:3] != ["", "v1", "runs"]:
            return None
        return hosted.max_report_bytes, (f"a report of run {hosted.id} (its size is a function"
                                         " of the run's public config)")

    install_error_handlers(app, report_refused)
    install_openapi(app, settings)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, timeout=settings.body_timeout,
        max_buffered=settings.max_body_buffer_bytes, limit_of=body_limit,
        on_refused=body_refused,
    )
    app.add_middleware(LatencyMiddleware, metrics=metrics)
    return app
