"""The server's heap and Python's cycle collector: what lives as long as the process is frozen
out of the collector's scans, and every collection's pause is measured.

A full collection scans every object the collector tracks and stops the event loop while it
does, `/healthz` included. A server with the compiled kernels loaded tracks about 160,000
objects once it is up (modules, the app, numba's typing tables, the rebuilt runs): a full
collection then took 65 ms idle on the 2-core test machine and 130-200 ms under 1,000 users.
Those objects live as long as the process, so `settle()` collects once and moves everything
alive into the permanent generation (`gc.freeze`); later collections scan only what came after.
`GcPauses` keeps each collection's duration per generation for `/metrics`.

numba's kernels load lazily, at a run's first plan and first report (no warm-up at start): the
settle after each run creation freezes what the run's first plan loaded; what its first report
loads stays outside the frozen heap until the next run is created.
"""

from __future__ import annotations

import gc
import itertools
import logging
import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("privrl.server")

PAUSE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
GENERATIONS = 3


def settle() -> None:
    """Collect once, then freeze every object still alive (the process's long-lived heap)."""
    gc.collect()
    gc.freeze()


class GcPauses(Collector):
    """Durations of the collector's pauses per generation, exported as the histogram
    privrl_gc_pause_seconds. The callback only adds to plain lists (it runs inside a
    collection, where taking a metric's lock could deadlock the thread that holds it)."""

    def __init__(self) -> None:
        self._started = 0.0
        self._counts = [[0] * (len(PAUSE_BUCKETS) + 1) for _ in range(GENERATIONS)]
        self._sums = [0.0] * GENERATIONS

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        """gc.callbacks hook: time from "start" to "stop", binned by generation."""
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info["generation"]
        self._counts[generation][bisect_left(PAUSE_BUCKETS, pause)] += 1  # first edge >= pause
        self._sums[generation] += pause

    def start(self) -> None:
        """Begin timing collections (this process's gc.callbacks)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        """Stop timing collections."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def collect(self) -> Iterator[Metric]:
        """One histogram per generation, cumulative buckets as Prometheus wants them."""
        family = HistogramMetricFamily(
            "privrl_gc_pause_seconds",
            "Pauses of Python's cycle collector (the event loop stops meanwhile), per"
            " generation",
            labels=["generation"],
        )
        for generation in range(GENERATIONS):
            cumulative = itertools.accumulate(self._counts[generation])
            buckets = list(zip((*map(str, PAUSE_BUCKETS), "+Inf"), cumulative, strict=True))
            family.add_metric([str(generation)], buckets, self._sums[generation])
        yield family
