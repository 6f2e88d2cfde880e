"""What the high-water mark adds to each grouped commit: one mark write against one COMMIT.

    python scripts/highwater_cost.py [DIR] [--writes 300]

Times `HighWater.advance` (three runs' marks, one fdatasync) and a one-row `Store.write_groups`
(synchronous=FULL) in a temporary folder under DIR (default: the current one, so the disk the
server would use), and prints the median and 90th percentile of each.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from privrl.server.ops.highwater import HighWater
from privrl.server.store import Store


def timed(fn: Callable[[int], None], n: int) -> str:
    """Median and p90 of n calls in ms."""
    took = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        took.append(time.perf_counter() - start)
    took.sort()
    return f"median {1e3 * statistics.median(took):.3f} ms, p90 {1e3 * took[int(0.9 * n)]:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default=".")
    parser.add_argument("--writes", type=int, default=300)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        highwater = HighWater.beside(folder / "x.db")
        mark = timed(lambda i: highwater.advance({f"run{j}": (0, i + 1) for j in range(3)}),
                     args.writes)
        highwater.close()
        store = Store(folder / "x.db")
        store.write_groups([[("CREATE TABLE t (x)", ())]])
        commit = timed(lambda i: store.write_groups([[("INSERT INTO t VALUES (?)", (i,))]]),
                       args.writes)
        store.close()
        print(f"mark write: {mark}\nstore COMMIT (FULL): {commit}")
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
