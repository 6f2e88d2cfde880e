"""The trusted curator of a policy-evaluation round: sufficient statistics in, one theta out.

Non-private and JDP runs of DP-LSW / DP-LSL use this privatizer instead of the generic tree
counters: the smoothed-sensitivity release is one Gaussian draw whose scale depends on the data,
after exactly m reports (Balle et al. 2016). Until then nothing is published; afterwards only
theta_hat (the algorithm's post-processing adds V_hat = Phi theta_hat). The counts n, the return
sums g and the noise scale sigma_X stay inside (sigma_X is a function of the private signature).

Return sums are kept in fixed point (integers of 2^-k, k <= 40 chosen so that m F_max 2^k < 2^62):
integer addition does not depend on the order of the reports, so concurrent users reporting in
any order give exactly the sums (and theta) of the in-process run with the same seeds. Each
return is rounded to the grid once (a per-user function of the report, still in [0, F_max]).

Under integer noise theta_X is randomized-rounded to the public grid 2^-30 (from the seeded stream
("policy-eval", "grid")) and receives discrete Gaussian noise in grid units, so the release has
nothing of theta_X in its low bits. The rounding moves theta_X by less than sqrt(d) 2^-30 in l2;
that slack is not yet part of the smoothed-sensitivity bound.

The noise is drawn once, cached, and charged to the ledger once at its true (eps, delta). With the
seeded numpy backend it is a function of the run's secret seed (`generator(seed,
"policy-eval", "theta")`), so a restarted server rebuilds the same theta_hat; with the unseeded
'opendp' backend the draw is journalled for the server to persist and a replay takes it from the
store (a missing one is a `StoredNoiseError`, never a fresh draw).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ...privacy.accountant import Charge, Ledger
from ...privacy.grid import randomized_round
from ...privacy.mechanisms import Gaussian
from ...privacy.noise import NoiseBackend, noise_label
from ...privacy.tree import NodeNoise, StoredNoiseError
from ...seeding import generator
from ...stats import Stats

FAMILY = "theta"  # the one released array (and the name its stored noise goes under)
MAX_GRID_BITS = 40
THETA_GRID = 2.0**-30  # the public grid of theta's release under integer noise


def fixed_point_scale(max_items: int, return_bound: float) -> float:
    """2^k with k <= 40 such that `max_items` returns in [0, return_bound] sum below 2^62."""
    room = 62.0 - math.log2(max(max_items * return_bound, 1.0))
    return 2.0 ** min(MAX_GRID_BITS, math.floor(room))


class TrustedRelease:
    """Accumulates (n, g) per replica and releases theta_hat once, after `max_items` reports.

    `estimate(m, n, g)` is the non-private estimate (R, d); `noise_scale(m, n)` the per-replica
    sigma_X (None: a non-private run, nothing drawn or charged); `charge` records the release.
    """

    def __init__(
        self,
        seeds: Sequence[int],
        max_items: int,
        n_states: int,
        return_bound: float,
        estimate: Callable[[int, np.ndarray, np.ndarray], np.ndarray],
        noise_scale: Callable[[int, np.ndarray], np.ndarray] | None,
        charge: Callable[[Ledger, str], None],
        backend: NoiseBackend,
    ) -> None:
        self.seeds = [int(s) for s in seeds]
        self.max_items = int(max_items)
        self.items = 0
        self.scale = fixed_point_scale(self.max_items, return_bound)
        self.n = np.zeros((len(self.seeds), n_states), dtype=np.int64)
        self.g = np.zeros((len(self.seeds), n_states), dtype=np.int64)  # sums in units 1/scale
        self.estimate, self.noise_scale, self.charge = estimate, noise_scale, charge
        self.backend = backend
        self.journal = False
        self._theta: np.ndarray | None = None
        self._drawn: list[NodeNoise] = []
        self._stored: np.ndarray | None = None
        self._replaying = False

    def ingest(self, stats: Stats, ledger: Ledger) -> None:
        """Add one report per replica; the m-th report triggers the one release."""
        if self.items >= self.max_items:
            raise ValueError(f"all {self.max_items} reports of this round are in")
        if self.items + 1 == self.max_items:  # the filter admits the release before any change
            ledger.admit(self.plan())
        self.n += np.rint(stats["visits"]).astype(np.int64)
        self.g += np.rint(np.asarray(stats["returns"]) * self.scale).astype(np.int64)
        self.items += 1
        if self.items == self.max_items:
            self._release(ledger)

    def plan(self) -> list[Charge]:
        """What the whole round charges: the one release of theta (nothing without noise)."""
        if self.noise_scale is None:
            return []
        scratch = Ledger()
        self.charge(scratch, noise_label(self.backend.name))
        return list(scratch.entries)

    def _release(self, ledger: Ledger) -> None:
        """theta_hat = theta_X + N(0, sigma_X^2 I) per replica, drawn once and charged once."""
        m = self.max_items
        n, g = self.n.astype(np.float64), self.g / self.scale  # exact: a power of 2
        theta = self.estimate(m, n, g)
        if self.noise_scale is not None:
            sigma = np.asarray(self.noise_scale(m, n), dtype=np.float64)
            if self.backend.integer and np.any(sigma > 0):
                units = np.stack([randomized_round(theta[r], THETA_GRID,
                                                   generator(seed, "policy-eval", "grid"))
                                  for r, seed in enumerate(self.seeds)])
                noise = self._noise(sigma / THETA_GRID, theta.shape[1]).astype(np.int64)
                theta = (units + noise) * THETA_GRID
            else:
                theta = theta + self._noise(sigma, theta.shape[1])
            self.charge(ledger, noise_label(self.backend.name))
        self._theta = theta

    def _noise(self, sigma: np.ndarray, d: int) -> np.ndarray:
        """One N(0, sigma_r^2 I_d) draw per replica (discrete, in grid units, under integer
        noise): seeded, stored (replay) or fresh."""
        if self._stored is not None:
            stored, self._stored = self._stored, None
            return stored
        if self._replaying and not self.backend.reproducible:
            raise StoredNoiseError(
                "the release of theta needs its stored noise, which is missing; unseeded noise"
                " is never re-drawn"
            )
        rows = []
        for r, seed in enumerate(self.seeds):
            rng = generator(seed, "policy-eval", FAMILY) if self.backend.reproducible else None
            rows.append(Gaussian(float(sigma[r]), self.backend).sample(rng, (d,)))
        value = np.stack(rows)
        if self.journal and not self.backend.reproducible:
            self._drawn.append(NodeNoise(FAMILY, 0, 0, value))
        return value

    def release(self) -> Stats:
        """{'theta': (R, d)} once all m reports are in; nothing before."""
        return {} if self._theta is None else {FAMILY: self._theta.copy()}

    def journal_noise(self) -> None:
        """Keep an unseeded draw until `take_drawn` (a server persists it)."""
        self.journal = True

    def take_drawn(self) -> list[NodeNoise]:
        """The unseeded noise drawn since the last call."""
        drawn, self._drawn = self._drawn, []
        return drawn

    def begin_replay(self, nodes: Iterable[NodeNoise]) -> None:
        """Serve the stored draw of theta's noise (if any) and draw no unseeded noise."""
        for node in nodes:
            value = np.asarray(node.value, dtype=np.float64)
            if node.family != FAMILY or (node.level, node.index) != (0, 0) or (
                value.size % len(self.seeds)
            ):
                raise StoredNoiseError(f"stored noise {node.family!r} does not fit this release")
            self._stored = value.reshape(len(self.seeds), -1)
        self._replaying = True

    def end_replay(self) -> None:
        """Draw fresh noise again; a stored draw the replay never used means a broken store."""
        self._replaying = False
        if self._stored is not None:
            self._stored = None
            raise StoredNoiseError("the stored noise of theta was never used by the replay")
