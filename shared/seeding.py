"""Seeded randomness along stable paths: one `numpy.random.Generator` per (seed, role, index).

Every draw in privrl comes from `generator(seed, *path)`. Paths are counter-like, so a restarted
process rebuilds exactly the same streams (a released noise value is never re-drawn differently).
"""

from __future__ import annotations

import zlib

import numpy as np

PathPart = int | str


def _key(part: PathPart) -> int:
    """Map a path component to a non-negative int (strings by a stable CRC32)."""
    if isinstance(part, str):
        return zlib.crc32(part.encode())
    if part < 0:
        raise ValueError(f"seed path components must be non-negative, got {part}")
    return int(part)


def seed_sequence(seed: int, *path: PathPart) -> np.random.SeedSequence:
    """The SeedSequence at `path` below `seed` (independent of how many siblings exist)."""
    return np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(_key(p) for p in path))


def generator(seed: int, *path: PathPart) -> np.random.Generator:
    """A fresh PCG64 generator for `path` below `seed`; same arguments, same stream."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *path)))


def user_generator(client_seed: int, episode: int) -> np.random.Generator:
    """The one stream a simulated user draws from (rollout, then local randomizer).

    Derived from the *client's* seed and the episode index only, never from anything the server
    sends: a server that knew a user's noise could subtract it.
    """
    return generator(client_seed, "user", episode)
