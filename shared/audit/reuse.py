"""Reused local noise: LDP reports whose pairwise differences are too small for their noise.

Two honest LDP reports differ by (data_a - data_b) + (noise_a - noise_b), two independent draws:
each entry's difference has variance 2 sigma^2 and, on an integer grid, lies in {-1, 0, 1} grid
steps with a small probability q that the declared noise fixes (about 1% at the usual scales).
When a user draws the same noise twice (its generator keyed by something the server chose, such
as the episode index), the difference of the two reports is the exact difference of their data:
on the grid, counts differ by 0 or +-1 everywhere, and every difference is far below sqrt(2)
sigma. A server that can make users repeat their noise subtracts it.

`ReuseDetector` compares each report (the proxy: report bodies; `audit server`: billboard
increments of one report) with a bounded reservoir sample of earlier ones, all at once, and per
pair applies two one-sided tests at a false-alarm rate that sums to `alpha` over all pairs
(pair n gets alpha / (n (n + 1))):

* small differences: the count of entries in {-1, 0, 1} grid steps against Binomial(m, q), by
  the Chernoff bound P(X >= k) <= exp(-m KL(k/m || q));
* spread: the sum of squared differences over 2 sigma^2 against its mean m, by Maurer's
  inequality (`privrl.audit.increments.maurer_p_value`, the increment test's bound).

Pairs flagged by either join groups of reports that share their noise; `reconstruct_counts`
turns a group of DP-UCBVI reports back into trajectories.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from privrl.audit.findings import AuditReport, Finding
from privrl.audit.increments import KURTOSIS, maurer_p_value, moments
from privrl.privacy.calibration import Calibration, FamilyCalibration
from privrl.privacy.mechanisms import Gaussian

KEEP = 256  # reports kept for comparison (a reservoir sample once more have come)
SMALL = 1.0 + 1e-9  # |difference| <= one grid step (float slack for the float backend)
GROUPS_KEPT = 4096  # flagged pairs remembered for grouping


def small_difference_probability(kind: str, scale: float, integer: bool) -> float:
    """P(|X - Y| <= 1) for X, Y iid noise of one entry in grid steps: discrete Laplace of
    parameter t = `scale` or discrete Gaussian of sigma = `scale` (integer backends), else the
    continuous Laplace of scale b or Gaussian of std sigma."""
    if scale <= 0.0:
        return 1.0
    if kind == "laplace" and integer:  # P(D = d) = c^2 q^|d| ((1 + q^2) / (1 - q^2) + |d|)
        q = math.exp(-1.0 / scale)
        c = (1.0 - q) / (1.0 + q)
        base = (1.0 + q * q) / (1.0 - q * q)
        return c * c * (base + 2.0 * q * (base + 1.0))
    if kind == "laplace":  # P(|D| > x) = (1 + x / 2b) exp(-x / b)
        return 1.0 - (1.0 + 0.5 / scale) * math.exp(-1.0 / scale)
    if not integer:  # D ~ N(0, 2 sigma^2)
        return math.erf(1.0 / (2.0 * scale))
    if scale > 64.0:  # three lattice points under the density of N(0, 2 sigma^2) at 0
        return 3.0 / (2.0 * scale * math.sqrt(math.pi))
    xs = np.arange(-int(12 * scale) - 12, int(12 * scale) + 13)
    p = np.exp(-xs.astype(float) ** 2 / (2.0 * scale * scale))
    p /= p.sum()
    conv = np.convolve(p, p[::-1])
    mid = len(conv) // 2
    return float(conv[mid - 1: mid + 2].sum())


def chernoff_p_value(k: np.ndarray, m: int, q: float) -> np.ndarray:
    """Upper bound on P(Binomial(m, q) >= k), elementwise: exp(-m KL(k/m || q)) above the mean,
    1 at or below it (also valid for independent Bernoullis of mean q on average)."""
    x = np.clip(np.asarray(k, float) / m, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(x > 0, x * np.log(x / q), 0.0) + np.where(
            x < 1, (1 - x) * np.log((1 - x) / (1 - q)), 0.0)
    return np.where(x > q, np.exp(-m * kl), 1.0)


def _released(fam: FamilyCalibration, values: np.ndarray) -> np.ndarray:
    """A family's independently noised entries, flat (a symmetric family's upper triangle)."""
    arr = np.asarray(values, float).reshape(fam.shape)
    if fam.symmetric:
        arr = arr[..., *np.triu_indices(fam.shape[-1])]
    return arr.ravel()


@dataclass
class ReuseResult:
    """What the pairwise comparisons showed."""

    reports: int
    pairs: int  # pairs compared
    entries: int  # difference entries per pair
    small_fraction: float  # share of difference entries in {-1, 0, 1} grid steps, all pairs
    expected_fraction: float  # what the declared noise implies for independent draws
    spread: float  # median over pairs of rms(difference) / (sqrt(2) sigma): about 1 or more
    flagged: int  # pairs too close for their declared noise
    flagged_small_fraction: float  # share of small entries in the flagged pairs
    flagged_spread: float  # median spread of the flagged pairs
    groups: list[list[int]] = field(default_factory=list)  # reports (arrival order) sharing noise
    alpha: float = 1e-3

    @property
    def found(self) -> bool:
        """Whether any pair was too close."""
        return self.flagged > 0

    def line(self, recovered: int | None = None, what: str = "reports") -> str:
        """One line for a report (`recovered`: trajectories reconstructed, when counted;
        `what`: what was compared)."""
        seen = (f"{_share(self.small_fraction)} of difference entries in {{-1, 0, 1}} grid steps"
                f" (declared noise: {_share(self.expected_fraction)}), median spread"
                f" {self.spread:.3g} x sqrt(2) sigma")
        rec = "" if recovered is None else f"; {recovered} trajectories reconstructed"
        if not self.found:
            return (f"{self.pairs} pairs of {self.reports} {what}: {seen}{rec} (false-alarm"
                    f" rate {self.alpha:g})")
        largest = max((len(g) for g in self.groups), default=2)
        return (f"{self.flagged} of {self.pairs} pairs of {self.reports} {what} are too close"
                f" for their declared noise: {_share(self.flagged_small_fraction)} of their"
                f" difference entries in {{-1, 0, 1}} grid steps (declared noise:"
                f" {_share(self.expected_fraction)}), spread {self.flagged_spread:.3g} x sqrt(2)"
                f" sigma: the same noise drawn again (largest group {largest}){rec}"
                f" (false-alarm rate {self.alpha:g})")


def _share(x: float) -> str:
    """A fraction as a percentage with 3 significant digits (small ones stay readable)."""
    return f"{100.0 * x:.3g}%"


class ReuseDetector:
    """Compare every report with a bounded sample of earlier ones (see the module docstring)."""

    def __init__(self, calibration: Calibration, alpha: float = 1e-3, keep: int = KEEP,
                 rng: np.random.Generator | None = None) -> None:
        """Reports of a run with `calibration`; `keep` reports are stored (a reservoir sample,
        drawn with `rng`), `alpha` is the false-alarm rate over all pairs."""
        if calibration.mechanism is None:
            raise ValueError("a non-private run declares no noise")
        self.calibration, self.alpha, self.keep = calibration, alpha, keep
        self.rng = rng if rng is not None else np.random.default_rng()
        kind = calibration.mechanism_name
        self.families = calibration.families
        steps, sigmas, qs = [], [], []
        for fam in self.families:
            n = _released(fam, np.zeros(fam.shape)).size
            grid = fam.grid if calibration.integer else 1.0
            mech = calibration.mechanism_of(fam.name)
            steps.append(np.full(n, grid))
            sigmas.append(np.full(n, mech.std()))
            qs.append(np.full(n, small_difference_probability(kind, fam.scale / grid,
                                                              calibration.integer)))
        self.step, self.sigma = np.concatenate(steps), np.concatenate(sigmas)
        self.q = float(np.mean(np.concatenate(qs)))
        second, fourth = moments(np.array([1.0, -1.0]), KURTOSIS[
            "gaussian" if isinstance(calibration.mechanism, Gaussian) else "laplace"])
        self.ratio = fourth / second**2  # E[Z^2] / E[Z]^2 of one squared, scaled difference
        self.m = self.step.size
        self.stored: list[np.ndarray] = []
        self.ids: list[int] = []
        self.raw: dict[int, dict[str, np.ndarray]] = {}  # stored reports as sent, by arrival
        self.count = self.pairs = self.flagged = 0
        self.small_total = 0
        self.spreads: list[float] = []
        self.flagged_small = 0
        self.flagged_spreads: list[float] = []
        self.links: list[tuple[int, int]] = []

    def flat(self, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        """A report's released entries in family order (ValueError on a missing family or a
        wrong size)."""
        return np.concatenate([_released(f, arrays[f.name]) for f in self.families])

    def add(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Compare one report (family -> noisy values, any shape of the right size) with the
        stored ones, then maybe store it."""
        x = self.flat(arrays)
        n = self.count
        self.count += 1
        if self.stored:
            diff = np.stack(self.stored) - x
            small = np.sum(np.abs(diff) <= SMALL * self.step, axis=1)
            z = np.sum((diff / self.sigma) ** 2, axis=1) / 2.0  # mean m under independent noise
            first = self.pairs + 1
            alphas = self.alpha / (np.arange(first, first + len(diff)) *
                                   np.arange(first + 1, first + 1 + len(diff)))
            p_small = chernoff_p_value(small, self.m, self.q)
            p_spread = maurer_p_value(z, self.m, self.ratio)
            hit = (np.minimum(p_small, p_spread) <= alphas / 2.0)  # two tests per pair
            spread = np.sqrt(z / self.m)
            self.pairs += len(diff)
            self.small_total += int(small.sum())
            self.spreads += spread.tolist()
            for i in np.flatnonzero(hit):
                self.flagged += 1
                self.flagged_small += int(small[i])
                self.flagged_spreads.append(float(spread[i]))
                if len(self.links) < GROUPS_KEPT:
                    self.links.append((self.ids[i], n))
        if len(self.stored) < self.keep:
            self.stored.append(x)
            self.ids.append(n)
            self.raw[n] = {k: np.asarray(v, float) for k, v in arrays.items()}
        else:
            j = int(self.rng.integers(self.count))
            if j < self.keep:
                del self.raw[self.ids[j]]
                self.stored[j], self.ids[j] = x, n
                self.raw[n] = {k: np.asarray(v, float) for k, v in arrays.items()}

    def groups(self) -> list[list[int]]:
        """Reports (by arrival) linked by flagged pairs, as connected groups of 2 or more."""
        parent: dict[int, int] = {}

        def root(i: int) -> int:
            while parent.setdefault(i, i) != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for a, b in self.links:
            parent[root(a)] = root(b)
        out: dict[int, list[int]] = {}
        for i in parent:
            out.setdefault(root(i), []).append(i)
        return sorted((sorted(g) for g in out.values()), key=lambda g: (-len(g), g[0]))

    def result(self) -> ReuseResult:
        """The comparisons so far."""
        pairs = max(self.pairs, 1)
        return ReuseResult(
            reports=self.count, pairs=self.pairs, entries=self.m,
            small_fraction=self.small_total / (pairs * self.m), expected_fraction=self.q,
            spread=float(np.median(self.spreads)) if self.spreads else math.nan,
            flagged=self.flagged,
            flagged_small_fraction=self.flagged_small / (max(self.flagged, 1) * self.m),
            flagged_spread=float(np.median(self.flagged_spreads)) if self.flagged_spreads
            else math.nan,
            groups=self.groups(), alpha=self.alpha)


