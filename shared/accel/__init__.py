"""Optional compiled kernels (numba): one switch for the whole package.

Every kernel here has a pure-numpy twin where it is used, and both give the same numbers (the
tests run both). The compiled path is on when numba imports and `PRIVRL_NUMBA` is not "0";
kernels compile on first use with `cache=True`, so later processes load them from numba's cache
(next to this package when it is writable, else numba's per-user cache dir, or
`NUMBA_CACHE_DIR`). Nothing here imports numba until a kernel is first needed.
"""

from __future__ import annotations

import functools
import importlib.util
import os

ENV_SWITCH = "PRIVRL_NUMBA"


@functools.cache
def _numba_installed() -> bool:
    """Whether numba can be imported (looked up once, without importing it)."""
    return importlib.util.find_spec("numba") is not None


def enabled() -> bool:
    """Whether the compiled path is used: numba installed and PRIVRL_NUMBA not set to 0."""
    return os.environ.get(ENV_SWITCH, "1") != "0" and _numba_installed()
