"""Secure aggregation (`secagg`): users put their statistics on the grid, add a share of the
noise and mask the result; the server learns only the sum over each cohort of users, which
carries central-sized noise that no single party chose (distributed DP).

Cohorts are the public schedule's batches (`batch:B`, the run's cohort size B): disjoint sets
of users, each user's data in exactly one cohort sum, so a user's cost is one cohort release
(parallel composition; the billboard's prefix sums are post-processing). The noise of a cohort
sum is calibrated as a central Gaussian release of the run's budget, then spread over the
`CohortSpec.honest_shares` = n_min honest shares the worst case declares (dropouts, colluders):
each user draws its share from its own noise stream (`privrl.seeding`'s `noise_generator`, keyed
by its own nonce): Skellam Sk(sigma^2 / n_min) by default, whose n_min shares sum to exactly
Sk(sigma^2) and cost one Skellam mechanism (`privrl.trust.secagg.skellam`), or N_Z(0, sigma^2 /
n_min), charged the distributed discrete Gaussian's cost of n_min shares
(`privrl.trust.secagg.accounting`). The run's `secagg_noise` chooses; the ledger names it.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from privrl.config import RunConfig
from privrl.privacy.accountant import Charge, Ledger, rho_to_epsilon
from privrl.privacy.calibration import FALSE_REFUSAL, Calibration, FamilyCalibration
from privrl.privacy.grid import exact_units, released_coordinates
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.noise import RowSampler, noise_label
from privrl.privacy.privatizers import (
    NoServerNoise,
    Privatizer,
    family_charges,
    from_units,
    randomize_locally,
)
from privrl.privacy.psd import SymmetricNoise
from privrl.privacy.schedules import Batches, Schedule, parse_schedule
from privrl.stats import Stats
from privrl.trust import register
from privrl.trust.base import TrustBoundary
from privrl.trust.secagg import accounting, skellam
from privrl.trust.secagg.protocol import (
    CohortAborted,
    CohortSetup,
    CohortTrace,
    ideal_sum,
    run_cohort,
)
from privrl.trust.secagg.spec import (
    DEFAULT_COHORT,
    DEFAULT_COLLUSION,
    DEFAULT_DROPOUT,
    DEFAULT_SHARE_NOISE,
    CohortSpec,
    default_cohort,
)

log = logging.getLogger(__name__)

# in process, "ideal" computes each cohort's sum without running its rounds: the same numbers
# (`ideal_sum` is what the rounds compute, and their tests say so), at a small fraction of the
# cost, for learning figures at scale; simulation only, and the ledger says so
ROUNDS_ENV = "PRIVRL_SECAGG_ROUNDS"
ROUNDS = ("protocol", "ideal")


def ideal_rounds() -> bool:
    """Whether in-process cohorts skip their rounds (`PRIVRL_SECAGG_ROUNDS=ideal`; default
    "protocol": every round with real cryptography)."""
    value = os.environ.get(ROUNDS_ENV, "protocol")
    if value not in ROUNDS:
        raise ValueError(f"{ROUNDS_ENV} is one of {ROUNDS}, not {value!r}")
    return value == "ideal"


def cohort_spec(config: RunConfig, schedule: Schedule) -> CohortSpec:
    """The run's cohort assumptions: B from its `batch:B` schedule, its dropout and collusion
    fractions (the defaults where it states none)."""
    if not isinstance(schedule, Batches):
        raise ValueError("secure aggregation sums cohorts of a fixed size: give schedule"
                         " 'batch:B' (default: K / 50 within [100, 1000]), not"
                         f" {config.schedule!r}")
    return CohortSpec(size=schedule.size,
                      dropout=DEFAULT_DROPOUT if config.dropout is None else config.dropout,
                      collusion=(DEFAULT_COLLUSION if config.collusion is None
                                 else config.collusion),
                      noise=(DEFAULT_SHARE_NOISE if config.secagg_noise is None
                             else config.secagg_noise),
                      delta=config.delta)


def share_calibration(calibration: Calibration) -> Calibration:
    """The calibration a user draws its noise share from: every family's scale divided by
    sqrt(n_min) (so that n_min honest shares sum to the cohort's sigma^2)."""
    spec = calibration.cohort
    assert spec is not None and calibration.mechanism is not None
    shrink = math.sqrt(spec.honest_shares)
    fams = tuple(replace(f, scale=f.scale / shrink) for f in calibration.families)
    return replace(calibration, families=fams, cohort=None)


def cohort_ends(schedule: Schedule, episodes: int) -> list[int]:
    """The episodes after which cohorts close: the schedule's, and K (a last, partial cohort,
    which releases only if it reaches the survivors a full one needs)."""
    ends = list(schedule.release_episodes(episodes))
    if not ends or ends[-1] < episodes:
        ends.append(episodes)
    return ends


class SecureAggregation(TrustBoundary):
    """Users send masked reports carrying noise shares; the server releases cohort sums."""

    name = "secagg"
    label = "SecAgg"
    colour = "#ff7f0e"
    summary = "users add noise shares and mask; the server sees only cohort sums"
    local_noise = True
    cohorts = True
    cohort_size = DEFAULT_COHORT
    mechanisms = ("gaussian",)

    def report_kind(self, raw_kind: str) -> str:
        return "masked"

    def default_schedule(self, episodes: int) -> str | None:
        return f"batch:{default_cohort(episodes)}"

    def check_config(self, config: RunConfig) -> None:
        """Refuse cohort assumptions that cannot run where a run is made: a schedule that is
        not `batch:B`, or cohorts, dropout and collusion that leave no honest noise share."""
        super().check_config(config)
        schedule = config.schedule or self.default_schedule(config.episodes)
        assert schedule is not None
        cohort_spec(config, parse_schedule(schedule))

    def finish_calibration(self, calibration: Calibration, config: RunConfig) -> Calibration:
        """Attach the cohort assumptions; cost the cohort noise (Skellam: the families' joint
        Renyi curve at integer orders, converted at the run's delta; discrete Gaussian: each
        family's distributed discrete Gaussian cost of n_min shares, each at least the
        accounting's minimum), widening the noise until the total stays within what the
        Gaussian calibration spent (the corrections are small unless the cohort noise is a few
        grid units)."""
        if calibration.mechanism is not None and not isinstance(calibration.mechanism, Gaussian):
            raise ValueError("secure aggregation releases distributed noise (Skellam or discrete"
                             " Gaussian, calibrated as a Gaussian release): use --mechanism"
                             " gaussian with a delta")
        if calibration.mechanism is not None and not calibration.mechanism.backend.integer:
            raise ValueError("secure aggregation masks integers: use integer noise"
                             " ('numpy' or 'opendp'), not 'float'")
        spec = cohort_spec(config, calibration.schedule)
        calibration = replace(calibration, cohort=spec)
        if calibration.mechanism is None or not calibration.families:
            return calibration
        if spec.noise == "skellam" and calibration.mechanism.backend.name != "numpy":
            raise ValueError("Skellam shares are drawn from the user's seeded numpy stream: use"
                             " noise 'numpy', or secagg_noise 'ddg'")
        if math.isinf(config.epsilon):
            raise ValueError("secure aggregation masks integer statistics with their noise"
                             " shares: at epsilon = inf there are none (use privacy 'none')")
        budget = math.fsum(f.cost for f in calibration.families)
        n = spec.honest_shares
        ddg = spec.noise == "ddg"
        floor = accounting.MIN_SHARE_SIGMA * math.sqrt(n) if ddg else 0.0  # cohort sigma

        def widened(w: float) -> tuple[FamilyCalibration, ...]:
            if not ddg:
                return tuple(_skellam_family(f, f.scale / f.grid * w)
                             for f in calibration.families)
            return tuple(_ddg_family(f, n, max(f.scale / f.grid * w, floor))
                         for f in calibration.families)

        # Skellam: the families' Renyi curves at integer orders, converted at the run's delta,
        # within the epsilon the Gaussian calibration spends there
        target = rho_to_epsilon(budget, spec.delta) if not ddg else budget

        def fits(w: float) -> bool:
            if not ddg:
                return skellam_epsilon(widened(w), spec.delta) <= target
            return math.fsum(f.cost for f in widened(w)) <= budget

        low, high = 1.0, 1.0
        while not fits(high):  # tau decays like exp(-pi^2 s^2): a few doublings at most
            low, high = high, 2.0 * high
            if high > 2.0**20:
                raise ValueError("secure aggregation could not fit its noise shares' cost in"
                                 " the budget: use smaller cohorts")
        for _ in range(60 if high > 1.0 else 0):  # the least widening that fits
            mid = 0.5 * (low + high)
            low, high = (low, mid) if fits(mid) else (mid, high)
        fams = widened(high)
        largest = max((f.scale / f.grid) ** 2 / n for f in fams)  # one share's variance
        if not ddg and largest / 2.0 > skellam.POISSON_LAM_MAX:
            raise ValueError(f"a Skellam noise share of variance {largest:.3g} grid units is"
                             " beyond exact integer sampling: choose a larger epsilon, the"
                             " practical preset or secagg_noise 'ddg'")
        smallest = min(f.scale for f in fams)
        mechanism = calibration.mechanism
        assert isinstance(mechanism, Gaussian)  # secagg refuses Laplace at validation
        return replace(calibration, families=fams, mechanism=replace(mechanism, sigma=smallest))

    def randomize(self, stats: Stats, calibration: Calibration,
                  noise: Sequence[np.random.Generator],
                  rounding: Sequence[np.random.Generator]) -> Stats | None:
        """A user's report before masking: its statistics on the grid plus its noise share."""
        if calibration.mechanism is None:
            return {}
        spec = calibration.cohort
        if spec is None or spec.noise == "ddg":
            return randomize_locally(stats, share_calibration(calibration), noise, rounding)
        return randomize_locally(stats, calibration, noise, rounding,
                                 lambda f: share_sampler(f, spec))

    def privatizer(self, calibration: Calibration, seeds: Sequence[int],
                   max_items: int) -> Privatizer:
        return CohortPrivatizer(calibration, len(seeds), max_items)

    def counter_items(self, calibration: Calibration, episodes: int) -> int:
        """The cohorts closed once `episodes` episodes were reported."""
        if episodes <= 0:
            return 0
        return len(calibration.schedule.release_episodes(episodes))

    def variance_factor(self, calibration: Calibration, items: int) -> float:
        spec = calibration.cohort
        return float(items) * (spec.variance_factor() if spec is not None else 1.0)

    def max_variance_factor(self, calibration: Calibration, items: int) -> float:
        return self.variance_factor(calibration, items)


def share_sampler(fam: FamilyCalibration, spec: CohortSpec) -> RowSampler:
    """What draws a user's Skellam share of `fam` (grid units): Sk(sigma^2 / n_min) on every
    released coordinate (mirrored for symmetric families)."""
    share = skellam.Skellam((fam.scale / fam.grid) ** 2 / spec.honest_shares)
    return SymmetricNoise(share) if fam.symmetric else share


def _skellam_family(fam: FamilyCalibration, sigma_units: float) -> FamilyCalibration:
    """`fam` at cohort standard deviation `sigma_units` (grid units). Its cost is no zCDP rho
    (the Skellam bound holds at integer orders only): the families are charged together, by
    `skellam_charge`, so `cost` is 0."""
    return replace(fam, scale=sigma_units * fam.grid, cost=0.0)


def skellam_epsilon(families: Sequence[FamilyCalibration], delta: float) -> float:
    """The epsilon at `delta` of one release of every family of `families` with its cohort's
    Skellam noise: their Renyi curves (sensitivities and variance in grid units) add up order
    by order, then convert."""
    curve = sum(skellam.rdp_curve(f.l1 / f.grid, f.l2 / f.grid, (f.scale / f.grid) ** 2)
                for f in families)
    return skellam.epsilon(np.asarray(curve), delta)


def skellam_charge(calibration: Calibration, note: str) -> Charge:
    """What each user's one cohort release with Skellam noise spends: one (epsilon, delta)
    charge for all the families (`skellam_epsilon` at the run's delta)."""
    spec = calibration.cohort
    assert spec is not None and spec.delta > 0.0
    fams = calibration.families
    return Charge("secagg:skellam", epsilon=skellam_epsilon(fams, spec.delta), delta=spec.delta,
                  sensitivity=math.sqrt(math.fsum(f.l2**2 for f in fams)),
                  scale=min(f.scale for f in fams), at=1,
                  noise=noise_label(calibration.noise),
                  note=f"{note}; Skellam Renyi bound at integer orders 2 .. 2^20 (Agarwal,"
                  f" Kairouz & Liu), families {', '.join(f.name for f in fams)} composed order"
                  f" by order, converted at delta = {spec.delta:g}")


def _ddg_family(fam: FamilyCalibration, shares: int, sigma_units: float) -> FamilyCalibration:
    """`fam` at cohort sigma `sigma_units` (grid units), charged the distributed discrete
    Gaussian's rho of `shares` shares (sensitivity in grid units)."""
    share_sigma = sigma_units / math.sqrt(shares)
    dim = released_coordinates(fam.shape, fam.symmetric)
    cost = accounting.rho(fam.l2 / fam.grid, shares, share_sigma, dim)
    return replace(fam, scale=sigma_units * fam.grid, cost=cost)


@dataclass(frozen=True)
class CohortRecord:
    """What happened to one cohort of one replica: released, aborted or refused."""

    index: int
    replica: int
    users: int
    survivors: int
    outcome: str  # "released", "aborted" or "refused"


Faults = Callable[[int, int, int], tuple[set[int], set[int]]]


class CohortPrivatizer(NoServerNoise):
    """The server's side of a secure-aggregation run in process: each replica's reports wait
    for their cohort to close, then go through every round of the protocol
    (`privrl.trust.secagg.protocol`); the billboard adds each released cohort sum.

    A cohort sum outside its feasible range (n users' clean bounds plus the noise's tail at
    FALSE_REFUSAL) is refused: nothing of it is released, and it is logged. `faults`
    (cohort, replica, users) -> (drop after keys, drop after input): a fault drill's dropouts.
    With `PRIVRL_SECAGG_ROUNDS=ideal` (`ideal_rounds`) a cohort's sum is computed without its
    rounds (simulation only: the same sum, nothing masked; no drills, no trace).
    """

    def __init__(self, calibration: Calibration, replicas: int, max_items: int) -> None:
        assert calibration.cohort is not None
        self.calibration, self.spec = calibration, calibration.cohort
        self.replicas = replicas
        self.ends = cohort_ends(calibration.schedule, max_items)
        self.sums = {f.name: np.zeros((replicas, *f.shape), dtype=np.int64)
                     for f in calibration.families}
        self.pending: list[dict[str, np.ndarray]] = []
        self.items = 0
        self.closed = 0
        self.records: list[CohortRecord] = []
        self.faults: Faults | None = None
        self.trace: CohortTrace | None = None  # the masked inputs of the last cohort (audits)
        self.ideal = ideal_rounds()
        self._charged = False

    def ingest(self, stats: Stats, ledger: Ledger) -> None:
        """One report per replica (grid units plus noise shares); at a cohort's end, its
        protocol runs and its sum is released or not."""
        units = {f.name: _units(f, stats[f.name]) for f in self.calibration.families}
        self.pending.append(units)
        self.items += 1
        if self.closed < len(self.ends) and self.items == self.ends[self.closed]:
            self._close(ledger)

    def _close(self, ledger: Ledger) -> None:
        index, users = self.closed, len(self.pending)
        self.closed += 1
        fams = self.calibration.families
        released = []
        for r in range(self.replicas):
            vectors = {i: np.concatenate([rep[f.name][r].reshape(-1) for f in fams])
                       for i, rep in enumerate(self.pending)}
            gone_keys, gone_input = (self.faults(index, r, users) if self.faults is not None
                                     else (set(), set()))
            survivors = users - len(set(gone_keys))
            try:
                if users < self.spec.min_survivors:  # a last, partial cohort that is too small
                    raise CohortAborted(f"{users} users, fewer than {self.spec.min_survivors}")
                setup = CohortSetup(f"cohort {index} replica {r}".encode(), users,
                                    self.spec.min_survivors, vectors[0].size, self.spec.bits,
                                    max(2, min(self.spec.degree, users - 1)))
                if self.ideal:
                    if gone_keys or gone_input:
                        raise ValueError(f"a fault drill runs the rounds: unset {ROUNDS_ENV}")
                    total = ideal_sum(setup, vectors)
                else:
                    self.trace = CohortTrace()
                    total = run_cohort(setup, vectors, gone_keys, gone_input, self.trace)
            except CohortAborted as why:
                log.warning("cohort %d (replica %d) aborted: %s", index, r, why)
                self.records.append(CohortRecord(index, r, users, survivors, "aborted"))
                continue
            if self._admit(index, r, users, survivors, total, ledger):
                released.append(r)
        self._closed(index, users, len(released), ledger, self.ideal)
        self.pending = []

    def _admit(self, index: int, r: int, users: int, survivors: int, total: np.ndarray,
               ledger: Ledger) -> bool:
        """Replica r's unmasked cohort sum `total`: added to the billboard if feasible, else
        refused (logged; its users' one release is spent all the same)."""
        # the server saw the sum, feasible or not: its users' one release is spent, and charged
        # before anything of it enters the billboard (a charge the filter refuses adds nothing)
        self._charge(ledger)
        parts = self._split(total)
        if not self._feasible(parts, survivors):
            log.warning("cohort %d (replica %d): its sum lies outside the feasible range"
                        " of %d users: refused, nothing released", index, r, survivors)
            self.records.append(CohortRecord(index, r, users, survivors, "refused"))
            return False
        self.records.append(CohortRecord(index, r, users, survivors, "released"))
        for name, part in parts.items():
            self.sums[name][r] += part
        return True

    def _closed(self, index: int, users: int, released: int, ledger: Ledger,
                ideal: bool = False) -> None:
        """The ledger's record of cohort `index` closing (its users charged at its release);
        `ideal`: its sum was computed without its rounds."""
        how = (f"; its sum computed without the rounds ({ROUNDS_ENV}=ideal: simulation only)"
               if ideal else "")
        ledger.charge_all([Charge("secagg:cohort", at=self.items,
                                  noise=noise_label(self.calibration.noise),
                                  note=f"cohort {index}: {users} users, released by"
                                  f" {released} of {self.replicas} replicas (disjoint"
                                  f" users: parallel composition, nothing more spent){how}")])

    def release_sum(self, total: np.ndarray, users: int, survivors: int,
                    ledger: Ledger) -> str:
        """A cohort whose rounds ran elsewhere (a server's, over HTTP; one replica): its
        unmasked sum of `survivors` inputs out of `users` members counts the `users` episodes
        (as in process, where a cohort closes after its B reports whoever drops) and is
        released if feasible; "released" or "refused"."""
        if self.replicas != 1:
            raise ValueError("a cohort sum from outside is one replica's")
        index = self.closed
        self.closed += 1
        self.items += users
        released = self._admit(index, 0, users, survivors, np.asarray(total), ledger)
        self._closed(index, users, int(released), ledger)
        return "released" if released else "refused"

    def close_unreleased(self, users: int, ledger: Ledger) -> None:
        """A cohort whose rounds ran elsewhere (one replica) and that holds the run's last
        `users` episodes, too few to ever release: they count, nothing is released or charged
        (as a last cohort too small closes in process)."""
        if self.replicas != 1:
            raise ValueError("a cohort from outside is one replica's")
        index = self.closed
        self.closed += 1
        self.items += users
        self.records.append(CohortRecord(index, 0, users, 0, "aborted"))
        self._closed(index, users, 0, ledger)

    def _charge(self, ledger: Ledger) -> None:
        if not self._charged:
            ledger.charge_all(self.plan())
            self._charged = True

    def _split(self, total: np.ndarray) -> dict[str, np.ndarray]:
        out, at = {}, 0
        for f in self.calibration.families:
            size = math.prod(f.shape)
            out[f.name] = total[at:at + size].reshape(f.shape)
            at += size
        return out

    def _feasible(self, parts: dict[str, np.ndarray], users: int) -> bool:
        """Whether every entry lies within `users` clean bounds plus the noise's tail (at
        FALSE_REFUSAL over the entries) and their rounding."""
        cal = self.calibration
        entries = cal.report_entries()
        for f in cal.families:
            sigma = f.scale / f.grid * math.sqrt(self.spec.variance_factor())
            if self.spec.noise == "skellam":
                tail = skellam.tail(sigma**2, 2 * entries, FALSE_REFUSAL) + users
            else:
                tail = Gaussian(sigma).max_abs_bound(2 * entries, FALSE_REFUSAL) + users
            lo = users * f.clean_min / f.grid - tail
            hi = users * f.clean_max / f.grid + tail
            if parts[f.name].min(initial=0) < lo or parts[f.name].max(initial=0) > hi:
                return False
        return True

    def plan(self) -> list[Charge]:
        """What the whole run charges: each user's one cohort release."""
        note = f"each user's one cohort release ({self.spec.describe()})"
        if self.spec.noise == "skellam":
            return [skellam_charge(self.calibration, note)]
        return family_charges(self.calibration, "secagg", note, 1)

    def release(self) -> Stats:
        """The sums of every released cohort (grid units times the grid step)."""
        return {name: from_units(self.calibration, name, total)
                for name, total in self.sums.items()}


def _units(family: FamilyCalibration, report: np.ndarray) -> np.ndarray:
    """A report (R, *shape) in grid units (it left the user on the grid)."""
    return exact_units(np.asarray(report), family.grid).astype(np.int64)


SECAGG = register(SecureAggregation())
