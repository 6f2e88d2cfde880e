"""DP-UCBVI's compiled kernels (numba, `cache=True`), compiled in the calling process on first use.

numba keeps the machine code in its cache: next to this package when it is writable, else in
numba's per-user cache dir, or in NUMBA_CACHE_DIR. The first process on a machine compiles them
and says so on stderr in one line; later processes load them in well under a second.
`privrl warmup` (or `python -m privrl.accel`) compiles them ahead of time.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType


@functools.cache
def load() -> ModuleType:
    """`privrl.accel.kernels`, compiled (or loaded from numba's cache) once per process."""
    from privrl.accel import kernels as module

    compiled = [name for name in sorted(module.__all__)
                if sum(getattr(module, name).stats.cache_misses.values())]
    if compiled:  # timed by the module's own import, whoever imported it first
        print(f"privrl: compiled DP-UCBVI's kernels ({', '.join(sorted(compiled))}) in"
              f" {module.IMPORT_SECONDS:.1f} s; numba caches them for later processes",
              file=sys.stderr, flush=True)
    return module
