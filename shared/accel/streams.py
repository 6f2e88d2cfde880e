"""numpy's SeedSequence and PCG64 compiled: the same streams, without building Python objects.

`seed_words` is `np.random.SeedSequence(entropy, spawn_key=...).generate_state(n, uint32)` and
`pcg64_seed` / `fill_uniform` are `PCG64(that seed sequence).random(n)` (XSL-RR on a 128-bit LCG,
doubles from the top 53 bits), written with 32/64-bit integer arithmetic; tests compare them
with numpy's own for many seeds and paths. Inputs are little-endian uint32 words, as numpy
coerces Python ints (`privrl.seeding` makes them).
"""

from __future__ import annotations

import numba
import numpy as np

from . import drop_stale_cache

M32 = np.uint64(0xFFFFFFFF)
S16 = np.uint64(16)
S32 = np.uint64(32)
S64_PARTS = np.uint64(1)
INIT_A, MULT_A = np.uint64(0x43B0D7E5), np.uint64(0x931E8875)
INIT_B, MULT_B = np.uint64(0x8B51F9DD), np.uint64(0x58F38DED)
MIX_L, MIX_R = np.uint64(0xCA01F9DD), np.uint64(0x4973F715)
POOL = 4
PCG_MULT_HI = np.uint64(2549297995355413924)
PCG_MULT_LO = np.uint64(4865540595714422341)
TO_DOUBLE = 1.0 / 9007199254740992.0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _hashmix(value: np.uint64, hash_const: np.uint64) -> tuple[np.uint64, np.uint64]:
    """SeedSequence's hashmix on 32-bit words: (the hash, the next hash constant)."""
    value = (value ^ hash_const) & M32
    hash_const = (hash_const * MULT_A) & M32
    value = (value * hash_const) & M32
    return value ^ (value >> S16), hash_const


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _mix(x: np.uint64, y: np.uint64) -> np.uint64:
    """SeedSequence's mix of two 32-bit words."""
    result = ((MIX_L * x) - (MIX_R * y)) & M32
    return result ^ (result >> S16)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _word(entropy: np.ndarray, spawn: np.ndarray, n_run: int, i: int) -> np.uint64:
    """Word i of the entropy run (zero-padded to n_run words) followed by the spawn key."""
    if i < entropy.shape[0]:
        return np.uint64(entropy[i])
    if i < n_run:
        return np.uint64(0)
    return np.uint64(spawn[i - n_run])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def seed_words(entropy: np.ndarray, spawn: np.ndarray, out: np.ndarray) -> None:
    """SeedSequence(entropy, spawn_key).generate_state(len(out), uint32) into `out` (uint32, at
    least POOL words). Allocates nothing: out[:POOL] holds the pool until the words are drawn
    (pool words are 32-bit), which matters at two seedings per episode."""
    n_run = entropy.shape[0]
    if spawn.shape[0] > 0 and n_run < POOL:
        n_run = POOL
    n_all = n_run + spawn.shape[0]
    hash_const = INIT_A
    for i in range(POOL):
        value, hash_const = _hashmix(_word(entropy, spawn, n_run, i) if i < n_all
                                     else np.uint64(0), hash_const)
        out[i] = np.uint32(value)
    for i_src in range(POOL):
        for i_dst in range(POOL):
            if i_src != i_dst:
                value, hash_const = _hashmix(np.uint64(out[i_src]), hash_const)
                out[i_dst] = np.uint32(_mix(np.uint64(out[i_dst]), value))
    for i_src in range(POOL, n_all):
        for i_dst in range(POOL):
            value, hash_const = _hashmix(_word(entropy, spawn, n_run, i_src), hash_const)
            out[i_dst] = np.uint32(_mix(np.uint64(out[i_dst]), value))
    pool = (np.uint64(out[0]), np.uint64(out[1]), np.uint64(out[2]), np.uint64(out[3]))
    const = INIT_B
    for i in range(out.shape[0]):
        value = (pool[i % POOL] ^ const) & M32
        const = (const * MULT_B) & M32
        value = (value * const) & M32
        out[i] = np.uint32(value ^ (value >> S16))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _mulhi(a: np.uint64, b: np.uint64) -> np.uint64:
    """The high 64 bits of the 128-bit product a * b."""
    a_lo, a_hi, b_lo, b_hi = a & M32, a >> S32, b & M32, b >> S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    carry = ((p0 >> S32) + (p1 & M32) + (p2 & M32)) >> S32
    return p3 + (p1 >> S32) + (p2 >> S32) + carry


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _step(state: np.ndarray) -> None:
    """state = state * MULT + inc (mod 2^128); state = [hi, lo, inc_hi, inc_lo]."""
    hi, lo = state[0], state[1]
    new_hi = _mulhi(lo, PCG_MULT_LO) + hi * PCG_MULT_LO + lo * PCG_MULT_HI
    new_lo = lo * PCG_MULT_LO
    out_lo = new_lo + state[3]
    carry = np.uint64(1) if out_lo < new_lo else np.uint64(0)
    state[0] = new_hi + state[2] + carry
    state[1] = out_lo


@numba.njit(cache=True, nogil=True, error_model="numpy")
def pcg64_seed(words: np.ndarray, state: np.ndarray) -> None:
    """PCG64's state from generate_state(4, uint64) given as 8 uint32 words (little-endian)."""
    seed_hi = np.uint64(words[0]) | (np.uint64(words[1]) << S32)
    seed_lo = np.uint64(words[2]) | (np.uint64(words[3]) << S32)
    inc_hi = np.uint64(words[4]) | (np.uint64(words[5]) << S32)
    inc_lo = np.uint64(words[6]) | (np.uint64(words[7]) << S32)
    state[0], state[1] = np.uint64(0), np.uint64(0)
    state[2] = (inc_hi << np.uint64(1)) | (inc_lo >> np.uint64(63))
    state[3] = (inc_lo << np.uint64(1)) | np.uint64(1)
    _step(state)
    lo = state[1] + seed_lo
    carry = np.uint64(1) if lo < state[1] else np.uint64(0)
    state[0] = state[0] + seed_hi + carry
    state[1] = lo
    _step(state)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def next_uint64(state: np.ndarray) -> np.uint64:
    """PCG64's next 64-bit output: step the LCG, then XSL-RR."""
    _step(state)
    hi, lo = state[0], state[1]
    x = hi ^ lo
    rot = hi >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def next_double(state: np.ndarray) -> float:
    """PCG64's next double in [0, 1): the top 53 bits of the next output."""
    return float(next_uint64(state) >> np.uint64(11)) * TO_DOUBLE


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fill_uniform(state: np.ndarray, out: np.ndarray) -> None:
    """Generator(PCG64).random(out.shape) into `out` (any shape, C order)."""
    flat = out.reshape(-1)
    for i in range(flat.shape[0]):
        flat[i] = next_double(state)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def seeded_uniforms(entropy: np.ndarray, spawn: np.ndarray, out: np.ndarray) -> None:
    """generator(entropy, *spawn).random(out.shape) into `out`: seeding and drawing in one call."""
    words = np.empty(8, np.uint32)
    seed_words(entropy, spawn, words)
    state = np.empty(4, np.uint64)
    pcg64_seed(words, state)
    fill_uniform(state, out)


drop_stale_cache(fill_uniform)  # before any kernel of this package is loaded from the cache
