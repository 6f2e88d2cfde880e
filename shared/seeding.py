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
import zlib
from collections.abc import Iterator, Sequence

import numpy as np

PathPart = int | str
STREAM_EPISODES = 1024  # episodes (or tree nodes) per stream of a role
SLOT = 2**64  # draws reserved for one slot of a stream: more than any user or node makes


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


def generator(seed: int, *path: PathPart) -> np.random.Generator:
    """A fresh PCG64 generator for `path` below `seed`; same arguments, same stream."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *path)))


def episode_rows(seed: int, role: PathPart | tuple[PathPart, ...], first: int, count: int,
                 width: int, out: np.ndarray | None = None) -> np.ndarray:
    """`width` uniforms per episode (count, width) for episodes first .. first + count - 1 of
    `role` (a path part or a path): episode k's row is the k % STREAM_EPISODES-th row of the
    stream generator(seed, *role, k // STREAM_EPISODES), so a block of episodes is drawn in bulk
    and one episode alone by advancing to its row (PCG64 draws one 64-bit word per uniform).
    `out`: a C-contiguous array of count * width floats to fill instead of a new one."""
    path = role if isinstance(role, tuple) else (role,)
    if out is not None and not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    out = np.empty((count, width)) if out is None else out.reshape(count, width)
    k, end = first, first + count
    while k < end:
        block, offset = divmod(k, STREAM_EPISODES)
        n = min(end - k, STREAM_EPISODES - offset)
        rng = generator(seed, *path, block)
        rng.bit_generator.advance(offset * width)
        rng.random(out=out[k - first : k - first + n])
        k += n
    return out


class SlotStream:
    """Numbered slots of SLOT draws below (seed, *path): slot i is the (i % STREAM_EPISODES)-th
    slot of generator(seed, *path, i // STREAM_EPISODES). Reaching another slot of the block
    used last costs a state copy and an advance, not a new generator."""

    def __init__(self, seed: int, *path: PathPart) -> None:
        self.seed, self.path = seed, path
        self._block = -1
        self._rng: np.random.Generator | None = None
        self._start: dict = {}

    def at(self, slot: int) -> np.random.Generator:
        """A generator at the start of `slot`: valid until the next call."""
        block, offset = divmod(slot, STREAM_EPISODES)
        rng = self._rng
        if rng is None or block != self._block:
            rng = self._rng = generator(self.seed, *self.path, block)
            self._start, self._block = rng.bit_generator.state, block
        bits = rng.bit_generator
        bits.state = self._start
        bits.advance(offset * SLOT)
        return rng


ROLLOUT = "user"  # a user's rollout draws: slot = the episode it plays (reproducible worlds)
LOCAL_NOISE = "local-noise"  # its local randomizer's draws: slot = a nonce it never reuses


def user_generator(client_seed: int, episode: int) -> np.random.Generator:
    """A simulated user's rollout stream in an episode (its world's draws, and the randomized
    rounding of its rewards): slot `episode` of `SlotStream(client_seed, ROLLOUT)`. Keyed by the
    episode so that whichever process plays episode k plays it alike; never its privacy noise."""
    return SlotStream(client_seed, ROLLOUT).at(episode)


def noise_generator(client_seed: int, nonce: int) -> np.random.Generator:
    """A user's local randomizer stream for its report number `nonce`: slot `nonce` of
    `SlotStream(client_seed, LOCAL_NOISE)`.

    Nothing the server sends keys it: the nonce is the user's own counter, which it never
    reuses (a server that could make a user repeat its noise could subtract it). An in-process
    user that plays every episode in order has counted exactly the episode index.
    """
    return SlotStream(client_seed, LOCAL_NOISE).at(nonce)


def user_uniforms(client_seed: int, first: int, count: int, width: int,
                  out: np.ndarray | None = None) -> np.ndarray:
    """The first `width` uniforms (count, width) of `user_generator(client_seed, k)` for
    k = first .. first + count - 1, drawn in bulk: one stream per block, advanced from slot
    to slot (PCG64 draws one 64-bit word per uniform). `out`: a C-contiguous (count, width)
    array to fill instead of a new one."""
    out = np.empty((count, width)) if out is None else out
    k, end = first, first + count
    while k < end:
        block, offset = divmod(k, STREAM_EPISODES)
        rng = generator(client_seed, ROLLOUT, block)
        bits = rng.bit_generator
        bits.advance(offset * SLOT)
        for _ in range(min(end - k, STREAM_EPISODES - offset)):
            rng.random(out=out[k - first])
            bits.advance(SLOT - width)
            k += 1
    return out


class UserStreams:
    """The rollout (`user_generator`) and local-noise (`noise_generator`) streams of every user
    in `client_seeds`, each user's block streams kept (`SlotStream`): what an in-process loop
    hands its users episode after episode."""

    def __init__(self, client_seeds: Sequence[int]) -> None:
        self.client_seeds = tuple(int(s) for s in client_seeds)
        self._rollouts = [SlotStream(s, ROLLOUT) for s in self.client_seeds]
        self._noise = [SlotStream(s, LOCAL_NOISE) for s in self.client_seeds]

    def at(self, episode: int) -> list[np.random.Generator]:
        """Every user's rollout generator of `episode` (valid until the next call)."""
        return [slots.at(episode) for slots in self._rollouts]

    def noise(self, nonces: Sequence[int]) -> list[np.random.Generator]:
        """User r's local-noise generator of its nonce `nonces[r]` (valid until the next call)."""
        return [slots.at(n) for slots, n in zip(self._noise, nonces, strict=True)]


def slot_generators(client_seed: int, role: str, first: int, count: int
                    ) -> Iterator[np.random.Generator]:
    """Slots first .. first + count - 1 of `SlotStream(client_seed, role)` (`ROLLOUT`: episodes,
    `LOCAL_NOISE`: nonces), each valid until the next is taken."""
    slots = SlotStream(client_seed, role)
    for k in range(first, first + count):
        yield slots.at(k)
