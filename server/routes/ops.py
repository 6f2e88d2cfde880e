"""Operations: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from privrl.protocol import Health, Readiness
from privrl.server.deps import metrics_of, run_table_of
from privrl.server.runs import RunTable
from privrl.server.service import in_thread
from prometheus_client import CONTENT_TYPE_LATEST

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """The process is up and answering."""
    return Health()


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Runs are still being rebuilt"}},
    summary="Readiness",
)
async def readyz(request: Request) -> Response:
    """200 once the store is open and every run has been rebuilt from it, else 503; 503 too
    while a run is held because its store went back or its high-water mark is lost (until an
    admin continues or stops it), and while writes to the store fail (after a failed one, each
    call probes with a write)."""
    table = run_table_of(request)
    broken = f"; {len(table.failed)} run(s) could not be rebuilt" if table.failed else ""
    held = "".join(f"; {h.reason}" for h in table.held.values())
    failing = await in_thread(writes_fail, table)
    if failing:
        broken += f"; writes to the store fail ({failing})"
    ready = table.ready and not table.held and not failing
    body = Readiness(
        ready=ready,
        runs=len(table.runs),
        detail=(
            f"rebuilding runs failed: {table.rebuild_error}"
            if table.rebuild_error
            else ("ready" if ready else "not ready" if table.ready
                  else "rebuilding runs from the store") + broken + held
        ),
    )
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


def writes_fail(table: RunTable) -> str | None:
    """Why writes to the store fail, if the last one failed and a probe write fails too."""
    store = table.store
    if store.failing is None:
        return None
    try:
        store.probe()
        table.highwater.save()
    except Exception as exc:
        if store.failing is None:  # the database took it; the mark's folder did not
            store.failing = f"the high-water mark: {type(exc).__name__}: {exc}"
        return store.failing
    store.failing = None
    return None


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
    summary="Prometheus metrics",
)
def metrics(request: Request) -> Response:
    """Reports accepted/refused, claims, policy versions, epsilon spent, request latency
    (rendered in a worker thread: a sync route, off the event loop)."""
    return Response(metrics_of(request).render(), media_type=CONTENT_TYPE_LATEST)
