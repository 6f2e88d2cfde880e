"""Every pause of Python's cycle collector in the server's process is exported on /metrics."""

from __future__ import annotations

import gc
import re

import pytest
from privrl.server.ops.gc_pauses import GcPauses
from support.server import AUTH, Apps

SPEC = {"n_states": 6, "n_actions": 2, "horizon": 5, "episodes": 10, "privacy": "jdp",
        "epsilon": 1.0, "delta": 1e-5, "mechanism": "gaussian"}


def _pauses(text: str, generation: int) -> int:
    """privrl_gc_pause_seconds_count of one generation in a /metrics text."""
    found = re.search(rf'privrl_gc_pause_seconds_count{{generation="{generation}"}} (\S+)', text)
    assert found, text
    return int(float(found.group(1)))


def test_every_collection_pause_is_on_metrics(apps: Apps) -> None:
    client = apps()
    before = _pauses(client.get("/metrics").text, 2)
    resp = client.post("/v1/runs", json=SPEC, headers=AUTH)
    assert resp.status_code == 201, resp.text
    gc.collect()  # a full collection, timed by the app's gc callback
    assert _pauses(client.get("/metrics").text, 2) > before


def test_pauses_are_binned_by_their_first_edge_at_or_above(monkeypatch) -> None:
    """Each pause lands in the bucket of the first edge >= it (Prometheus' `le`), cumulative
    per generation, with the sum of the pauses."""
    from privrl.server.ops import gc_pauses
    from prometheus_client import CollectorRegistry, generate_latest

    pauses = GcPauses()
    clock = iter([0.0, 0.001, 1.0, 1.0005, 2.0, 4.0, 5.0, 5.003])
    monkeypatch.setattr(gc_pauses.time, "perf_counter", lambda: next(clock))
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
