"""A run = learner + privatizer/aggregator + billboard + ledger: the life of one episode
(docs/explanation/architecture.md).

`Run` executes the life of an episode without HTTP: the server wraps one `Run` (one replica) and
the in-process runner drives several replicas at once. Same seeds, same numbers either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from privrl.algorithms.base import Algorithm, Learner, Played, PolicyMessage
from privrl.algorithms.registry import bind
from privrl.budget import refuse_overspending, run_budget
from privrl.config import RunConfig
from privrl.privacy.accountant import BudgetExhausted, Ledger
from privrl.privacy.calibration import Calibration
from privrl.privacy.grid import bernoulli_rewards
from privrl.privacy.privatizers import Privatizer
from privrl.seeding import UserStreams
from privrl.stats import Stats
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.tabular import TabularMDP
from privrl.worlds.values import episode_regret, episode_regret_stochastic


class RunFinished(RuntimeError):
    """All K episodes of the run have been reported."""


def played_policy(message: PolicyMessage) -> np.ndarray:
    """What users play: the stochastic policy "probs" (R, H, S, A) when the message has one,
    else the deterministic "actions" (R, H, S)."""
    return message["probs"] if "probs" in message else message["actions"]


def message_regret(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """Exact per-episode regret of `played_policy` arrays (deterministic or stochastic)."""
    if policies.ndim == 4:
        return episode_regret_stochastic(mdp, policies)
    return episode_regret(mdp, policies)


def same_message(a: PolicyMessage | None, b: PolicyMessage) -> bool:
    """Whether two policy messages are identical (same arrays, same values)."""
    return a is not None and a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


class Run:
    """The server-side state of one learning run, for R replicas (R = 1 on a server).

    Written against the plug-in contract only: the algorithm declares its families, computes
    contributions and builds the learner; the privacy layer calibrates and releases.
    `seeds[r]` is replica r's secret server seed (central noise, tie-breaking): never published.
    """

    def __init__(self, config: RunConfig, seeds: Sequence[int]) -> None:
        if not seeds:
            raise ValueError("a run needs one server seed per replica")
        self.seeds = [int(s) for s in seeds]
        self.algorithm: Algorithm = bind(config)
        config = self.config = self.algorithm.config  # the preset's schedule filled in
        self.calibration: Calibration = self.algorithm.calibration()
        self.privatizer: Privatizer = self.algorithm.privatizer(
            self.calibration, self.seeds, config.episodes
        )
        refuse_overspending(config, self.privatizer.plan())
        # a privacy filter: the budget is a limit (and the guarantee where spend is data-dependent)
        self.ledger = Ledger(budget=run_budget(config),
                             data_dependent=self.algorithm.spend_depends_on_data())
        self.learner: Learner = self.algorithm.learner(self.calibration, self.seeds)
        self._message: PolicyMessage | None = None
        self._release: tuple[int, Stats] | None = None  # (report count, billboard), once read
        self._planned_at = -1
        self.policy_version = 0
        self.exhausted: str | None = None  # why the filter refused a release: the run has ended
        self._pooled = 0  # reports counted beyond one per item (members of cohorts)
        self._users: UserStreams | None = None  # the users `play_and_ingest` simulated last

    @property
    def reported(self) -> int:
        """How many episodes have been ingested (a cohort's item counts its members)."""
        return self.privatizer.items + self._pooled

    @property
    def finished(self) -> bool:
        """True once all K episodes are in."""
        return self.reported >= self.config.episodes

    def radius(self) -> float:
        """The public error radius the learner uses with the current billboard."""
        return self.learner.radius(self.reported)

    def billboard(self) -> Stats:
        """The public release the learner plans from (post-processing of private values only),
        built once per report count: the learner and a server's public views share it (its
        arrays may change with the next report: a reader that keeps them copies them)."""
        if self._release is None or self._release[0] != self.reported:
            self._release = (self.reported, self.algorithm.postprocess(self.privatizer.release()))
        return self._release[1]

    def billboard_built(self) -> bool:
        """Whether the billboard of the current report count was built already."""
        return self._release is not None and self._release[0] == self.reported

    def message(self) -> PolicyMessage:
        """The current policy message (arrays with leading axis R), planned lazily when the
        learner's schedule says so; a changed message is a new policy version."""
        if self._message is None or (
            self._planned_at != self.reported
            and self.learner.plans_at(self.reported, self._planned_at)
        ):
            new = self.learner.plan(self.billboard(), self.reported)
            if not same_message(self._message, new):
                self.policy_version += 1
            self._message = new
            self._planned_at = self.reported
        return self._message

    def policy(self) -> np.ndarray:
        """The current policy's actions (R, H, S)."""
        return self.message()["actions"]

    def ingest_trajectories(self, traj: Played, message: PolicyMessage) -> None:
        """A curator that sees raw data (JDP, non-private): raw trajectories, played under
        `message`, become the algorithm's contributions."""
        if self.calibration.boundary.local_noise:
            raise ValueError(f"an {self.calibration.boundary.label} run accepts only locally"
                             " randomized reports")
        self._check_open()
        self._ingest(self.algorithm.user_statistics(traj, message))

    def ingest_noisy(self, stats: Stats) -> None:
        """Locally randomized reports (LDP), one per replica."""
        if not self.calibration.boundary.local_noise:
            raise ValueError("only a run whose users noise their reports (LDP) accepts locally"
                             " randomized reports")
        self._check_open()
        self._ingest(stats)

    def ingest_cohort(self, inputs: Sequence[Stats]) -> None:
        """A cohort's survivors' inputs (a boundary with cohorts, `TrustBoundary.exchange`):
        one item, their combination, counting every member."""
        exchange = self.calibration.boundary.exchange()
        if exchange is None:
            raise ValueError(f"an {self.calibration.boundary.label} run has no cohorts")
        self._check_open()
        self._ingest(exchange.combine(inputs))
        self._pooled += len(inputs) - 1

    def _ingest(self, stats: Stats) -> None:
        """The privatizer takes one item; a release its filter refuses ends the run (nothing of
        the item was counted or drawn)."""
        try:
            self.privatizer.ingest(stats, self.ledger)
        except BudgetExhausted as exc:
            self.exhausted = str(exc)
            raise

    def play_and_ingest(self, world: TabularMDP | Any, client_seeds: Sequence[int],
                        episode: int, message: PolicyMessage | None = None,
                        first_nonce: int = 0) -> Played:
        """Episode `episode` in one process: the users play `message` (default: the current
        one) in `world` from their own seeds (`user_episode`), then the run ingests what they
        report (raw trajectories, or LDP noisy statistics). Returns what was played.
        `first_nonce`: where the users' report counters started (0: fresh users)."""
        message = self.message() if message is None else message
        users = self._users
        if users is None or users.client_seeds != tuple(int(s) for s in client_seeds):
            users = self._users = UserStreams(client_seeds)
        # in process each replica's one user plays every episode in order: its own report
        # counter (its nonce) has counted the episodes before this one
        played, noisy = user_episode(world, message, client_seeds, episode, self.algorithm,
                                     self.calibration, users,
                                     [first_nonce + episode] * len(client_seeds))
        if noisy is None:
            self.ingest_trajectories(played, message)
        else:
            self.ingest_noisy(noisy)
        return played

    def _check_open(self) -> None:
        if self.exhausted is not None:
            raise BudgetExhausted(self.exhausted)
        if self.finished:
            raise RunFinished(f"all {self.config.episodes} episodes have been reported")


def user_episode(
    mdp: TabularMDP | Any,
    message: PolicyMessage,
    client_seeds: Sequence[int],
    episode: int,
    algorithm: Algorithm,
    calibration: Calibration,
    users: UserStreams | None = None,
    nonces: Sequence[int] | None = None,
) -> tuple[Played, Stats | None]:
    """What users do in episode k: play, and in LDP randomize locally before anything leaves.

    User r plays from its rollout stream `user_generator(client_seeds[r], episode)`: what the
    algorithm's `play` needs in the world `mdp` (a tabular rollout's uniforms by default), then,
    under integer noise for an algorithm with `integer_rewards`, H uniforms that turn each reward
    r into Bernoulli(r), and in LDP the uniforms that round its statistics to their grids. It
    then noises them from its noise stream
    `noise_generator(client_seeds[r], nonces[r])`: `nonces[r]` is user r's own report counter,
    never anything the server sent (required in LDP). Returns what was played (which stays with
    the users in LDP) and the noisy report (LDP) or None. `users`: the same users' streams kept
    by a caller that simulates them episode after episode (the same draws, cheaper).
    """
    if users is None:
        users = UserStreams(client_seeds)
    else:
        assert users.client_seeds == tuple(int(s) for s in client_seeds)
    rngs = users.at(episode)
    traj = algorithm.play(mdp, message, rngs)
    if calibration.integer and algorithm.integer_rewards:
        traj = bernoulli_rewards(traj, rngs)
    boundary = calibration.boundary
    if not boundary.local_noise:
        return traj, None
    if nonces is None:
        raise ValueError("a user that noises its report randomizes with its own nonce (its"
                         " report counter): pass nonces, never the server's episode index")
    stats = algorithm.user_statistics(traj, message)
    # the grid rounding of its data is part of the statistic (like the Bernoulli rewards): from
    # the rollout stream, so a report's data part does not depend on which nonce it met
    return traj, boundary.randomize(stats, calibration, users.noise(nonces), rngs)


@dataclass
class InProcessResult:
    """Per-replica, per-episode exact regret plus the ledger and the policy-version count."""

    config: RunConfig
    seeds: list[int]
    regret: np.ndarray  # (R, K)
    ledger: Ledger
    policy_versions: int
    policy_changes: np.ndarray  # (R,) how often replica r's played policy changed (switches)


class Simulator(Protocol):
    """Runs every episode of a fresh in-process run: fills `regret` (R, K) and the run's ledger
    and policy version as the generic loop would; returns each replica's policy switches (R,)."""

    def __call__(self, regret: np.ndarray, progress: Callable[[int], None] | None,
                 progress_every: int) -> np.ndarray: ...


@runtime_checkable
class Simulates(Protocol):
    """An algorithm with its own, faster in-process episode loop (DP-UCBVI's): an option of
    `run_in_process`, not part of the plug-in contract."""

    def simulator(self, run: Run, world: Any) -> Simulator | None: ...


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
    spec = model_spec_of(mdp)
    if config.model is not None and spec != config.model:
        raise ValueError("the world's public model differs from the run's configured model")
    run = Run(config, seeds)
    config = run.config  # the preset's schedule filled in: what the result records
    n_rep, k_total = len(run.seeds), config.episodes
    regret = np.empty((n_rep, k_total))
    simulator = (run.algorithm.simulator(run, mdp) if isinstance(run.algorithm, Simulates)
                 else None)
    if simulator is not None:
        changes = simulator(regret, progress, progress_every)
        return InProcessResult(config, run.seeds, regret, run.ledger, run.policy_version, changes)
    last_policy: np.ndarray | None = None
    last_regret = np.zeros(n_rep)
    changes = np.zeros(n_rep, dtype=np.int64)
    for k in range(k_total):
        pol = played_policy(run.message())
        changed = (
            np.ones(n_rep, bool)
            if last_policy is None
            else np.any((pol != last_policy).reshape(n_rep, -1), axis=1)
        )
        if changed.any():
            if last_policy is not None:
                changes += changed
            last_regret = last_regret.copy()
            last_regret[changed] = message_regret(mdp, pol[changed])
            last_policy = pol
        regret[:, k] = last_regret
        run.play_and_ingest(mdp, run.seeds, k)
        if progress is not None and ((k + 1) % progress_every == 0 or k + 1 == k_total):
            progress(k + 1)
    return InProcessResult(config, run.seeds, regret, run.ledger, run.policy_version, changes)

