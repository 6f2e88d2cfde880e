"""Python's cycle collector, timed: `GcPauses` keeps each collection's duration per generation
for `/metrics` (privrl_gc_pause_seconds). A collection stops the event loop, `/healthz` included.
"""

from __future__ import annotations

import gc
import itertools
import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

PAUSE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
GENERATIONS = 3


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
