"""What every route needs: the registry, the metrics, and a locked call into one hosted run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
from fastapi import Request
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.metrics import Metrics
from privrl.server.registry import Registry
from privrl.server.settings import Settings

T = TypeVar("T")


def registry_of(request: Request) -> Registry:
    """The app's run registry."""
    return request.app.state.registry


def metrics_of(request: Request) -> Metrics:
    """The app's metrics."""
    return request.app.state.metrics


def settings_of(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


def ensure_alive(hosted: HostedRun) -> None:
    """Refuse when the run was deleted while the request waited for its lock."""
    if hosted.deleted:
        raise Refusal(404, "deleted", f"run {hosted.id} was deleted")


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """Run blocking work (numpy, SQLite) in a worker thread; cancellation waits for it to end."""
    return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=False)


async def locked(hosted: HostedRun, fn: Callable[..., T], *args: object) -> T:
    """Call `fn(*args)` in a worker thread while holding the run's lock (one writer per run)."""
    async with hosted.lock:
        ensure_alive(hosted)
        return await in_thread(fn, *args)
