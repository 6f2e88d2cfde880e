"""From a public run configuration to calibrated mechanisms and ledger charges.

Neighbouring relation: replace one user (one trajectory). Each algorithm declares the statistic
families it releases with their replace-one sensitivities (`algorithms.base.Family`); this module
only reads them (DP-UCBVI's: l1 = 2H, l2 = sqrt(2H) per step; erratum E3).

Budget split:
  Laplace (pure eps): eps is split evenly over the released families; in JDP each family's tree
    node gets scale L * Delta_1 / eps_f (an item enters L nodes); in LDP each entry gets
    Delta_1 / eps_f (Delta_1: the largest l1 of the families).
  Gaussian (zCDP): rho solves rho_to_epsilon(rho, delta) = eps (tight conversion); one sigma for
    all families with sigma^2 = L * sum_f Delta_2f^2 / (2 rho) (JDP, L = 1 in LDP).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from privrl.config import RunConfig
from privrl.privacy.accountant import epsilon_to_rho
from privrl.privacy.mechanisms import Gaussian, Laplace
from privrl.privacy.noise import noise_backend
from privrl.privacy.tree import release_variance, tree_levels

if TYPE_CHECKING:
    from privrl.algorithms.base import Family

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


def calibrate(config: RunConfig, families: Sequence[Family] | None = None) -> Calibration:
    """Calibrate the run's noise from its budget and its algorithm's released families.

    `families` defaults to what `config`'s algorithm declares. Every family is released with one
    mechanism: its scale comes from the largest sensitivity (a family with a smaller one spends
    less, and the ledger records what it actually spends).
    """
    if families is None:
        families = config.algorithm().families()
    families = tuple(families)
    levels = tree_levels(config.episodes) if config.privacy == "jdp" else 1
    smooth = config.privacy == "jdp" and config.smoothed_tree
    if config.privacy == "none" or not families:
        return Calibration(
            config.privacy, None, tuple(_calibrated(f, 0.0) for f in families), levels
        )
    eps, backend = config.epsilon, noise_backend(config.noise)
    l1 = max(f.l1 for f in families)
    if config.mechanism == "laplace":
        eps_f = eps / len(families)
        mech: Mechanism = replace(Laplace.calibrate(eps_f / levels, l1), backend=backend)
        if math.isinf(eps):
            mech = Laplace(0.0, backend)
        costs = [mech.epsilon(f.l1) for f in families]
    else:
        if math.isinf(eps):
            mech = Gaussian(0.0, backend)
        else:
            rho = epsilon_to_rho(eps, config.delta)
            mech = Gaussian(math.sqrt(levels * sum(f.l2**2 for f in families) / (2.0 * rho)),
                            backend)
        costs = [mech.rho(f.l2) for f in families]
    fams = tuple(_calibrated(f, c) for f, c in zip(families, costs, strict=True))
    return Calibration(config.privacy, mech, fams, levels, smooth)


def _calibrated(family: Family, cost: float) -> FamilyCalibration:
    """A declared family with the cost of one of its nodes / local reports."""
    return FamilyCalibration(
        family.name, family.shape, family.l1, family.l2, cost, family.clean_max
    )
