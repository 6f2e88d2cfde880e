"""The server's long-lived heap is frozen out of the cycle collector's scans (after start and
after each new run), and every collection's pause is exported on /metrics."""

from __future__ import annotations

import gc
import re

from server_support import AUTH, Apps

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
