"""Bounded public work: /regret refuses an oversized world before building it, the caches are
bounded in bytes and build a key once at a time, metric labels come from closed sets."""

from __future__ import annotations

import inspect
import threading
import time
import tracemalloc

import pytest
from privrl.server.cache import ByteCache
from privrl.server.routes import regret
from support.server import Apps, create, spec

TAXI = "gymnasium:Taxi-v4"


def test_an_oversized_world_is_refused_before_it_is_built(apps: Apps) -> None:
    client = apps()
    run_id = create(client, spec(horizon=100))
    built = regret._WORLDS.builds
    tracemalloc.start()
    try:
        resp = client.get(f"/v1/runs/{run_id}/regret", params={"world": TAXI})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert resp.status_code == 422, resp.text
    assert resp.json()["code"] == "world"
    assert "(500, 6)" in resp.json()["detail"] and "PRIVRL_MAX_CELLS" in resp.json()["detail"]
    assert regret._WORLDS.builds == built  # no (100, 500, 6, 500) world was built
    assert peak < 100 * 2**20  # the probe's stationary table, not H times it (1.2 GB)


def test_a_world_of_another_shape_is_refused_and_not_kept(apps: Apps) -> None:
    client = apps()
    run_id = create(client, spec(horizon=7))  # S = 4, A = 2, H = 7 (no other test's world)
    resp = client.get(f"/v1/runs/{run_id}/regret", params={"world": "riverswim"})  # S = 6
    assert resp.status_code == 422 and resp.json()["code"] == "world", resp.text
    assert "(6, 2)" in resp.json()["detail"]
    assert ("riverswim", 7) not in regret._WORLDS
    other = create(client, spec(n_states=6))  # the world kept for a run of its shape ...
    assert client.get(f"/v1/runs/{other}/regret", params={"world": "riverswim"}).is_success
    assert ("riverswim", 5) in regret._WORLDS
    resp = client.get(f"/v1/runs/{create(client, spec())}/regret",  # ... is refused to this one
                      params={"world": "riverswim"})
    assert resp.status_code == 422 and "(6, 2)" in resp.json()["detail"], resp.text


def test_the_matching_world_is_built_once_and_answers(apps: Apps) -> None:
    client = apps()
    run_id = create(client, spec(n_states=6))
    first = client.get(f"/v1/runs/{run_id}/regret", params={"world": "riverswim"})
    builds = regret._WORLDS.builds
    again = client.get(f"/v1/runs/{run_id}/regret", params={"world": "riverswim"})
    assert first.status_code == 200 and again.json() == first.json()
    assert regret._WORLDS.builds == builds  # served from the cache


def test_concurrent_misses_of_one_key_build_once() -> None:
    cache: ByteCache[str, bytes] = ByteCache(1000, len)
    started = threading.Event()

    def build() -> bytes:
        started.set()
        time.sleep(0.2)  # long enough for every other thread to miss while it runs
        return b"x" * 10

    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", build)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.builds == 1 and results == [b"x" * 10] * 8


def test_a_failed_build_is_not_kept_and_a_waiter_builds_again() -> None:
    cache: ByteCache[str, bytes] = ByteCache(1000, len)
    calls = []

    def build() -> bytes:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first build fails")
        return b"ok"

    with pytest.raises(ValueError):
        cache.get("k", build)
    assert len(cache) == 0 and cache.get("k", build) == b"ok" and len(calls) == 2


def test_the_cache_is_bounded_in_bytes() -> None:
    cache: ByteCache[int, bytes] = ByteCache(100, len)
    for key in range(10):
        cache.get(key, lambda: b"x" * 30)
    assert cache.bytes <= 100 and len(cache) == 3
    assert cache.get(9, lambda: b"") == b"x" * 30  # the newest stayed
    cache.get(99, lambda: b"y" * 500)  # larger than the bound: answered, not kept
    assert cache.get(99, lambda: b"z") == b"z"
    assert cache.bytes <= 100


@pytest.mark.slow  # a long test: 2,000 requests
def test_made_up_methods_and_paths_do_not_grow_the_metrics(apps: Apps) -> None:
    client = apps()
    client.request("BREW", "/v1/runs")
    client.get("/no/such/path/1")
    before = len(client.get("/metrics").content)
    for i in range(2000):
        client.request(f"M{i}", "/v1/runs" if i % 2 else f"/nowhere/{i}")
    text = client.get("/metrics").text
    assert len(text.encode()) - before < 20_000
    assert 'method="other"' in text and 'route="unmatched"' in text
    assert "M1999" not in text and "/nowhere/" not in text


def test_metrics_render_off_the_event_loop() -> None:
    from privrl.server.routes import ops

    assert not inspect.iscoroutinefunction(ops.metrics)  # a sync route: FastAPI's thread pool
