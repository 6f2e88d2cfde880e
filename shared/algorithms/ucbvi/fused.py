"""DP-UCBVI's own in-process episode loop: plan, roll out and count in one compiled call per block
of episodes (`privrl.accel.kernels.run_episodes`). Not part of the plug-in contract.

It gives the generic loop's numbers (`privrl.run.run_in_process`), from the same draws made with
numpy's Generator before each block: each user's rollout uniforms and report noise from its own
streams (rollout uniforms by episode, report noise by the user's nonce, here its episode
index: `privrl.run.user_episode`) and the tie-break draws from the learner's
(`DPUCBVI.tie_keys`); the ledger is charged through the privatizer's `record` for a whole block
before its noise is drawn (admit, then draw), and regret is the evaluator's: the kernel
reports each played policy's expected return with the evaluator's own kernel (`policy_values`,
here redone only from the last step the policy changed at).

It serves the runs where it buys the most (3.5x at K = 20,000 for LDP, 6.4x non-private:
docs/explanation/speed.md): non-private and LDP runs in a tabular world, without noise, with
float noise (simulation only) or with seeded integer noise whose families all live on the unit
grid (counts, and rewards turned into Bernoulli counts by each user). Anything else (JDP's
central counters, OpenDP's unseeded noise, rounded families) runs the generic loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import accel
from ...privacy.privatizers import Aggregator, Identity
from ...seeding import LOCAL_NOISE, slot_generators, user_uniforms
from ...ties import TIE_TOL
from ...worlds.rollout import N_UNIFORMS
from ...worlds.tabular import TabularMDP
from ...worlds.values import optimal_return

if TYPE_CHECKING:
    from ...run import Run
    from . import UCBVILearner

BLOCK_FLOATS = 2_000_000  # draws per block (16 MB), and at most BLOCK episodes
BLOCK = 1024
FAMILIES = ("sas", "sa", "r")


def applies(run: Run, world: Any) -> bool:
    """Whether this loop runs `run` (else the generic loop does): a tabular world, a fresh run,
    no central privatizer, no noise, the float backend's or seeded integers on unit grids (exact
    in float64)."""
    cal = run.calibration
    on_unit_grid = all(f.grid == 1.0 and not f.rounded for f in cal.families)
    return (isinstance(world, TabularMDP) and run.reported == 0
            and isinstance(run.privatizer, Identity | Aggregator)
            and (cal.mechanism is None or cal.noise == "float"
                 or (cal.noise == "numpy" and on_unit_grid)))


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only C-contiguous float64 view (the kernel's signature for a world's arrays)."""
    out = np.ascontiguousarray(array, dtype=np.float64).view()
    out.flags.writeable = False
    return out


class FusedEpisodes:
    """Runs every episode of a fresh `run` in `world`, block by block, in the kernel."""

    def __init__(self, run: Run, world: TabularMDP) -> None:
        self.run, self.world = run, world
        self.learner: UCBVILearner = run.learner  # type: ignore[assignment]
        self.planner = self.learner.planner
        n_rep, hs = len(run.seeds), run.config.horizon
        shapes = {f.name: f.shape for f in run.calibration.families}
        self.released = "sa" in shapes
        self.shapes = {name: shapes.get(name, shapes["r"]) for name in FAMILIES}
        self.sums = tuple(np.zeros((n_rep, *self.shapes[name])) for name in FAMILIES)
        draws = n_rep * (sum(int(np.prod(s)) for s in shapes.values()) + 2 * hs * world.S + 1)
        self.block = max(1, min(BLOCK, BLOCK_FLOATS // draws))
        private = run.calibration.mechanism is not None
        self.world_arrays = tuple(_read_only(a) for a in (world.cum_d1, world.cum_P, world.R))
        self.truth = (_read_only(world.P), _read_only(world.d1))
        # the last policy each replica played (none yet: -1) and its values V^pi (R, H+1, S)
        self.last = np.full((n_rep, world.H, world.S), -1, np.int64)
        self.values = np.zeros((n_rep, world.H + 1, world.S))
        # under integer noise each user turns its rewards into Bernoulli counts (H more draws)
        self.integer = run.calibration.integer and self.learner.algorithm.integer_rewards
        self.width = N_UNIFORMS(world.H) + (world.H if self.integer else 0)
        self.flags = np.append(self.planner.flags(private),
                               [self.released, world.reward_noise == "bernoulli", self.integer])

    def __call__(self, regret: np.ndarray, progress: Callable[[int], None] | None,
                 progress_every: int) -> np.ndarray:
        """Fill `regret` (R, K) and the run's ledger and policy version as the generic loop
        would; return how often each replica's played policy changed after its first."""
        kernels = accel.load()
        run, planner = self.run, self.planner
        total, n_rep = run.config.episodes, len(run.seeds)
        optimal = optimal_return(self.world)
        changes = np.zeros(n_rep, np.int64)
        k = 0
        while k < total:
            b = min(self.block, total - k)
            schedule = planner.schedule(*self.learner.radii(k, b))
            uniforms, report_noise = self._user_draws(k, b)
            tie_keys = np.empty((n_rep, b, *planner.q.shape[1:3]))
            for r in range(n_rep):
                planner.tie_keys(r, k, b, tie_keys[r])
            returns, changed = np.empty((b, n_rep)), np.empty((b, n_rep), np.bool_)
            for _ in range(b):  # admit the block's releases before drawing their noise
                run.privatizer.record(run.ledger)
            kernels.run_episodes(self.sums, report_noise, uniforms,
                                 tie_keys, self.world_arrays, self.truth, schedule,
                                 planner.caps, self.flags, TIE_TOL, planner.q,
                                 (self.last, self.values, returns, changed))
            regret[:, k : k + b] = optimal - returns.T  # as `episode_regret` computes it
            changes += changed.sum(axis=0)
            run.policy_version += int(changed.any(axis=1).sum())
            for done in range(k + 1, k + b + 1) if progress is not None else ():
                if done % progress_every == 0 or done == total:
                    progress(done)
            k += b
        return np.maximum(changes - 1, 0)

    def _user_draws(self, k: int, b: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """Each user's rollout uniforms (R, b, 2H+1), then its Bernoulli-reward ones (H, integer
        noise), for episodes k .. k+b-1 and, in LDP, its report noise per family (b, R, ...)
        from its noise stream at nonces k .. k+b-1 (grid units), as `privrl.run.user_episode`
        draws them for an in-process user."""
        run, cal = self.run, self.run.calibration
        n_rep, width = len(run.seeds), self.width
        ldp = cal.boundary.local_noise and cal.mechanism is not None
        uniforms = np.empty((n_rep, b, width))
        noise = {name: np.zeros((b if ldp and name in cal.released else 0, n_rep, *shape))
                 for name, shape in self.shapes.items()}
        for r, seed in enumerate(run.seeds):
            user_uniforms(seed, k, b, width, uniforms[r])
        samplers = [(f.name, f.shape, cal.sampler(f.name)) for f in cal.families] if ldp else []
        for r, seed in enumerate(run.seeds if ldp else []):
            for i, rng in enumerate(slot_generators(seed, LOCAL_NOISE, k, b)):
                for name, shape, sampler in samplers:
                    noise[name][i, r] = sampler.sample(rng, shape)
        return uniforms, tuple(noise[name] for name in FAMILIES)
