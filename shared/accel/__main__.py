"""`python -m privrl.accel` (or `privrl warmup`): compile DP-UCBVI's kernels ahead of time, so
that later processes load them from numba's cache."""

from __future__ import annotations

import sys
import time

from privrl.accel import load


def main() -> int:
    """Compile (or load) every kernel in this process and say how long it took."""
    start = time.perf_counter()
    load()
    print(f"privrl.accel: kernels ready in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
