"""DP-UCBVI's in-process episode loop on the compiled kernel (`privrl.accel.episodes`).

Same numbers as `privrl.run.run_in_process`'s generic loop: the kernel plans, rolls out and counts
exactly as the learner, the users and the privatizer do, drawing from the same seeded streams.
Noise is drawn before each block with numpy's algorithms, compiled (LDP: each user's report noise
after its rollout uniforms; JDP: the trees' noise in each release, through
`TreeCounter.noise_block`), ledger charges go through the privatizer's own `record`, and regret is
the evaluator's, computed in the kernel (`privrl.accel.evaluation`, the same sums in the same
order) for every changed policy. Used only when it applies (compiled path on, a tabular world,
numpy-backend Laplace or Gaussian noise); otherwise the generic loop runs.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...privacy.privatizers import Aggregator, Central, Identity
from ...seeding import entropy_rows
from ...worlds.tabular import TabularMDP

if TYPE_CHECKING:
    from ...run import Run

BLOCK_FLOATS = 2_000_000  # pre-drawn noise per block (16 MB), and at most BLOCK episodes
BLOCK = 1024


def _standard_forms(run: Run) -> list[tuple[str, float] | None]:
    """Each released family's (kind, scale) of numpy standard draws (None: not of that form)."""
    return [getattr(run.calibration.sampler(f.name), "standard", None)
            for f in run.calibration.families]


def applies(run: Run, world: Any) -> bool:
    """Whether the compiled loop reproduces this run (else the generic loop runs): its noise,
    if any, is numpy's Laplace or Gaussian, which the kernels draw compiled."""
    forms = _standard_forms(run) if run.calibration.mechanism is not None else []
    return (
        isinstance(world, TabularMDP)
        and isinstance(run.privatizer, Identity | Central | Aggregator)
        and all(forms) and len({form[0] for form in forms}) <= 1
        and run.config.episodes < 2**32
    )


class FusedEpisodes:
    """Runs the remaining episodes of `run` in `world`, block by block, in the kernel."""

    def __init__(self, run: Run, world: TabularMDP) -> None:
        self.run, self.world = run, world
        self.planner = run.learner.planner
        self.families = {f.name: f for f in run.calibration.families}
        self.entropy, self.entropy_len = entropy_rows(tuple(run.seeds))
        priv = run.privatizer
        sums = priv.sums if isinstance(priv, Identity | Aggregator) else {
            name: tree.exact for name, tree in priv.trees.items()}
        self.acc = {name: sums[name] for name in sums}
        shape = self.planner.q.shape
        self.block = max(1, min(BLOCK, BLOCK_FLOATS // max(1, self._floats_per_episode())))
        self.last = np.zeros(shape[:3], np.int64)

    def _floats_per_episode(self) -> int:
        """Noise floats one episode pre-draws (all replicas)."""
        n_rep = len(self.run.seeds)
        return n_rep * sum(int(np.prod(f.shape)) for f in self.families.values())

    def __call__(self, regret: np.ndarray, progress: Callable[[int], None] | None,
                 progress_every: int,
                 resume: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Fill `regret` (R, K) for every remaining episode, as the generic loop would; return
        how often each replica's played policy changed after its first, or after `resume`'s
        (the generic loop's last played actions and their regret: `FusedLoop`)."""
        from ...accel.episodes import run_episodes
        from ...worlds.values import optimal_return

        run, world, planner = self.run, self.world, self.planner
        k, total = run.reported, run.config.episodes
        n_rep = planner.q.shape[0]
        regret_now = np.zeros(n_rep)  # regret of each replica's current policy
        changes = np.zeros(n_rep, np.int64)  # every recorded policy, the first one included
        has_last = resume is not None  # the played policy and its regret: the resumed ones
        if resume is not None:
            self.last[:], regret_now[:] = resume
        optimal = optimal_return(world)
        empty = np.empty((0, n_rep, 1, 1, 1, 1))
        dummy_sa = np.empty(self.acc["r"].shape)
        while k < total:
            b = min(self.block, total - k)
            radii, pair_std = run.learner.radii(k, b)
            radius = np.array(radii)
            threshold = planner.knobs.unknown_below * np.array(pair_std)
            consts = planner.constants_block(radii)
            given_u, ldp = self._ldp_draws(k, b)
            jdp = self._jdp_draws(b)
            block_regret = np.empty((n_rep, b))
            versions = run_episodes(
                k, k + b, self.entropy, self.entropy_len, np.uint32(zlib.crc32(b"user")),
                np.uint32(zlib.crc32(b"tiebreak")), given_u,
                ldp.get("sas", empty), ldp.get("sa", empty[..., 0]), ldp.get("r", empty[..., 0]),
                jdp.get("sas", empty), jdp.get("sa", empty[..., 0]), jdp.get("r", empty[..., 0]),
                self.acc["sas"], self.acc.get("sa", dummy_sa), self.acc["r"], "sa" in self.acc,
                world.cum_d1, world.cum_P, world.R, world.reward_noise == "bernoulli",
                world.d1, world.P, optimal,
                radius, threshold, consts, run.calibration.mechanism is not None, planner.caps,
                planner.q, bool(planner.knobs.clip_previous), bool(planner.knobs.variance_terms),
                self.last, has_last, regret_now, changes, block_regret,
            )
            has_last = True
            regret[:, k : k + b] = block_regret
            for _ in range(b):
                run.privatizer.record(run.ledger)
            run.policy_version += versions
            for done in range(k + 1, k + b + 1):
                if progress is not None and (done % progress_every == 0 or done == total):
                    progress(done)
            k += b
        run.adopt_message({"actions": self.last.copy()})
        return changes if resume is not None else np.maximum(changes - 1, 0)

    def _ldp_draws(self, k: int, b: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """LDP: each user's rollout uniforms and report noise for episodes k .. k+b-1, drawn
        from its own stream in the order `user_episode` draws them, in one kernel call
        (`privrl.accel.distributions.user_draws`: numpy's draws, compiled)."""
        from ...accel.distributions import KINDS, user_draws

        run, horizon = self.run, self.world.H
        if run.calibration.mode != "ldp" or run.calibration.mechanism is None:
            return np.empty((0, 0, 2 * horizon + 1)), {}
        n_rep = len(run.seeds)
        forms = _standard_forms(run)
        sizes = np.array([int(np.prod(f.shape)) for f in self.families.values()], np.int64)
        u = np.empty((b, n_rep, 2 * horizon + 1))
        flat = np.empty((b, n_rep, int(sizes.sum())))
        user_draws(self.entropy, self.entropy_len, np.uint32(zlib.crc32(b"user")), k,
                   KINDS[forms[0][0]], np.array([form[1] for form in forms]), sizes, u, flat)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        # contiguous copies: a strided family would compile a second run_episodes
        return u, {name: np.ascontiguousarray(flat[:, :, start:stop]).reshape(b, n_rep, *f.shape)
                   for (name, f), start, stop in zip(self.families.items(), starts[:-1],
                                                     starts[1:], strict=True)}

    def _jdp_draws(self, b: int) -> dict[str, np.ndarray]:
        """JDP: the noise in the next b releases of every family's tree."""
        priv = self.run.privatizer
        if not isinstance(priv, Central):
            return {}
        return {name: tree.noise_block(b) for name, tree in priv.trees.items()}
