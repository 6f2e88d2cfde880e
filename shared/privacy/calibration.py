"""From a public run configuration to calibrated mechanisms, radii and ledger charges.

Neighbouring relation: replace one user (one trajectory). Per step h a replaced user moves one
unit from one cell to another, so every family has replace-one l1 sensitivity 2H (the paper used
H: erratum E3) and l2 sensitivity sqrt(2H) per step h, or sqrt(2)*H when pooled over h.

Budget split:
  Laplace (pure eps): eps is split evenly over the released families; in JDP each family's tree
    node gets scale L * Delta_1 / eps_f (an item enters L nodes); in LDP each entry gets
    Delta_1 / eps_f.
  Gaussian (zCDP): rho solves rho_to_epsilon(rho, delta) = eps (tight conversion); one sigma for
    all families with sigma^2 = L * sum_f Delta_2f^2 / (2 rho) (JDP, L = 1 in LDP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from shared.config import RunConfig
from shared.privacy.accountant import epsilon_to_rho
from shared.privacy.mechanisms import Gaussian, Laplace
from shared.privacy.noise import noise_backend
from shared.privacy.tree import release_variance, tree_levels
from shared.stats import family_shapes

Mechanism = Laplace | Gaussian
# Probability that the server refuses one honest local report (its noise lands beyond the
# acceptance bounds): small enough never to be seen, large enough to keep the bounds tight.
FALSE_REFUSAL = 1e-9


@dataclass(frozen=True)
class FamilyCalibration:
    """One released statistic family: its shape, sensitivities and the cost of one node/report."""

    name: str
    shape: tuple[int, ...]
    l1: float
    l2: float
    cost: float  # pure eps (Laplace) or rho (Gaussian) of one tree node / one local report
    clean_max: float = 1.0  # one user's clean entries lie in [0, clean_max] (H when pooled)


@dataclass(frozen=True)
class Calibration:
    """Everything privacy-related about a run that is fixed (and public) before it starts."""

    mode: str
    mechanism: Mechanism | None
    families: tuple[FamilyCalibration, ...]
    levels: int  # tree levels L (JDP); 1 otherwise
    union_radius: float  # spec §4.3 / §5.3 radius E (0 without noise)
    smooth: bool = False  # JDP trees with the variance-reducing upward pass

    @property
    def released(self) -> tuple[str, ...]:
        """Names of the families that are noised and released."""
        return tuple(f.name for f in self.families)

    @property
    def mechanism_name(self) -> str:
        """'laplace' or 'gaussian' (what a ticket names)."""
        return "gaussian" if isinstance(self.mechanism, Gaussian) else "laplace"

    @property
    def noise_scale(self) -> float:
        """Laplace b or Gaussian sigma of every noised entry (0 without noise)."""
        mech = self.mechanism
        if mech is None:
            return 0.0
        return mech.sigma if isinstance(mech, Gaussian) else mech.scale

    @property
    def noise(self) -> str:
        """The backend that draws the noise: 'numpy' (seeded) or 'opendp' (CSPRNG, exact)."""
        return "numpy" if self.mechanism is None else self.mechanism.backend.name

    @property
    def cost_kind(self) -> str:
        """'pure' (epsilon) or 'zcdp' (rho)."""
        return "pure" if self.mechanism is None else self.mechanism.kind

    def release_std(self, items: int) -> float:
        """Std of one released entry's error after `items` reports (data-independent)."""
        if self.mechanism is None or items == 0:
            return 0.0
        if self.mode == "jdp":
            return self.mechanism.std() * math.sqrt(release_variance(items, self.smooth))
        return self.mechanism.std() * math.sqrt(items)

    def report_entries(self) -> int:
        """Numbers in one local report (every entry of every released family)."""
        return sum(math.prod(f.shape) for f in self.families)

    def acceptance_margin(self, false_refusal: float = FALSE_REFUSAL) -> float:
        """How far outside its clean range [0, clean_max] a local report's entry may lie.

        The mechanism's tail at `false_refusal / entries` per entry: an honest report (clean
        values plus this calibration's noise) has any entry beyond it with probability at most
        `false_refusal` (union bound over the report's entries).
        """
        if self.mechanism is None or self.mode != "ldp":
            return 0.0
        return self.mechanism.max_abs_bound(self.report_entries(), false_refusal)

    def max_shift(self, false_refusal: float = FALSE_REFUSAL) -> float:
        """The largest change one dishonest user can make to one billboard entry, in noise
        scales: any accepted value minus any honest clean value, over the noise scale."""
        if not self.noise_scale:
            return 0.0
        clean = max((f.clean_max for f in self.families), default=0.0)
        return (clean + self.acceptance_margin(false_refusal)) / self.noise_scale

    def pair_std(self, items: int, derived: bool) -> float:
        """Std of the N(s,a) release error: sqrt(S) x larger when summed from N(s,a,s')."""
        std = self.release_std(items)
        if derived and self.families:
            std *= math.sqrt(self.families[0].shape[-1])
        return std


