"""From a public run configuration to calibrated mechanisms and ledger charges.

Neighbouring relation: replace one user (one trajectory). Each algorithm declares the statistic
families it releases with their replace-one sensitivities (`Family`, below); this module
only reads them (DP-UCBVI's: l1 = 2H, l2 = sqrt(2H) per step; erratum E3).

Budget split:
  Laplace (pure eps): eps is split evenly over the released families; in JDP each family's tree
    node gets scale L * Delta_1 / eps_f (an item enters L nodes); in LDP each entry gets
    Delta_1 / eps_f (Delta_1: the largest l1 of the families).
  Gaussian (zCDP): rho solves rho_to_epsilon(rho, delta) = eps (tight conversion); one sigma for
    all families with sigma^2 = L * sum_f Delta_2f^2 / (2 rho) (JDP, L = 1 in LDP).
  Fixed scales (a paper's calibration, `Family.scale`): every family keeps its own scale and the
    ledger charges what it actually spends (often less than the paper's claim).
  Split by sensitivity (`sensitivity_split`, an algorithm's choice through fixed scales):
    sigma_f^2 = L Delta_2f sum_g Delta_2g / (2 rho), which spends exactly rho and minimises
    sum_f sigma_f^2 at that spend; family f's share of the ledger is Delta_2f / sum_g Delta_2g.

Symmetric families (Gram matrices) draw their noise on the upper triangle and mirror it
(`privrl.privacy.psd.SymmetricNoise`); their sensitivities are stated on those coordinates.

Integer noise (the default backends): each family is released on its public grid
(`privrl.privacy.grid`); a family whose clean values are randomized-rounded to the grid has the
rounding slack added to its sensitivities before anything is calibrated, and its samplers draw
integers in grid units (scale / grid).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
from privrl.config import MechanismName, RunConfig
from privrl.privacy.accountant import continuous_gaussian, epsilon_to_rho
from privrl.privacy.continual import CounterPlan
from privrl.privacy.grid import exact_units, round_by, rounding_slack
from privrl.privacy.mechanisms import Gaussian, Laplace
from privrl.privacy.noise import noise_backend
from privrl.privacy.psd import SymmetricNoise
from privrl.privacy.schedules import EveryEpisode, Schedule, parse_schedule
from privrl.privacy.tree import NoiseSampler, tree_levels
from privrl.trust.base import TrustBoundary
from privrl.trust.secagg.spec import CohortSpec

Mechanism = Laplace | Gaussian
# Probability that the server refuses one honest local report (its noise lands beyond the
# acceptance bounds): small enough never to be seen, large enough to keep the bounds tight.
FALSE_REFUSAL = 1e-9


@dataclass(frozen=True)
class Family:
    """A statistic family an algorithm releases: one user's contribution has `shape`, entries in
    [clean_min, clean_max], and replace-one-user sensitivities `l1`, `l2` (the calibration and the
    ledger read these; nobody re-derives them).

    `symmetric`: the last two axes hold symmetric matrices; noise is i.i.d. on the upper triangle
    (diagonal included) and mirrored, and `l1`, `l2` are measured on those released coordinates.
    `scale`: a fixed noise scale (a paper's calibration) instead of one calibrated from the
    budget; the ledger still charges what that scale actually spends.
    `grid`, `rounded`: under integer noise the family is released on the public grid of step
    `grid` (`privrl.privacy.grid`): its clean values are on it already (counts; `rounded`
    False, off-grid values are refused), or they are randomized-rounded to it (`rounded` True;
    the calibration adds the rounding slack to `l1` and `l2`).
    """

    name: str
    shape: tuple[int, ...]
    l1: float
    l2: float
    clean_max: float = 1.0
    clean_min: float = 0.0
    symmetric: bool = False
    scale: float | None = None
    grid: float = 1.0
    rounded: bool = False


@dataclass(frozen=True)
class FamilyCalibration(Family):
    """A released family as calibrated: `scale` is its noise scale (Laplace b or Gaussian sigma)
    and `cost` the pure eps (Laplace) or rho (Gaussian) of one tree node / one local report."""

    scale: float = 0.0
    cost: float = 0.0

    def to_units(self, values: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
        """One contribution in grid units (int64): randomized-rounded with `rng` when the family
        is `rounded`, else checked to lie on the grid (ValueError otherwise)."""
        if not self.rounded:
            return exact_units(values, self.grid)
        if rng is None:
            raise ValueError(f"family {self.name!r} is randomized-rounded: a generator is needed")
        return self.rows_to_units(np.asarray(values)[None], [rng])[0]  # one row's rounding

    def rows_to_units(self, rows: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """`to_units` of every row (n, *shape) at once, row r rounded with `rngs[r]`'s uniforms
        (the same draws as row by row: `shape`'s uniforms from each generator, nothing else)."""
        if not self.rounded:
            return exact_units(rows, self.grid)
        uniforms = np.empty(np.shape(rows))
        for row, rng in zip(uniforms, rngs, strict=True):
            rng.random(out=row)
        return round_by(rows, self.grid, uniforms, self.symmetric)


@dataclass(frozen=True)
class Calibration:
    """Everything privacy-related about a run that is fixed (and public) before it starts."""

    boundary: TrustBoundary  # the run's trust boundary (`privrl.trust`)
    mechanism: Mechanism | None
    families: tuple[FamilyCalibration, ...]
    levels: int  # tree levels L of the counter's T items (JDP); 1 otherwise
    smooth: bool = False  # JDP trees with the variance-reducing upward pass
    plan: CounterPlan | None = None  # JDP: the counter every family is released through
    schedule: Schedule = EveryEpisode()  # JDP: after which episodes the counters release
    # secure aggregation: the cohorts' public assumptions (`privrl.trust.secagg.spec`)
    cohort: CohortSpec | None = None

    @functools.cached_property
    def integer(self) -> bool:
        """Whether releases live on integer grids with integer noise: an integer backend that
        draws noise (at eps = inf nothing is drawn and the release is the exact one). Cached:
        the calibration is frozen, and every ingest asks."""
        return (self.mechanism is not None and self.mechanism.backend.integer
                and any(0.0 < f.scale < math.inf for f in self.families))

    @property
    def released(self) -> tuple[str, ...]:
        """Names of the families that are noised and released."""
        return tuple(f.name for f in self.families)

    @property
    def mechanism_name(self) -> MechanismName:
        """'laplace' or 'gaussian' (what a ticket names)."""
        return "gaussian" if isinstance(self.mechanism, Gaussian) else "laplace"

    @property
    def noise_scale(self) -> float:
        """Laplace b or Gaussian sigma of the reference mechanism (0 without noise): the scale of
        every family unless the families fix their own (then the smallest of them)."""
        mech = self.mechanism
        if mech is None:
            return 0.0
        return mech.sigma if isinstance(mech, Gaussian) else mech.scale

    def family(self, name: str) -> FamilyCalibration:
        """The calibration of one released family."""
        for f in self.families:
            if f.name == name:
                return f
        raise KeyError(f"no released family {name!r}")

    def scales(self) -> dict[str, float]:
        """Each released family's noise scale."""
        return {f.name: f.scale for f in self.families}

    def mechanism_of(self, name: str) -> Mechanism:
        """The mechanism that noises family `name` (its own scale, the run's backend)."""
        return self._noisers[self.family(name).name][0]

    def sampler(self, name: str) -> NoiseSampler:
        """What draws family `name`'s noise: its mechanism (in grid units under integer noise),
        mirrored for symmetric matrices."""
        return self._noisers[self.family(name).name][1]

    @functools.cached_property
    def _noisers(self) -> dict[str, tuple[Mechanism, NoiseSampler]]:
        """Each family's (`mechanism_of`, `sampler`), built once: the calibration is frozen, and
        every local report and every plan asks."""
        assert self.mechanism is not None
        out: dict[str, tuple[Mechanism, NoiseSampler]] = {}
        for fam in self.families:
            mech = sampled = _with_scale(self.mechanism, fam.scale)
            if self.integer and fam.grid != 1.0:
                sampled = _with_scale(mech, fam.scale / fam.grid)
            out[fam.name] = (mech, SymmetricNoise(sampled) if fam.symmetric else sampled)
        return out

    def counter_sampler(self, name: str) -> NoiseSampler:
        """What draws family `name`'s noise inside its JDP counter: `sampler(name)`, in the
        matrix counter's encoder units (2^16 per grid unit) when the plan is one."""
        unit = self.plan.unit if self.plan is not None and self.integer else 1.0
        if unit == 1.0:
            return self.sampler(name)
        fam = self.family(name)
        mech = _with_scale(self.mechanism_of(name), fam.scale / fam.grid * unit)
        return SymmetricNoise(mech) if fam.symmetric else mech

    @property
    def noise(self) -> str:
        """The backend that draws the noise: 'numpy' (seeded integers), 'opendp' (CSPRNG,
        exact integers) or 'float' (simulation only)."""
        return "numpy" if self.mechanism is None else self.mechanism.backend.name

    @property
    def cost_kind(self) -> str:
        """'pure' (epsilon) or 'zcdp' (rho)."""
        return "pure" if self.mechanism is None else self.mechanism.kind

    def counter_items(self, episodes: int) -> int:
        """How many items the release sums once `episodes` episodes were reported (the
        boundary's: the schedule's releases through central counters, else one per report)."""
        return self.boundary.counter_items(self, episodes)

    def _unit_std(self, family: str | None) -> float:
        """Std of one noise draw of the reference mechanism or of `family`, natural units."""
        assert self.mechanism is not None
        return self.mechanism.std() if family is None else self.mechanism_of(family).std()

    def release_std(self, episodes: int, family: str | None = None) -> float:
        """Std of one billboard entry's error once `episodes` episodes were reported
        (data-independent): the counter's release after `counter_items(episodes)` items (JDP:
        tree, smoothed tree or matrix counter, at the run's schedule), or the sum of as many
        local reports (LDP); of the reference mechanism or of `family`."""
        items = self.counter_items(episodes)
        if self.mechanism is None or items == 0:
            return 0.0
        return self._unit_std(family) * math.sqrt(self.boundary.variance_factor(self, items))

    def release_std_bound(self, episodes: int, family: str | None = None) -> float:
        """max over e <= episodes of `release_std(e)`: a non-decreasing, data-independent bound
        (trees: a release after t items sums at most floor(log2(t+1)) nodes; the matrix
        counter's variance grows with t)."""
        items = self.counter_items(episodes)
        if self.mechanism is None or items == 0:
            return 0.0
        return self._unit_std(family) * math.sqrt(self.boundary.max_variance_factor(self, items))

    def report_entries(self) -> int:
        """Numbers in one local report (every entry of every released family)."""
        return sum(math.prod(f.shape) for f in self.families)

    def acceptance_margin(
        self, false_refusal: float = FALSE_REFUSAL, family: str | None = None
    ) -> float:
        """How far outside its clean range [clean_min, clean_max] a report's entry may lie (of
        the reference mechanism, or of `family`'s): the boundary's (noisy reports: the
        mechanism's tail at `false_refusal` over the report's entries; raw reports: 0)."""
        return self.boundary.acceptance_margin(self, false_refusal, family)


def calibrate(config: RunConfig, families: Sequence[Family]) -> Calibration:
    """Calibrate the run's noise from its budget and its algorithm's released families, then
    let its boundary adjust it (`TrustBoundary.finish_calibration`).

    Every family is released with one mechanism: its scale comes from the largest sensitivity
    (a family with a smaller one spends less, and the ledger records what it actually spends).
    """
    return config.boundary.finish_calibration(_calibrate(config, families), config)


def _calibrate(config: RunConfig, families: Sequence[Family]) -> Calibration:
    """`calibrate` before the boundary's adjustment."""
    families = tuple(families)
    boundary = config.boundary
    if (boundary.private and not math.isinf(config.epsilon)
            and noise_backend(config.noise).integer):
        families = tuple(_with_rounding_slack(f, config.mechanism) for f in families)
    plan, schedule = counter_plan(config)
    levels = tree_levels(plan.releases) if plan is not None else 1
    weight = encoder_weight(plan)
    smooth = plan is not None and plan.kind == "smoothed"
    if not boundary.private or not families:
        return Calibration(
            boundary, None, tuple(_calibrated(f, 0.0, 0.0) for f in families), levels,
            smooth, plan, schedule,
        )
    eps, backend = config.epsilon, noise_backend(config.noise)
    fixed = [f.scale for f in families]
    if any(x is not None for x in fixed):
        return _fixed_scales(config, families, levels, smooth, plan, schedule)
    l1 = max(f.l1 for f in families)
    if config.mechanism == "laplace":
        eps_f = eps / len(families)
        laplace = (Laplace(0.0, backend) if math.isinf(eps)
                   else replace(Laplace.calibrate(eps_f / weight, l1), backend=backend))
        costs = [laplace.epsilon(f.l1) for f in families]
        mech: Mechanism = laplace
    else:
        if math.isinf(eps):
            mech = Gaussian(0.0, backend)
        else:
            rho = epsilon_to_rho(eps, config.delta,
                                 continuous=continuous_gaussian(config.noise))
            mech = Gaussian(math.sqrt(weight * sum(f.l2**2 for f in families) / (2.0 * rho)),
                            backend)
        costs = [mech.rho(f.l2) for f in families]
    scale = mech.sigma if isinstance(mech, Gaussian) else mech.scale
    fams = tuple(_calibrated(f, c, scale) for f, c in zip(families, costs, strict=True))
    return Calibration(boundary, mech, fams, levels, smooth, plan, schedule)


def counter_plan(config: RunConfig) -> tuple[CounterPlan | None, Schedule]:
    """The central counter plan of `config` (its counter over the schedule's releases in K
    episodes; None unless its boundary releases through counters) and its release schedule. A
    configuration no algorithm has bound (schedule None: the preset's) releases every episode;
    its counter must be given."""
    schedule = parse_schedule(config.schedule or "every")
    if not config.boundary.counters:
        return None, schedule
    if config.counter is None:
        raise ValueError("the counter is the preset's until an algorithm binds the"
                         " configuration: calibrate `privrl.algorithms.effective(config)`")
    releases = schedule.releases(config.episodes)
    if releases < 1:
        raise ValueError(f"schedule {config.schedule!r} releases nothing in {config.episodes}"
                         " episodes")
    return CounterPlan(config.counter, releases, config.counter_bands), schedule


def encoder_weight(plan: CounterPlan | None) -> float:
    """How many node costs one item spends over the run: the squared largest encoder column
    norm (trees: exactly their levels; Laplace trees: the same count of nodes), 1 without a
    counter."""
    if plan is None:
        return 1.0
    if plan.kind == "matrix":
        return plan.column_norm() ** 2
    return float(tree_levels(plan.releases))


def sensitivity_split(l2: Sequence[float], levels: float, rho: float) -> list[float]:
    """Gaussian scales of families with l2 sensitivities `l2`, each released in `levels` nodes,
    spending exactly `rho` in all with sigma_f^2 proportional to Delta_f (the minimiser of
    sum_f sigma_f^2 subject to sum_f L Delta_f^2 / (2 sigma_f^2) = rho, by Lagrange)."""
    if any(x <= 0.0 for x in l2) or rho <= 0.0:
        raise ValueError("a sensitivity split needs positive sensitivities and rho")
    total = math.fsum(l2)
    return [math.sqrt(levels * x * total / (2.0 * rho)) for x in l2]


def split_scales(config: RunConfig, l2: Sequence[float]) -> list[float] | None:
    """The per-family Gaussian scales `sensitivity_split` gives for `config`'s whole budget (tree
    levels in JDP, one report in LDP), or None when the run adds no Gaussian noise."""
    if (not config.boundary.private or config.mechanism != "gaussian"
            or math.isinf(config.epsilon)):
        return None
    levels = encoder_weight(counter_plan(config)[0])
    rho = epsilon_to_rho(config.epsilon, config.delta, continuous=continuous_gaussian(config.noise))
    return sensitivity_split(l2, levels, rho)


def _fixed_scales(
    config: RunConfig, families: tuple[Family, ...], levels: int, smooth: bool,
    plan: CounterPlan | None, schedule: Schedule,
) -> Calibration:
    """Families that fix their own noise scale: each is charged what its scale spends."""
    if any(f.scale is None for f in families):
        raise ValueError("either every released family fixes its noise scale or none does")
    scales = [float(f.scale) for f in families]  # type: ignore[arg-type]
    backend = noise_backend(config.noise)
    cls = Gaussian if config.mechanism == "gaussian" else Laplace
    ref = cls(min(scales), backend)
    costs = []
    for f, scale in zip(families, scales, strict=True):
        mech = _with_scale(ref, scale)
        costs.append(mech.rho(f.l2) if isinstance(mech, Gaussian) else mech.epsilon(f.l1))
    fams = tuple(_calibrated(f, c, s) for f, c, s in zip(families, costs, scales, strict=True))
    return Calibration(config.boundary, ref, fams, levels, smooth, plan, schedule)


def _with_scale(mech: Mechanism, scale: float) -> Mechanism:
    """The same mechanism (kind, backend) at another scale."""
    if isinstance(mech, Gaussian):
        return mech if mech.sigma == scale else replace(mech, sigma=scale)
    return mech if mech.scale == scale else replace(mech, scale=scale)


def _with_rounding_slack(family: Family, mechanism: str) -> Family:
    """A family randomized-rounded to its grid, with the rounding slack in its sensitivities.
    A fixed scale (a paper's, for the clean sensitivity) grows with the sensitivity its mechanism
    reads, so it spends what it spent on the clean statistic: the slack is paid in noise."""
    if not family.rounded:
        return family
    l1, l2 = rounding_slack(family.shape, family.grid, family.symmetric)
    out = replace(family, l1=family.l1 + l1, l2=family.l2 + l2)
    if family.scale is not None and family.scale > 0:
        old, new = (family.l2, out.l2) if mechanism == "gaussian" else (family.l1, out.l1)
        out = replace(out, scale=family.scale * (new / old if old > 0 else 1.0))
    return out


def _calibrated(family: Family, cost: float, scale: float) -> FamilyCalibration:
    """A declared family with the cost of one of its nodes / local reports and its scale."""
    declared = {f.name: getattr(family, f.name) for f in fields(Family)}
    return FamilyCalibration(**{**declared, "scale": scale, "cost": cost})
