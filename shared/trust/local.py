"""Local DP (LDP): each user noises its statistics in its own process, from its own seed and
nonce; the untrusted server only sums noisy reports (`privrl.privacy.privatizers.Aggregator`).

The boundary owns its report kind, `NOISY`: the wire model stays `privrl.protocol.NoisyReport`
(the HTTP schema is one discriminated union of every kind's model, and the protocol module sits
below the boundaries: `privrl.config` imports `privrl.trust`), while its acceptance check and
description live here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from privrl.privacy.calibration import FALSE_REFUSAL, Calibration
from privrl.privacy.grid import first_off_grid
from privrl.privacy.privatizers import Aggregator, Privatizer, randomize_locally
from privrl.protocol import NoisyReport
from privrl.reports import Accepted, AnyReport, ReportKind, canonical, invalid, register_kind
from privrl.stats import Stats
from privrl.trust import register
from privrl.trust.base import TrustBoundary
from privrl.wire import pack_floats

if TYPE_CHECKING:
    from privrl.algorithms.base import PolicyMessage
    from privrl.run import Run


def _noisy(report: NoisyReport, calibration: Calibration) -> Stats:
    """An LDP report: exactly the released families, exact flattened sizes, every entry within
    its family's clean range widened by the mechanism's tail at a false-refusal probability of
    FALSE_REFUSAL per honest report (`Calibration.acceptance_margin`), and on its family's
    public grid under integer noise."""
    want = {f.name: f.shape for f in calibration.families}
    got = set(report.arrays)
    if got != set(want):
        missing = sorted(set(want) - got)
        extra = sorted(got - set(want))
        parts = [f"missing {missing}"] if missing else []
        parts += [f"unexpected {extra}"] if extra else []
        raise invalid(
            f"arrays must be exactly the released families {sorted(want)}: " + ", ".join(parts)
        )
    out = {}
    for name in sorted(want):
        fam = calibration.family(name)
        shape = want[name]
        size = math.prod(shape)
        try:
            arr = report.array(name)
        except ValueError as exc:
            raise invalid(f"arrays[{name!r}] is not base64 of little-endian float64s: {exc}"
                           ) from None
        if arr.size != size:
            raise invalid(
                f"arrays[{name!r}] must have {size} entries (shape {list(shape)} flattened in C"
                f" order), got {arr.size}"
            )
        margin = calibration.acceptance_margin(FALSE_REFUSAL, name)
        lo, hi = fam.clean_min - margin, fam.clean_max + margin
        inside = (arr >= lo) & (arr <= hi)  # false for NaN
        if not (inside.all() and math.isfinite(hi - lo)):  # one pass for an honest report
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                raise invalid(f"arrays[{name!r}][{int(bad[0])}] is not a finite number")
            outside = np.flatnonzero(~inside)
            if outside.size:
                raise invalid(
                    f"arrays[{name!r}][{int(outside[0])}] is outside [{lo:.6g}, {hi:.6g}]: a"
                    f" clean value in [{fam.clean_min:g}, {fam.clean_max:g}] plus this run's"
                    f" noise lands there with probability below {FALSE_REFUSAL:g} per honest"
                    " report"
                )
        off = first_off_grid(arr, fam.grid) if calibration.integer else None
        if off is not None:
            raise invalid(
                f"arrays[{name!r}][{off}] is not on this run's public grid (integer multiples of"
                f" {fam.grid:g}): its noise is integer, drawn in grid units"
            )
        arr = arr.reshape((1, *shape))
        if fam.symmetric:
            asym = np.argwhere(arr != np.swapaxes(arr, -1, -2))
            if asym.size:
                where = tuple(int(i) for i in asym[0][1:])
                raise invalid(
                    f"arrays[{name!r}] must hold symmetric matrices (its last two axes), but entry"
                    f" {list(where)} differs from its mirror; honest users mirror their noise"
                )
        out[name] = arr
    return out


def _accept_noisy(report: AnyReport, run: Run, served: PolicyMessage, version: int
                  ) -> Accepted:
    assert isinstance(report, NoisyReport)
    noisy = _noisy(report, run.calibration)
    # the stored body from the arrays just decoded and checked (the same floats, the same text)
    body = {"arrays": {name: pack_floats(noisy[name]) for name in sorted(noisy)}}
    return Accepted(report.kind, *canonical(report.kind, body), noisy=noisy)


def _noisy_body(report: AnyReport) -> dict:
    """Noisy arrays stored packed (base64 float64, lossless), in whichever form they came."""
    assert isinstance(report, NoisyReport)
    return {"arrays": report.packed()}


NOISY = register_kind(ReportKind("noisy", NoisyReport, _accept_noisy,
                                 "locally randomized arrays", body=_noisy_body))


class LocalDP(TrustBoundary):
    """Users send locally randomized arrays; the billboard is their sum."""

    name = "ldp"
    label = "LDP"
    colour = "#d62728"
    summary = "users noise their reports"
    local_noise = True

    def report_kind(self, raw_kind: str) -> str:
        return NOISY.name

    def randomize(self, stats: Stats, calibration: Calibration,
                  noise: Sequence[np.random.Generator],
                  rounding: Sequence[np.random.Generator]) -> Stats | None:
        return randomize_locally(stats, calibration, noise, rounding)

    def privatizer(self, calibration: Calibration, seeds: Sequence[int],
                   max_items: int) -> Privatizer:
        return Aggregator(calibration, len(seeds))

    def acceptance_margin(self, calibration: Calibration, false_refusal: float,
                          family: str | None) -> float:
        """The mechanism's tail at `false_refusal / entries` per entry: an honest report has any
        entry beyond it with probability at most `false_refusal` (a union bound)."""
        if calibration.mechanism is None:
            return 0.0
        mech = (calibration.mechanism if family is None
                else calibration.mechanism_of(family))
        entries = calibration.report_entries()
        if not calibration.integer:
            return mech.max_abs_bound(entries, false_refusal)
        # a discrete Laplace tail is at most twice the continuous one; rounding moves a clean
        # value by less than one grid step
        step = 1.0 if family is None else calibration.family(family).grid
        return mech.max_abs_bound(2 * entries, false_refusal) + step


LOCAL = register(LocalDP())
