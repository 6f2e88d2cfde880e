"""Small array helpers the kernels share."""

from __future__ import annotations

import numba
import numpy as np

from . import drop_stale_cache

# Zero as a numpy integer, for offsets and counters handed to another kernel: a literal 0 makes
# numba compile a second specialization of the callee (it keeps Literal[int](0) in jit-to-jit
# calls), which costs a cold start seconds.
START = np.int64(0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def copy_rows(src: np.ndarray, dst: np.ndarray) -> None:
    """dst[:] = src for 2-D arrays, as a loop: numba compiles a slice assignment with a shape
    check whose error-message formatting costs seconds of compilation."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


drop_stale_cache(copy_rows)  # before any kernel of this package is loaded from the cache
