"""A cache bounded in bytes whose concurrent misses of one key build the value once.

The public routes' caches (worlds, regrets) hold values whose size depends on the request: a
bound in entries bounds nothing. `ByteCache` evicts the least recently used values until the
total of their measured sizes fits, and a miss that finds another thread building the same key
waits for that build instead of starting its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ByteCache(Generic[K, V]):
    """Values by key, at most `max_bytes` of them by `size_of`, least recently used out first.

    A value larger than `max_bytes` is returned but not kept. Builds run in the calling
    thread (the routes call this from worker threads), one per key at a time."""

    def __init__(self, max_bytes: int, size_of: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self.size_of = size_of
        self._lock = threading.Lock()
        self._values: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._building: dict[K, threading.Lock] = {}
        self.bytes = 0
        self.builds = 0  # values built (for tests: concurrent misses of one key build once)

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The value of `key`, built by `build()` on a miss. A miss that finds the key being
        built waits for that build and looks again (if it failed, or its value was too large
        to keep, the waiter builds in turn: still one build of a key at a time)."""
        while True:
            with self._lock:
                hit = self._values.get(key)
                if hit is not None:
                    self._values.move_to_end(key)
                    return hit[0]
                building = self._building.get(key)
                if building is None:
                    building = self._building[key] = threading.Lock()
                    building.acquire()
                    break
            with building:  # released when that build has ended
                pass
        try:
            value = build()
            with self._lock:
                self.builds += 1
            self.put(key, value)
            return value
        finally:
            with self._lock:
                del self._building[key]
            building.release()

    def put(self, key: K, value: V) -> None:
        """Keep (or re-measure, after it grew) `value` under `key`, then evict down to the
        bound."""
        size = self.size_of(value)
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                return
            self._values[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._values.popitem(last=False)
                self.bytes -= dropped

    def __contains__(self, key: object) -> bool:
        """Whether a value is kept under `key`."""
        with self._lock:
            return key in self._values

    def __len__(self) -> int:
        """Values kept."""
        with self._lock:
            return len(self._values)