def _sensitivities(horizon: int, pooled: bool) -> tuple[float, float]:
    """Replace-one (l1, l2) sensitivity shared by every tabular family."""
    l1 = 2.0 * horizon
    l2 = math.sqrt(2.0) * horizon if pooled else math.sqrt(2.0 * horizon)
    return l1, l2


def calibrate(config: RunConfig) -> Calibration:
    """Calibrate the run's noise from its budget and the families' sensitivities."""
    shapes = family_shapes(config.n_states, config.n_actions, config.horizon, config.pooled)
    names = ["sas", "r"] if config.derived_pairs else ["sas", "sa", "r"]
    l1, l2 = _sensitivities(config.horizon, config.pooled)
    clean_max = float(config.horizon) if config.pooled else 1.0
    levels = tree_levels(config.episodes) if config.privacy == "jdp" else 1
    smooth = config.privacy == "jdp" and config.smoothed_tree
    if config.privacy == "none":
        return Calibration("none", None, (), 1, 0.0)
    eps = config.epsilon
    backend = noise_backend(config.noise)
    if math.isinf(eps):
        mech: Mechanism = (
            Laplace(0.0, backend) if config.mechanism == "laplace" else Gaussian(0.0, backend)
        )
        cost = mech.epsilon(l1) if isinstance(mech, Laplace) else mech.rho(l2)  # = inf: no noise
        fams = tuple(FamilyCalibration(n, shapes[n], l1, l2, cost, clean_max) for n in names)
        return Calibration(config.privacy, mech, fams, levels, 0.0, smooth)
    if config.mechanism == "laplace":
        eps_f = eps / len(names)
        mech = replace(Laplace.calibrate(eps_f / levels, l1), backend=backend)
        fams = tuple(
            FamilyCalibration(n, shapes[n], l1, l2, mech.epsilon(l1), clean_max) for n in names
        )
    else:
        rho = epsilon_to_rho(eps, config.delta)
        sigma = math.sqrt(levels * len(names) * l2**2 / (2.0 * rho))
        mech = Gaussian(sigma, backend)
        fams = tuple(
            FamilyCalibration(n, shapes[n], l1, l2, mech.rho(l2), clean_max) for n in names
        )
    m = levels if config.privacy == "jdp" else config.episodes
    s, a = config.n_states, config.n_actions
    counters = config.episodes * config.horizon * s * a * (s + 2)
    delta_prime = config.beta / (3.0 * counters)
    radius = 4.0 * mech.tail_bound(m, delta_prime)
    return Calibration(config.privacy, mech, fams, levels, radius, smooth)


def radius(calibration: Calibration, config: RunConfig, items: int) -> float:
    """The public error radius E used by the learner after `items` reports (spec E1, E7)."""
    knobs = config.resolved_knobs
    if calibration.mechanism is None:
        return 0.0
    if knobs.radius_mode == "union":
        return knobs.radius_scale * calibration.union_radius
    return knobs.radius_scale * calibration.release_std(items)

