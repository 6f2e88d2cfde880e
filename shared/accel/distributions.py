"""numpy's standard Laplace and normal draws compiled: the same numbers, without a Generator.

`fill_standard` is `Generator(PCG64).laplace(0.0, 1.0, n)` (numpy's `random_laplace`: one
double, one log) or `.standard_normal(n)` (numpy's 256-layer ziggurat, with numpy's tables as
numba ships them), drawn from the compiled PCG64 state of `privrl.accel.streams`. `seeded_rows`
seeds one stream per row and scales the draws as `privrl.privacy.noise.FloatNoise` does, so a
tree node's or a user's noise costs the draws alone, not a Python Generator per stream. Tests
compare every function with numpy's own over many seeds (tails included).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.np.random._constants import (  # numpy's ziggurat_constants.h, as numba copies it
    fi_double,
    ki_double,
    wi_double,
    ziggurat_nor_inv_r,
    ziggurat_nor_r,
)

from .streams import next_double, next_uint64, pcg64_seed, seed_words

GAUSSIAN, LAPLACE = 0, 1  # the `kind` of a standard draw
KINDS = {"gaussian": GAUSSIAN, "laplace": LAPLACE}
_KI, _WI, _FI = ki_double.copy(), wi_double.copy(), fi_double.copy()
_LOW52 = np.uint64(0x000FFFFFFFFFFFFF)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def standard_normal(state: np.ndarray) -> float:
    """numpy's `random_standard_normal` (ziggurat) on the PCG64 `state`."""
    while True:
        r = next_uint64(state)
        idx = r & np.uint64(0xFF)
        r >>= np.uint64(8)
        sign = r & np.uint64(1)
        rabs = (r >> np.uint64(1)) & _LOW52
        x = float(rabs) * _WI[idx]
        if sign:
            x = -x
        if rabs < _KI[idx]:
            return x
        if idx == 0:
            while True:
                xx = -ziggurat_nor_inv_r * np.log1p(-next_double(state))
                yy = -np.log1p(-next_double(state))
                if yy + yy > xx * xx:
                    if (rabs >> np.uint64(8)) & np.uint64(1):
                        return -(ziggurat_nor_r + xx)
                    return ziggurat_nor_r + xx
        elif (_FI[idx - 1] - _FI[idx]) * next_double(state) + _FI[idx] < np.exp(-0.5 * x * x):
            return x


@numba.njit(cache=True, nogil=True, error_model="numpy")
def standard_laplace(state: np.ndarray) -> float:
    """numpy's `random_laplace(loc=0, scale=1)` on the PCG64 `state` (a zero draw is redrawn)."""
    while True:
        u = next_double(state)
        if u >= 0.5:
            return 0.0 - 1.0 * np.log(2.0 - u - u)
        if u > 0.0:
            return 0.0 + 1.0 * np.log(u + u)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fill_standard(state: np.ndarray, kind: int, scale: float, out: np.ndarray) -> None:
    """`out` (flat) = standard draws of `kind` times `scale`, in numpy's order."""
    for i in range(out.shape[0]):
        x = standard_normal(state) if kind == GAUSSIAN else standard_laplace(state)
        out[i] = x * scale


@numba.njit(cache=True, nogil=True, error_model="numpy")
def seeded_rows(entropy: np.ndarray, entropy_len: np.ndarray, spawn: np.ndarray, kind: int,
                scale: float, out: np.ndarray) -> None:
    """out[r] (flat rows) = draws of `kind` times `scale` from generator(seed_r, *spawn), where
    seed_r's words are entropy[r, :entropy_len[r]]: one seeded stream per row."""
    words = np.empty(8, np.uint32)
    state = np.empty(4, np.uint64)
    for r in range(out.shape[0]):
        seed_words(entropy[r, : entropy_len[r]], spawn, words)
        pcg64_seed(words, state)
        fill_standard(state, kind, scale, out[r])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def user_draws(entropy: np.ndarray, entropy_len: np.ndarray, user_key: np.uint32, k0: int,
               kind: int, scales: np.ndarray, sizes: np.ndarray, u_out: np.ndarray,
               noise_out: np.ndarray) -> None:
    """What user r draws in episode k0 + i, in the order it draws it, from its one stream
    generator(seed_r, "user", k0 + i): u_out[i, r] uniforms (its rollout), then noise_out[i, r]
    = each family's standard draws of `kind` times scales[f], sizes[f] entries after another."""
    spawn = np.empty(2, np.uint32)
    spawn[0] = user_key
    words = np.empty(8, np.uint32)
    state = np.empty(4, np.uint64)
    for i in range(u_out.shape[0]):
        spawn[1] = np.uint32(k0 + i)
        for r in range(u_out.shape[1]):
            seed_words(entropy[r, : entropy_len[r]], spawn, words)
            pcg64_seed(words, state)
            for j in range(u_out.shape[2]):
                u_out[i, r, j] = next_double(state)
            start = 0
            for f in range(sizes.shape[0]):
                fill_standard(state, kind, scales[f], noise_out[i, r, start : start + sizes[f]])
                start += sizes[f]
