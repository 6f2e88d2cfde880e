"""A run = learner + privatizer/aggregator + billboard + ledger (the design's §3 episode life).

`Run` executes the life of an episode without HTTP: the server wraps one `Run` (one replica) and
the in-process runner drives several replicas at once. Same seeds, same numbers either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from shared.config import RunConfig
from shared.learners.ucbvi import DPUCBVI
from shared.privacy.accountant import Ledger
from shared.privacy.calibration import Calibration, calibrate, radius
from shared.privacy.privatizers import Aggregator, Central, Identity, Privatizer, randomize_locally
from shared.seeding import user_generator
from shared.stats import Stats, family_shapes, tabular_counts
from shared.worlds.evaluation import episode_regret
from shared.worlds.rollout import Trajectories, draw_uniforms, rollout
from shared.worlds.tabular import TabularMDP


class RunFinished(RuntimeError):
    """All K episodes of the run have been reported."""


class Run:
    """The server-side state of one learning run, for R replicas (R = 1 on a server).

    `seeds[r]` is replica r's secret server seed (central noise, tie-breaking): never published.
    """

    def __init__(self, config: RunConfig, seeds: Sequence[int]) -> None:
        if not seeds:
            raise ValueError("a run needs one server seed per replica")
        self.config = config
        self.seeds = [int(s) for s in seeds]
        self.calibration: Calibration = calibrate(config)
        self.ledger = Ledger()
        self.learner = DPUCBVI(config, self.seeds)
        self.privatizer: Privatizer = self._make_privatizer()
        self._policy: np.ndarray | None = None
        self._planned_at = -1
        self.policy_version = 0

    def _make_privatizer(self) -> Privatizer:
        cfg, cal, n_rep = self.config, self.calibration, len(self.seeds)
        if cfg.privacy == "none":
            shapes = family_shapes(cfg.n_states, cfg.n_actions, cfg.horizon, cfg.pooled)
            return Identity(cal, shapes, n_rep)
        if cfg.privacy == "jdp":
            return Central(cal, self.seeds, cfg.episodes)
        return Aggregator(cal, n_rep)

    @property
    def reported(self) -> int:
        """How many episodes have been ingested."""
        return self.privatizer.items

    @property
    def finished(self) -> bool:
        """True once all K episodes are in."""
        return self.reported >= self.config.episodes

    @property
    def private(self) -> bool:
        """Whether the billboard holds noisy statistics."""
        return self.config.privacy != "none"

    def radius(self) -> float:
        """The public error radius E for the current billboard."""
        return radius(self.calibration, self.config, self.reported)

    def billboard(self) -> Stats:
        """The public release the learner plans from (post-processing of private values only)."""
        return self.privatizer.release()

    def policy(self) -> np.ndarray:
        """The current policy (R, H, S), planned lazily at most once per new report."""
        if self._planned_at != self.reported:
            new = self.learner.plan(
                self.billboard(),
                self.radius(),
                self.calibration.pair_std(self.reported, self.config.derived_pairs),
                self.reported,
                private=self.private,
            )
            if self._policy is None or not np.array_equal(new, self._policy):
                self.policy_version += 1
            self._policy = new
            self._planned_at = self.reported
        assert self._policy is not None
        return self._policy

    def ingest_trajectories(self, traj: Trajectories) -> None:
        """JDP / non-private: raw trajectories (trusted curator) become count increments."""
        if self.config.privacy == "ldp":
            raise ValueError("an LDP run accepts only locally randomized reports")
        self._check_open()
        cfg = self.config
        stats = tabular_counts(traj, cfg.n_states, cfg.n_actions, cfg.pooled)
        self.privatizer.ingest(stats, self.ledger)

    def ingest_noisy(self, stats: Stats) -> None:
        """LDP: locally randomized reports, one per replica."""
        if self.config.privacy != "ldp":
            raise ValueError("only an LDP run accepts locally randomized reports")
        self._check_open()
        self.privatizer.ingest(stats, self.ledger)

    def _check_open(self) -> None:
        if self.finished:
            raise RunFinished(f"all {self.config.episodes} episodes have been reported")


def user_episode(
    mdp: TabularMDP,
    policies: np.ndarray,
    client_seeds: Sequence[int],
    episode: int,
    calibration: Calibration,
    pooled: bool,
) -> tuple[Trajectories, Stats | None]:
    """What users do in episode k: roll out, and in LDP randomize locally before anything leaves.

    User r draws everything from `user_generator(client_seeds[r], episode)`: first the rollout's
    uniforms, then the local randomizer's noise. Returns the trajectories (which stay with the
    users in LDP) and the noisy report (LDP) or None.
    """
    rngs = [user_generator(cs, episode) for cs in client_seeds]
    traj = rollout(mdp, policies, draw_uniforms(rngs, mdp.H))
    if calibration.mode != "ldp":
        return traj, None
    stats = tabular_counts(traj, mdp.S, mdp.A, pooled)
    return traj, randomize_locally(stats, calibration, rngs)


@dataclass
class InProcessResult:
    """Per-replica, per-episode exact regret plus the ledger and the policy-version count."""

    config: RunConfig
    seeds: list[int]
    regret: np.ndarray  # (R, K)
    ledger: Ledger
    policy_versions: int


def run_in_process(
    config: RunConfig,
    mdp: TabularMDP,
    seeds: Sequence[int],
    progress: Callable[[int], None] | None = None,
    progress_every: int = 1000,
) -> InProcessResult:
    """Run K episodes for every seed at once; replica r uses server and client seed seeds[r].

    Sharing one seed between the server's and the users' roles is harmless here: both sides live
    in this process and publish nothing, and their streams have different paths.
    """
    if (mdp.S, mdp.A, mdp.H) != (config.n_states, config.n_actions, config.horizon):
        raise ValueError(
            f"world has (S, A, H) = {(mdp.S, mdp.A, mdp.H)} but the run was configured for "
            f"{(config.n_states, config.n_actions, config.horizon)}"
        )
    run = Run(config, seeds)
    n_rep, k_total = len(run.seeds), config.episodes
    regret = np.empty((n_rep, k_total))
    last_policy: np.ndarray | None = None
    last_regret = np.zeros(n_rep)
    for k in range(k_total):
        pol = run.policy()
        changed = (
            np.ones(n_rep, bool) if last_policy is None else np.any(pol != last_policy, axis=(1, 2))
        )
        if changed.any():
            last_regret = last_regret.copy()
            last_regret[changed] = episode_regret(mdp, pol[changed])
            last_policy = pol
        regret[:, k] = last_regret
        traj, noisy = user_episode(mdp, pol, run.seeds, k, run.calibration, config.pooled)
        if noisy is None:
            run.ingest_trajectories(traj)
        else:
            run.ingest_noisy(noisy)
        if progress is not None and ((k + 1) % progress_every == 0 or k + 1 == k_total):
            progress(k + 1)
    return InProcessResult(config, run.seeds, regret, run.ledger, run.policy_version)

