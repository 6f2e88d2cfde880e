"""Cost of a discrete Gaussian draw: the inverse-CDF table against the former rejection sampler.

    python scripts/discrete_sampler_cost.py [--rounds 15] [--calls 200]

For each sigma and size, times `calls` calls of each sampler, the two interleaved in every round
(the order alternating), and prints the median over rounds of ns per accepted draw and the
median of the per-round ratios (this machine drifts minute to minute, so only paired figures
are compared). The rejection sampler (CKS Algorithm 3, what every sigma used before the table)
is the library's own, which it keeps above `TABLE_CAP`. Also prints the time to build each
table.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from privrl.privacy.discrete import (
    TABLE_CAP,
    discrete_gaussian,
    gaussian_table,
    rejection_gaussian,
)

SIGMAS = (0.5, 3.0, 100.0, 1500.0, TABLE_CAP)
SIZES = (2_000, 20_000)


def ns_per_draw(draw: Callable[[np.random.Generator, float, int], np.ndarray], sigma: float,
                size: int, calls: int, seed: int) -> float:
    """ns per value of `calls` calls of draw(rng, sigma, size) from one seeded generator."""
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(calls):
        draw(rng, sigma, size)
    return 1e9 * (time.perf_counter() - start) / (calls * size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    for sigma in SIGMAS:
        start = time.perf_counter()
        table = gaussian_table.__wrapped__(sigma)
        build = 1e3 * (time.perf_counter() - start)
        gaussian_table(sigma)  # cached for the timing below
        print(f"sigma {sigma:g}: table of {2 * table.radius + 1} atoms, "
              f"{(table.thresholds.nbytes + table.guide.nbytes) / 1e3:.0f} kB, "
              f"built in {build:.1f} ms")
    print(f"{'sigma':>7} {'size':>6} {'rejection ns':>13} {'table ns':>9} {'ratio':>6}")
    for sigma in SIGMAS:
        for size in SIZES:
            calls = max(1, args.calls * 2_000 // size)
            old, new, ratio = [], [], []
            for r in range(args.rounds):
                pair = [(rejection_gaussian, old), (discrete_gaussian, new)]
                for draw, out in pair if r % 2 else pair[::-1]:
                    out.append(ns_per_draw(draw, sigma, size, calls, r))
                ratio.append(old[-1] / new[-1])
            print(f"{sigma:>7g} {size:>6} {statistics.median(old):>13.1f} "
                  f"{statistics.median(new):>9.1f} {statistics.median(ratio):>6.2f}")


if __name__ == "__main__":
    main()
