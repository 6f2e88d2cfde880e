"""The FastAPI dependencies of the routes, as `Annotated` types: what a route needs from the app
(its run table, service, settings, metrics) and who asks (a claim's source). The dependencies
are coroutines: FastAPI runs a plain function's dependency in a worker thread, a hop per
request that costs more than the lookup."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from privrl.server.auth import claim_source
from privrl.server.metrics import Metrics
from privrl.server.runs import RunTable
from privrl.server.service import Service
from privrl.server.settings import Settings


def run_table_of(request: Request) -> RunTable:
    """The app's run table."""
    return request.app.state.run_table


def metrics_of(request: Request) -> Metrics:
    """The app's metrics."""
    return request.app.state.metrics


def settings_of(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


async def _table(request: Request) -> RunTable:
    """The app's run table (a dependency)."""
    return run_table_of(request)


async def _service(request: Request) -> Service:
    """The app's claim and report service."""
    return request.app.state.service


async def _settings(request: Request) -> Settings:
    """The app's settings (a dependency)."""
    return settings_of(request)


Table = Annotated[RunTable, Depends(_table)]
Runs = Annotated[Service, Depends(_service)]
AppSettings = Annotated[Settings, Depends(_settings)]
Source = Annotated[str, Depends(claim_source)]
