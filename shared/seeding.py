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

import secrets
import zlib

import numpy as np

PathPart = int | str


SEED_BITS = 128  # a guessed seed must be as unlikely as a guessed key


def secret_seed() -> int:
    """A fresh seed from the OS CSPRNG (`secrets`), for noise that must stay unpredictable."""
    return secrets.randbits(SEED_BITS)


def derived_seed(seed: int, *path: PathPart) -> int:
    """An independent 128-bit seed below `seed` (e.g. one reproducible seed -> server and users)."""
    words = seed_sequence(seed, *path).generate_state(SEED_BITS // 32, dtype=np.uint32)
    return int.from_bytes(words.astype("<u4").tobytes(), "little")


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
