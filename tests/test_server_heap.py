"""The server's long-lived heap is frozen out of the cycle collector's scans (after start and
after each new run), and every collection's pause is exported on /metrics."""

from __future__ import annotations

import gc
import re

import pytest
from privrl.server.heap import GcPauses
from support.server import AUTH, Apps

SPEC = {"n_states": 6, "n_actions": 2, "horizon": 5, "episodes": 10, "privacy": "jdp",
        "epsilon": 1.0, "delta": 1e-5, "mechanism": "gaussian"}


def _pauses(text: str, generation: int) -> int:
    """privrl_gc_pause_seconds_count of one generation in a /metrics text."""
    found = re.search(rf'privrl_gc_pause_seconds_count{{generation="{generation}"}} (\S+)', text)
    assert found, text
    return int(float(found.group(1)))


def test_the_heap_is_frozen_after_start_and_after_a_new_run(apps: Apps) -> None:
    gc.unfreeze()
    try:
        client = apps(freeze_heap=True)
        at_start = gc.get_freeze_count()
        # everything alive at start is frozen: a full collection scans only what came after
        assert at_start > 10 * len(gc.get_objects()) and at_start > 20_000
        full = _pauses(client.get("/metrics").text, 2)
        assert full >= 1  # settle's own collection, timed
        resp = client.post("/v1/runs", json=SPEC, headers=AUTH)
        assert resp.status_code == 201, resp.text
        assert gc.get_freeze_count() > at_start  # the new run's objects too
        assert _pauses(client.get("/metrics").text, 2) > full
    finally:
        gc.unfreeze()  # the test process's heap is not a server's


def test_freezing_is_a_setting(apps: Apps) -> None:
    gc.unfreeze()
    client = apps(freeze_heap=False)
    resp = client.post("/v1/runs", json=SPEC, headers=AUTH)
    assert resp.status_code == 201, resp.text
    assert gc.get_freeze_count() == 0
    assert "privrl_gc_pause_seconds_bucket" in client.get("/metrics").text


def test_pauses_are_binned_by_their_first_edge_at_or_above(monkeypatch) -> None:
    """Each pause lands in the bucket of the first edge >= it (Prometheus' `le`), cumulative
    per generation, with the sum of the pauses."""
    from privrl.server import heap
    from prometheus_client import CollectorRegistry, generate_latest

    pauses = GcPauses()
    clock = iter([0.0, 0.001, 1.0, 1.0005, 2.0, 4.0, 5.0, 5.003])
    monkeypatch.setattr(heap.time, "perf_counter", lambda: next(clock))
    for generation in (2, 2, 2, 0):  # 1 ms (on an edge), 0.5 ms, 2 s (generation 2), 3 ms
        pauses._callback("start", {"generation": generation})
        pauses._callback("stop", {"generation": generation})
    registry = CollectorRegistry()
    registry.register(pauses)
    text = generate_latest(registry).decode()

    def value(sample: str) -> float:
        return float(re.search(re.escape(sample) + r" (\S+)", text).group(1))

    assert value('privrl_gc_pause_seconds_bucket{generation="2",le="0.001"}') == 2
    assert value('privrl_gc_pause_seconds_bucket{generation="2",le="1.0"}') == 2
    assert value('privrl_gc_pause_seconds_bucket{generation="2",le="+Inf"}') == 3
    assert value('privrl_gc_pause_seconds_sum{generation="2"}') == pytest.approx(2.0015)
    assert value('privrl_gc_pause_seconds_bucket{generation="0",le="0.001"}') == 0
    assert value('privrl_gc_pause_seconds_bucket{generation="0",le="0.005"}') == 1
    assert value('privrl_gc_pause_seconds_count{generation="1"}') == 0
