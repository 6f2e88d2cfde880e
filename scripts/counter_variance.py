"""Largest release variance of the continual counters at equal rho: closed form and measured.

    python scripts/counter_variance.py [--items 1024] [--rho 0.5] [--entries 4000] [--json OUT]

Each counter is calibrated to rho-zCDP over all its releases for one user changing one item by
1 (the binary tree: sigma^2 = levels / (2 rho); the matrix counters: their encoder column norm),
and its release error at the t of largest variance is measured over `entries` independent
entries (integer noise, the library's own counters).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
from privrl.privacy.discrete import discrete_gaussian_variance
from privrl.privacy.matrix_counter import (
    MatrixCounter,
    encoder_column_norm,
    matrix_noise,
    matrix_release_variance,
    tree_column_norm,
)
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.schedules import Batches, EveryEpisode, Geometric
from privrl.privacy.tree import TreeCounter, release_variance
from results_table import save_table

COLUMNS = (("counter", ""), ("t of largest variance", ","), ("variance, closed form", ".3f"),
           ("variance, measured", ".3f"), ("standard error", ".3f"),
           ("÷ square-root counter's", ".2f"))


def measured(counter, items: int, at: int, entries: int) -> float:
    """Empirical variance of the release error after `at` of `items` zero items."""
    for _ in range(at):
        counter.add(np.zeros((1, entries), np.int64))
    return float(counter.noise_sum().var())


def main(argv: list[str]) -> int:
    """Print one line per counter, then the release counts of the schedules at K = 50,000."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=1024)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--entries", type=int, default=4000)
    p.add_argument("--json", help="also save the result as a table here (for the docs)")
    args = p.parse_args(argv)
    t_max, rho, n = args.items, args.rho, args.entries
    sigma2 = tree_column_norm(t_max) ** 2 / (2 * rho)
    rows = []
    for smooth in (False, True):
        worst = max(range(1, t_max + 1), key=lambda t, s=smooth: release_variance(t, s))
        sigma = math.sqrt(sigma2)
        tree = TreeCounter((n,), Gaussian(sigma), [1], "x", t_max, smooth=smooth)
        closed = discrete_gaussian_variance(sigma) * release_variance(worst, smooth)
        rows.append(("smoothed tree" if smooth else "binary tree", worst, closed,
                     measured(tree, t_max, worst, n)))
    for bands in (None, 64, 16):
        mech = matrix_noise(rho, 1.0, t_max, bands=bands)
        closed = discrete_gaussian_variance(mech.sigma) * matrix_release_variance(
            t_max, t_max, bands)
        ctr = MatrixCounter((n,), mech, [1], "x", t_max, bands)
        name = f"matrix ({bands} bands)" if bands else "matrix (square root)"
        rows.append((name, t_max, closed, measured(ctr, t_max, t_max, n)))
    full = rows[2][2]
    print(f"T = {t_max}, rho = {rho}, {n} entries; max release variance (closed, measured,"
          " ratio to the square-root counter)")
    for name, at, closed, got in rows:
        se = closed * math.sqrt(2 / n)
        print(f"  {name:22s} t={at:5d}  {closed:9.3f}  {got:9.3f} (+-{se:.3f})"
              f"  x{closed / full:.2f}")
    print(f"  sensitivity (column norm): tree sqrt({tree_column_norm(t_max) ** 2:.0f}),"
          f" square root {encoder_column_norm(t_max) / 2**16:.4f}")
    k = 50_000
    schedules = [(str(s), s.releases(k))
                 for s in (EveryEpisode(), Batches(100), Geometric(2.0), Geometric(1.1))]
    for schedule, releases in schedules:
        print(f"  K = {k}: {schedule} -> T = {releases}")
    if args.json:
        table = [[name, at, closed, got, closed * math.sqrt(2 / n), closed / full]
                 for name, at, closed, got in rows]
        save_table(args.json, COLUMNS, table, items=t_max, rho=rho, entries=n,
                   note=f"T = {t_max} releases, each counter calibrated to ρ = {rho:g} zCDP over"
                   f" all of them; measured over {n:,} independent entries.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
