"""The central privatizer of the LSVI-UCB family: a trusted store of raw history plus its releases.

LSVI re-evaluates every past transition with the newest value function, so no user can privatize
its contribution once (Luyo et al. 2021, Remark 5): the raw history stays here, inside the trusted
curator (JDP only), and only two things ever leave:

* the Gram matrices, through one continual counter per run (the algorithm's `CounterPlan`: tree,
  smoothed tree or matrix counter, shape (H, d, d), symmetric Gaussian noise) whose leaves are
  the sums of the episodes between two releases of the schedule (every episode or batches),
  each leaf charged its release weight, shifted by a public diagonal and floored at a public
  eigenvalue (post-processing);
* at each release round, the targets of every step with fresh Gaussian noise, solved into w_h.

The billboard is the Gram snapshot the weights were solved against and the weights ("gram",
"w"); when a round happens is the algorithm's public rule (`LSVIAlgorithm.release_due`), a
function of released values only. Every tree level that opens and every round is charged to the
ledger at the scales in use. With R replicas, a round of any replica is charged once, so the
ledger states the largest spend of any replica (exact on a server, R = 1).

Target noise of replica r's round n comes from `generator(seed_r, "lsvi", "target", n)`, node
noise from the tree's counter-based seeds: a restarted server rebuilds exactly the values it
already published (contract 2).

Under integer noise both families live on their public grid: each episode's Gram item is
randomized-rounded from `generator(seed_r, "grid", "gram", episode)` and the tree works in grid
units; each round's clean targets of step h are randomized-rounded from
`generator(seed_r, "lsvi", "grid", n, h)` and receive integer noise in grid units.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...privacy.accountant import Charge, Ledger
from ...privacy.calibration import Calibration
from ...privacy.continual import CounterPlan
from ...privacy.privatizers import NoServerNoise, family_charges
from ...privacy.psd import regularize
from ...privacy.tree import levels_released
from ...seeding import generator
from ...stats import Stats
from .lsvi import History, backward_pass

if TYPE_CHECKING:
    from .common import LSVIAlgorithm


class TrustedLSVI(NoServerNoise):
    """History in, (Gram snapshot, weights) out, on the algorithm's public release schedule.

    All its noise is seeded (the algorithm refuses an unseeded backend), so a replay re-derives
    every draw and nothing is journalled (`NoServerNoise`)."""

    def __init__(self, algorithm: LSVIAlgorithm, calibration: Calibration, seeds: list[int],
                 max_items: int) -> None:
        self.algorithm, self.calibration = algorithm, calibration
        self.seeds = [int(s) for s in seeds]
        self.max_items = int(max_items)
        model, horizon = algorithm.model, algorithm.config.horizon
        n_rep, d = len(self.seeds), model.d
        self.private = calibration.mechanism is not None
        self.integer = calibration.integer
        plan = algorithm.counter_plan
        if plan.kind == "matrix" and not self.integer:  # eps = inf: nothing to encode
            plan = CounterPlan("tree", plan.releases)
        self.counter = (plan.build((horizon, d, d), calibration.counter_sampler("gram"),
                                   self.seeds, "gram", integer=self.integer)
                        if self.private else None)
        self._weights = algorithm.counter_plan.release_weights()
        self.exact_gram = np.zeros((n_rep, horizon, d, d))  # only without noise
        self.pending = np.zeros((n_rep, horizon, d, d))  # Gram items since the last leaf
        self.leaves = 0
        self.history = History(n_rep, horizon, d, model.S)
        eye = np.eye(d)
        self.current = np.broadcast_to(algorithm.initial_diagonal * eye,
                                       (n_rep, horizon, d, d)).copy()
        self.snapshot = self.current.copy()
        self.w = np.zeros((n_rep, horizon, d))
        self.rounds = np.zeros(n_rep, dtype=np.int64)
        self.charged_rounds = 0
        self.fallbacks = 0  # Gram releases whose eigenvalues had to be floored (bad noise event)
        self.items = 0

    # -- the privacy layer's interface (privrl.privacy.privatizers.Privatizer) -----------------

    def ingest(self, stats: Stats, ledger: Ledger) -> None:
        """Store one episode per replica; close a Gram leaf and run a release round when due."""
        if self.items >= self.max_items:
            raise ValueError(f"all {self.max_items} episodes of this run are in")
        ledger.admit(self._worst_charges(self.items + 1))  # before anything changes or is drawn
        phi = stats["phi"]
        self.history.add(phi, stats["reward"], stats["next_state"].astype(np.int64))
        self.pending += np.einsum("rhi,rhj->rhij", phi, phi)
        self.items += 1
        if self.algorithm.leaf_closes(self.items):
            self._close_leaf(ledger)
        due = self.algorithm.release_due(self.items, self.current, self.snapshot, self.rounds)
        if due.any():
            self._release_round(due, ledger)

    def release(self) -> Stats:
        """The billboard: the Gram snapshot (R, H, d, d) the weights (R, H, d) were solved with."""
        return {"gram": self.snapshot.copy(), "w": self.w.copy()}

    def plan(self) -> list[Charge]:
        """What the whole run charges at most: every level of the Gram tree over the leaves that
        ever close, and every release round the algorithm allows (`planned_rounds`)."""
        if not self.private:
            return []
        rounds = self.algorithm.planned_rounds()
        return [*[c for leaf in range(1, self.algorithm.planned_leaves() + 1)
                  for c in self._leaf_charges(leaf, 0)],
                *[c for n in range(1, rounds + 1) for c in self._round_charges(n, 0)]]

    # -- internals -------------------------------------------------------------------------------

    def _leaf_charges(self, leaf: int, at: int) -> list[Charge]:
        """What Gram leaf `leaf` adds to the worst-case user's spend: its counter's release
        weight in node costs (a tree: one node cost when a new level opens)."""
        weight = self._weights[leaf - 1]
        if weight == 0.0:
            return []
        if self.algorithm.counter_plan.kind == "matrix":
            return family_charges(self.calibration, "matrix", f"matrix release {leaf}", at,
                                  names=("gram",), weight=weight)
        level = levels_released(leaf) - 1
        return family_charges(self.calibration, "tree", f"tree level {level} released", at,
                              names=("gram",))

    def _round_charges(self, top: int, at: int) -> list[Charge]:
        """The charges of release round `top` (every step's targets)."""
        return family_charges(self.calibration, "release", f"targets of round {top}", at,
                              names=("target",))

    def _worst_charges(self, items: int) -> list[Charge]:
        """The most that ingesting episode `items` can charge: a newly opened Gram tree level
        and, when one may happen, a new release round (the filter admits these first)."""
        if not self.private:
            return []
        out = []
        if self.algorithm.leaf_closes(items):
            out += self._leaf_charges(self.leaves + 1, items)
        nxt = self.rounds + 1  # each replica's next round, if it may still have one
        nxt = nxt[nxt <= self.algorithm.planned_rounds()]
        top = int(nxt.max()) if nxt.size else 0
        if top > self.charged_rounds and self.algorithm.may_release(items, self.rounds):
            out += self._round_charges(top, items)
        return out

    def _close_leaf(self, ledger: Ledger) -> None:
        """Add the pending Gram sum as one leaf; charge a newly opened tree level."""
        self.leaves += 1
        if self.counter is None:
            self.exact_gram += self.pending
            prefix = self.exact_gram
        else:
            self.counter.add(self._leaf_item())
            prefix = self.counter.release()
            if self.integer:
                prefix = prefix * self.calibration.family("gram").grid
            ledger.charge_all(self._leaf_charges(self.leaves, self.items))
        self.pending = np.zeros_like(self.pending)
        algo = self.algorithm
        reg = regularize(prefix, algo.gram_diagonal, floor=algo.gram_floor)
        self.fallbacks += int(reg.floored.sum())
        self.current = reg.matrices

    def _leaf_item(self) -> np.ndarray:
        """The pending Gram sum as the counter's item: under integer noise randomized-rounded to
        the grid once per leaf from `generator(seed_r, "grid", "gram", leaf)` (a user is in one
        leaf, so the rounding slack of one item bounds it)."""
        if not self.integer:
            return self.pending
        fam = self.calibration.family("gram")
        return np.stack([fam.to_units(self.pending[r], generator(seed, "grid", "gram",
                                                                  self.leaves))
                         for r, seed in enumerate(self.seeds)])

    def _target_noise(self, due: np.ndarray) -> np.ndarray:
        """Fresh N(0, sigma_target^2) noise (R, H, d) for the replicas in `due` (else zeros);
        integers in grid units under integer noise."""
        shape = self.w.shape[1:]
        noise = np.zeros(self.w.shape, dtype=np.int64 if self.integer else np.float64)
        if not self.private:
            return noise
        sampler = self.calibration.sampler("target")
        for r in np.flatnonzero(due):
            rng = generator(self.seeds[r], "lsvi", "target", int(self.rounds[r]) + 1)
            noise[r] = sampler.sample(rng, shape)
        return noise

    def _targets_released(self, due: np.ndarray, noise: np.ndarray
                          ) -> Callable[[int, np.ndarray], np.ndarray]:
        """Step h's clean targets (R, d) -> their release: plus the noise, and under integer
        noise first randomized-rounded to the grid, all in grid units (replicas not in `due`
        keep their clean targets: their weights are not taken)."""
        if not (self.private and self.integer):
            return lambda h, target: target + noise[:, h]
        fam = self.calibration.family("target")

        def release(h: int, target: np.ndarray) -> np.ndarray:
            out = target.copy()
            for r in np.flatnonzero(due):
                rng = generator(self.seeds[r], "lsvi", "grid", int(self.rounds[r]) + 1, h)
                out[r] = (fam.to_units(target[r], rng) + noise[r, h]) * fam.grid
            return out

        return release

    def _release_round(self, due: np.ndarray, ledger: Ledger) -> None:
        """Solve LSVI against the current Gram release for the replicas in `due`; charge it."""
        noise = self._target_noise(due)
        w = backward_pass(self.algorithm.model.features, self.history, self.current,
                          self.algorithm.beta, self._targets_released(due, noise))
        self.w[due] = w[due]
        self.snapshot[due] = self.current[due]
        self.rounds[due] += 1
        top = int(self.rounds.max())
        if self.private and top > self.charged_rounds:
            self.charged_rounds = top
            ledger.charge_all(self._round_charges(top, self.items))