# --- recovering trajectories -------------------------------------------------------------------


@dataclass(frozen=True)
class Recovered:
    """A trajectory read off reports that share their noise: states s_1..s_{H+1}, actions."""

    states: tuple[int, ...]
    actions: tuple[int, ...]


def reconstruct_counts(reports: Sequence[np.ndarray]) -> list[Recovered | None]:
    """DP-UCBVI's one-hot transition counts `sas` (H, S, A, S) of reports that carry the same
    noise, back to trajectories (None where a report cannot be pinned down).

    The difference of two such reports is the difference of their one-hot counts: at step h it is
    zero, or +1 at the first report's cell (s, a, s') and -1 at the second's. So wherever some
    report of the group differs from the first at step h, every report's cell at h is known; a
    step where all reports of the group took the same transition stays unknown, and so do the
    trajectories of a group of one. A reconstruction must chain (s'_h = s_{h+1}).
    """
    if len(reports) < 2:
        return [None] * len(reports)
    arrs = [np.asarray(r, float) for r in reports]
    horizon, n_s, n_a, _ = arrs[0].shape
    cells: list[list[int | None]] = [[None] * horizon for _ in arrs]
    for h in range(horizon):
        base = arrs[0][h].ravel()
        diffs = [np.rint(a[h].ravel() - base).astype(np.int64) for a in arrs]
        ref: set[int] = set()
        for d in diffs:
            if not np.any(d):
                continue
            if not (np.sum(d == 1) == 1 and np.sum(d == -1) == 1 and np.sum(d != 0) == 2):
                ref = {-1}  # not a difference of two one-hot counts
                break
            ref.add(int(np.argmin(d)))
        if len(ref) != 1 or -1 in ref:
            continue
        first = ref.pop()
        for i, d in enumerate(diffs):
            cells[i][h] = int(np.argmax(d)) if np.any(d) else first
    out: list[Recovered | None] = []
    for row in cells:
        if any(c is None for c in row):
            out.append(None)
            continue
        steps = [np.unravel_index(c, (n_s, n_a, n_s)) for c in row]
        if any(int(steps[h][2]) != int(steps[h + 1][0]) for h in range(horizon - 1)):
            out.append(None)
            continue
        out.append(Recovered(tuple(int(s) for s, _, _ in steps) + (int(steps[-1][2]),),
                             tuple(int(a) for _, a, _ in steps)))
    return out


