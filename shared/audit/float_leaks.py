"""Floating-point leaks an outsider proves from released values, a public scale and the open
library alone (Mironov 2012): no seed, no access.

A release computed in floating point as fl(c + y), noise y of a float sampler, keeps traces of
the clean value c in its low-order bits. Two exact tests decide, for a released value v and each
candidate clean value c of a small public set (e.g. the counts 0..m one user can contribute):

* additive image, for any float noise: is there a double y with fl(c + y) == v? (c = 0 always
  is; v = 0.3 + 2^-60 is never fl(1 + y): the old OpenDP leak, a value with |v| < 0.5 off the
  2^-53 grid proves c = 0.)
* Laplace image, for numpy's `Generator.laplace(0, 1)` times the public scale b (the `numpy`
  float backend): numpy draws U = k 2^-53 and returns -log(2 - U - U) (U >= 0.5) or
  log(U + U); is v == fl(c + fl(L(k) b)) for some k? Each branch is monotone in k, so a
  bisection over k decides it exactly.

A value that exactly one candidate explains is *proven*: its clean value is read off the
release. The grid test needs no candidates: a release declared on a grid (integer multiples of
a step such as 1 or 2^-b) that lies off it is a leak by itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

HALF = 1 << 52  # k of U = 0.5: numpy's Laplace switches branch there
TOP = 1 << 53  # U = k 2^-53 < 1
NEIGHBOURS = 2  # doubles tried on each side of fl(v - c) by the additive test
MAX_ENTRIES = 20_000  # most entries an audit reads per run (the exact test: ~0.1 ms an entry)


def numpy_laplace(k: int) -> float:
    """numpy's `random_laplace(loc=0, scale=1)` for the double U = k 2^-53 (0 < k < 2^53)."""
    u = k * 2.0**-53
    if u >= 0.5:
        return 0.0 - 1.0 * math.log(2.0 - u - u)
    return 0.0 + 1.0 * math.log(u + u)


def laplace_release(c: float, k: int, scale: float) -> float:
    """fl(c + fl(L(k) b)): what a float release of clean value c shows for the draw k."""
    return c + numpy_laplace(k) * scale


def in_laplace_image(v: float, c: float, scale: float) -> bool:
    """Whether v == fl(c + fl(L(k) * scale)) for some k (bisection on each monotone branch)."""
    for lo, hi in ((1, HALF - 1), (HALF, TOP - 1)):
        if not laplace_release(c, lo, scale) <= v <= laplace_release(c, hi, scale):
            continue
        while lo < hi:  # the smallest k of the branch with release >= v
            mid = (lo + hi) // 2
            if laplace_release(c, mid, scale) < v:
                lo = mid + 1
            else:
                hi = mid
        if laplace_release(c, lo, scale) == v:
            return True
    return False


def in_additive_image(v: float, c: float) -> bool:
    """Whether v == fl(c + y) for some double y (the doubles nearest v - c are enough)."""
    y = v - c
    if not math.isfinite(y):
        return False
    for _ in range(NEIGHBOURS):
        y = math.nextafter(y, -math.inf)
    for _ in range(2 * NEIGHBOURS + 1):
        if c + y == v:
            return True
        y = math.nextafter(y, math.inf)
    return False


def on_grid(v: float, step: float) -> bool:
    """Whether v is an integer multiple of `step` (exact for a power-of-two step)."""
    return math.isfinite(v) and math.fmod(v, step) == 0.0


@dataclass
class LeakReport:
    """What the tests proved about a batch of released values."""

    total: int = 0
    proven: int = 0  # values exactly one candidate clean value explains
    off_grid: int = 0  # values off the declared grid (0 when none is declared)
    unexplained: int = 0  # off-grid values no candidate explains (clean value off the set, or
    #                       noise of another form)
    by_test: dict[str, int] = field(default_factory=dict)  # test -> values it proved
    clean: np.ndarray = field(default_factory=lambda: np.empty(0))  # proven value or NaN

    def add(self, other: LeakReport) -> None:
        """Pool another batch's counts (the per-entry `clean` arrays are concatenated)."""
        self.total += other.total
        self.proven += other.proven
        self.off_grid += other.off_grid
        self.unexplained += other.unexplained
        for test, n in other.by_test.items():
            self.by_test[test] = self.by_test.get(test, 0) + n
        self.clean = np.concatenate([self.clean, other.clean])

    def to_dict(self) -> dict[str, object]:
        """JSON-ready counts (without the per-entry array)."""
        return {"total": self.total, "proven": self.proven, "off_grid": self.off_grid,
                "unexplained": self.unexplained, "by_test": dict(self.by_test)}


def float_leaks(
    values: np.ndarray | Sequence[float],
    scale: float,
    kind: str,
    candidates: Sequence[float] = (0.0, 1.0),
    grid: float | None = 1.0,
) -> LeakReport:
    """Test released values, each one clean value from `candidates` plus one noise draw of the
    public `scale`, against their declared `grid` step (None: no grid declared, and no grid
    finding). A value on the grid (on the integers when none is declared) is what grid noise
    gives and proves nothing; float noise lands there with probability ~2^-53. Off it, the
    additive test runs for any noise, then the Laplace image test when `kind` is 'laplace'
    (numpy's float Laplace; any other kind, e.g. 'gaussian': the additive test only)."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    cands = [float(c) for c in dict.fromkeys(float(c) for c in candidates)]
    out = LeakReport(total=flat.size, clean=np.full(flat.size, np.nan))
    for i, v in enumerate(flat.tolist()):
        if on_grid(v, 1.0 if grid is None else grid):
            continue
        out.off_grid += grid is not None
        admitted = [c for c in cands if in_additive_image(v, c)]
        test = "additive"
        if len(admitted) > 1 and kind == "laplace" and scale > 0 and math.isfinite(scale):
            admitted = [c for c in admitted if in_laplace_image(v, c, scale)]
            test = "laplace"
        if len(admitted) == 1:
            out.proven += 1
            out.by_test[test] = out.by_test.get(test, 0) + 1
            out.clean[i] = admitted[0]
        elif not admitted:
            out.unexplained += 1
    return out


def count_candidates(clean_min: float, clean_max: float, items: int, limit: int = 64
                     ) -> list[float] | None:
    """The integer clean values `items` users' summed counts can take in the clean range
    [items * clean_min, items * clean_max], or None when there are more than `limit`."""
    lo, hi = math.ceil(items * clean_min), math.floor(items * clean_max)
    if hi - lo + 1 > limit:
        return None
    return [float(c) for c in range(lo, hi + 1)]
