"""A deliberately leaky server for the audit tests (never imported by privrl itself).

Loaded into a real server process with PRIVRL_PLUGINS=support.leaky_plugin (tests/ on
PYTHONPATH), it adds one public route to that process's router before the app includes it:
GET /v1/runs/{run_id}/build, which shows the run's secret noise seed under an innocent name.
Nothing in the server's code changes; the bug is the kind a well-meant debugging route
introduces, and `privrl audit server` must find it.
"""

from __future__ import annotations

from fastapi import Request
from privrl.server.deps import run_table_of
from privrl.server.routes import public


@public.router.get("/{run_id}/build", summary="Build information of a run")
async def build_info(run_id: str, request: Request) -> dict:
    """Looks harmless; publishes the run's noise seed as a 'build id'."""
    hosted = run_table_of(request).get(run_id)
    return {"run_id": run_id, "build": {"id": hosted.run.seeds[0], "version": "0.2.0"}}