def recover_groups(detector: ReuseDetector, family: str = "sas"
                   ) -> list[Recovered | None] | None:
    """Reconstructions of every stored report in a group that shares its noise (`family`: the
    one-hot transition counts), in the groups' order; None when the run has no such family."""
    names = {f.name: f for f in detector.families}
    if family not in names or len(names[family].shape) != 4:
        return None
    fam = names[family]
    out: list[Recovered | None] = []
    for group in detector.groups():
        kept = [detector.raw[i][family].reshape(fam.shape) for i in group if i in detector.raw]
        out += reconstruct_counts(kept)
    return out


def count_recovered(found: Sequence[Recovered | None],
                    truths: Sequence[tuple[Sequence[int], Sequence[int]]]) -> int:
    """How many reconstructions equal one of the true (states, actions) trajectories."""
    true = {(tuple(int(s) for s in st), tuple(int(a) for a in ac)) for st, ac in truths}
    return sum(1 for r in found if r is not None and (r.states, r.actions) in true)


def reuse_verdict(report: AuditReport, run_id: str, detector: ReuseDetector, where: str,
                  what: str) -> None:
    """The comparison of a run's `what` ("reports", "billboard increments") as a finding or a
    passed check, with the trajectories reconstructed from groups that share their noise."""
    result = detector.result()
    found = recover_groups(detector)
    rebuilt = None if found is None else sum(r is not None for r in found)
    line = result.line(rebuilt, what)
    figures = {k: None if isinstance(v, float) and math.isnan(v) else v  # JSON has no NaN
               for k, v in result.__dict__.items() if k != "groups"}
    evidence = {**figures,
                "groups": [len(g) for g in result.groups], "reconstructed": rebuilt}
    if result.found:
        report.find(Finding("noise-reuse", line, run_id, where, evidence))
    else:
        report.passed("noise-reuse", line, run_id, evidence)
