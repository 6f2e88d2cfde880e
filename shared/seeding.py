"""Seeded randomness along stable paths: one `numpy.random.Generator` per (seed, role, index).

Every draw in privrl comes from `generator(seed, *path)`. Paths are counter-like, so a restarted
process rebuilds exactly the same streams (a released noise value is never re-drawn differently).

Seeds are secrets. Whoever knows the seed behind published noise can recompute that noise with
this open library and subtract it. The server's seed (central noise) stays inside the server;
a user's seed (rollout, local noise) stays inside the user's process. When nobody passes one,
`secret_seed()` draws it from the operating system's CSPRNG; fixed seeds are for reproducible
simulation only.
"""

from __future__ import annotations

import functools
import secrets
import sys
import zlib

import numpy as np
from numpy.random.bit_generator import ISeedSequence
from privrl import accel

PathPart = int | str
_STREAMS = "privrl.accel.streams"


SEED_BITS = 128  # a guessed seed must be as unlikely as a guessed key


def secret_seed() -> int:
    """A fresh seed from the OS CSPRNG (`secrets`), for noise that must stay unpredictable."""
    return secrets.randbits(SEED_BITS)


def derived_seed(seed: int, *path: PathPart) -> int:
    """An independent 128-bit seed below `seed` (e.g. one reproducible seed -> server and users)."""
    words = seed_sequence(seed, *path).generate_state(SEED_BITS // 32, dtype=np.uint32)
    return int.from_bytes(words.astype("<u4").tobytes(), "little")


@functools.lru_cache(maxsize=1024)
def _text_key(part: str) -> int:
    """A string path component's stable CRC32 (a run's few names, hashed once)."""
    return zlib.crc32(part.encode())


def _key(part: PathPart) -> int:
    """Map a path component to a non-negative int (strings by a stable CRC32)."""
    if isinstance(part, str):
        return _text_key(part)
    if part < 0:
        raise ValueError(f"seed path components must be non-negative, got {part}")
    return int(part)


def seed_sequence(seed: int, *path: PathPart) -> np.random.SeedSequence:
    """The SeedSequence at `path` below `seed` (independent of how many siblings exist)."""
    return np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(_key(p) for p in path))


def words(value: int) -> list[int]:
    """A non-negative int as little-endian uint32 words, as numpy's SeedSequence coerces it."""
    out = [value & 0xFFFFFFFF]
    value >>= 32
    while value:
        out.append(value & 0xFFFFFFFF)
        value >>= 32
    return out


def spawn_words(*path: PathPart) -> np.ndarray:
    """The spawn-key words of `seed_sequence(seed, *path)` (any seed), as a uint32 array."""
    spawn: list[int] = []
    for part in path:
        key = _key(part)
        if key <= 0xFFFFFFFF:  # one word: the usual case (names, levels, indices)
            spawn.append(key)
        else:
            spawn.extend(words(key))
    return np.array(spawn, np.uint32)


def path_words(seed: int, *path: PathPart) -> tuple[np.ndarray, np.ndarray]:
    """(entropy words, spawn-key words) of `seed_sequence(seed, *path)`, as uint32 arrays."""
    if seed < 0:
        raise ValueError(f"seeds must be non-negative, got {seed}")
    entropy = np.array(words(int(seed)), np.uint32)
    entropy.flags.writeable = False  # as entropy_rows': one compiled specialization for both
    return entropy, spawn_words(*path)


@functools.lru_cache(maxsize=64)
def entropy_rows(seeds: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each seed's entropy words zero-padded into rows (R, W), and how many words each has:
    how the compiled streams (`privrl.accel`) take a batch of seeds."""
    rows = [path_words(seed)[0] for seed in seeds]
    out = np.zeros((len(seeds), max(len(w) for w in rows)), np.uint32)
    for r, w in enumerate(rows):
        out[r, : len(w)] = w
    out.flags.writeable = False
    return out, np.array([len(w) for w in rows], np.int64)


class CompiledSeedSequence(ISeedSequence):
    """`seed_sequence(seed, *path)`'s PCG64 seed words, hashed by the compiled SeedSequence
    (`privrl.accel.streams`, checked against numpy's in the tests): a PCG64 built from it is in
    exactly the state numpy's own SeedSequence gives, for a fifth of the cost."""

    __slots__ = ("_words",)

    def __init__(self, seed: int, *path: PathPart) -> None:
        from privrl.accel.streams import seed_words

        self._words = np.empty(8, np.uint32)
        seed_words(*path_words(seed, *path), self._words)

    def generate_state(self, n_words: int, dtype: type = np.uint32) -> np.ndarray:
        """The 4 uint64 (8 uint32) words PCG64 asks for; nothing else is needed."""
        wide = np.dtype(dtype) == np.uint64
        if n_words * (2 if wide else 1) != 8:
            raise ValueError("CompiledSeedSequence only seeds PCG64 (8 uint32 words)")
        return self._words.view("<u8") if wide else self._words.copy()


def generator(seed: int, *path: PathPart) -> np.random.Generator:
    """A fresh PCG64 generator for `path` below `seed`; same arguments, same stream.

    Built with the compiled SeedSequence when `privrl.accel` is on and its kernels are already
    loaded in this process (a planner or the fused loop loaded them): a short-lived process
    that only rolls out a few episodes does not pay numba's import for it.
    """
    if accel.enabled() and _STREAMS in sys.modules:
        return np.random.Generator(np.random.PCG64(CompiledSeedSequence(seed, *path)))
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *path)))


def user_generator(client_seed: int, episode: int) -> np.random.Generator:
    """The one stream a simulated user draws from (rollout, then local randomizer).

    Derived from the *client's* seed and the episode index only, never from anything the server
    sends: a server that knew a user's noise could subtract it.
    """
    return generator(client_seed, "user", episode)
