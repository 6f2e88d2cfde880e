"""The FastAPI dependencies of the routes, as `Annotated` types: what a route needs from the app
(its run table, service, settings, metrics) and who asks (a claim's source)."""

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


def service_of(request: Request) -> Service:
    """The app's claim and report service."""
    return request.app.state.service


def metrics_of(request: Request) -> Metrics:
    """The app's metrics."""
    return request.app.state.metrics


def settings_of(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


Table = Annotated[RunTable, Depends(run_table_of)]
Runs = Annotated[Service, Depends(service_of)]
AppMetrics = Annotated[Metrics, Depends(metrics_of)]
AppSettings = Annotated[Settings, Depends(settings_of)]
Source = Annotated[str, Depends(claim_source)]
