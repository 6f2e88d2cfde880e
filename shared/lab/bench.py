"""Per-episode cost of the in-process runner, measured side by side (`privrl bench`).

Every round times each variant (non-private, JDP, LDP) with one replica and with R replicas
batched, one after another, right after rlberry-scool's UCBVIAgent when it is installed;
rounds repeat and the medians are reported. The figures are wall-clock milliseconds per episode
(all replicas) and per replica-episode. A ratio divides rlberry's milliseconds per episode by
privrl's per replica-episode within each round, and reports the median of those paired ratios:
the machine's speed drifts between rounds, so each ratio compares numbers taken under the same
load. Each private
variant is also timed drawing nothing but the noise one of its replica-episodes must draw (the
tree's fresh nodes in JDP, drawn a group of nodes per call as the tree does, a user's report
noise in LDP, one call per user; numpy's own Laplace / normal algorithm as the runs use it):
rlberry's time over that is the best ratio the variant could reach.

Private variants run with the default integer noise (discrete Laplace / Gaussian on integer
grids) and with `noise: float` (simulation only) side by side: `integer_over_float` is the cost
of noise that an outsider cannot remove, measured in the same rounds.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from privrl import trust
from privrl.algorithms.registry import bind

from ..config import RunConfig
from ..privacy.discrete import discrete_gaussian, discrete_laplace
from ..privacy.tree import nodes_per_draw
from ..run import run_in_process
from ..seeding import generator
from ..worlds.tabular import TabularMDP, garnet, riverswim

FLOAT_SUFFIX = " float"
RLBERRY = "rlberry-scool UCBVIAgent"
# issue 29: x faster than rlberry (float noise), without privacy and with it
TARGET_PUBLIC, TARGET_PRIVATE = 100.0, 10.0
Variant = tuple[str, str, str, float, str]  # (name, privacy, mechanism, delta, noise backend)


def variants() -> tuple[Variant, ...]:
    """Every timed variant, from what the built-in boundaries declare: those whose users report
    one at a time (a cohort's protocol is not the learner's cost); the non-private one once;
    each private one with Laplace noise, and where it has central counters also Gaussian (an
    l2 tree, another release path), at integer noise and at float noise."""
    out: list[Variant] = []
    for boundary in map(trust.get, trust.BUILTIN):
        if boundary.cohorts:
            continue
        if not boundary.private:
            out.append((f"{boundary.label} UCBVI", boundary.name, "laplace", 0.0, "numpy"))
            continue
        mechanisms = [("laplace", 0.0)] + ([("gaussian", 1e-5)] if boundary.counters else [])
        out += [(f"{boundary.label} {mech} eps=1{suffix}", boundary.name, mech, delta, noise)
                for mech, delta in mechanisms
                for suffix, noise in (("", "numpy"), (FLOAT_SUFFIX, "float"))]
    return tuple(out)


def target(privacy: str) -> float:
    """How many times faster than rlberry a variant across `privacy` should be (issue 29)."""
    return TARGET_PRIVATE if trust.get(privacy).private else TARGET_PUBLIC


@dataclass
class Row:
    """One timed variant: its samples (ms per episode, all replicas) and their median."""

    variant: str
    privacy: str
    replicas: int
    samples_ms: list[float] = field(default_factory=list)
    noise_draws: int = 0  # standard draws one replica-episode must make (0: non-private)
    noise_samples_ms: list[float] = field(default_factory=list)

    @property
    def ms_per_episode(self) -> float:
        """Median over rounds of the milliseconds per episode (all replicas at once)."""
        return statistics.median(self.samples_ms)

    @property
    def ms_per_replica_episode(self) -> float:
        """Median per episode divided by the number of replicas."""
        return self.ms_per_episode / self.replicas

    @property
    def noise_ms(self) -> float | None:
        """Median milliseconds of drawing one replica-episode's noise alone (None: no noise)."""
        return statistics.median(self.noise_samples_ms) if self.noise_samples_ms else None


def bench_world(env: str, horizon: int, states: int, actions: int) -> TabularMDP:
    """RiverSwim, or a garnet world of the given size (seed 0)."""
    return garnet(states, actions, horizon, seed=0) if env == "garnet" else riverswim(horizon)


def bench_config(mdp: TabularMDP, privacy: str, mechanism: str, delta: float,
                 episodes: int, noise: str = "numpy") -> RunConfig:
    """The practical preset at eps = 1 (the paper-reproduction settings), JDP releasing after
    every episode from the smoothed tree: the costliest release path, the same at every commit
    (the preset's sparse schedule is cheaper)."""
    central = ({"counter": "smoothed", "schedule": "every"} if trust.get(privacy).counters
               else {})
    return RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes,
                     privacy=privacy, epsilon=1.0, delta=delta, mechanism=mechanism,
                     preset="practical", noise=noise, **central)


def time_privrl(mdp: TabularMDP, privacy: str, mechanism: str, delta: float, noise: str,
                episodes: int, replicas: int) -> float:
    """Milliseconds per episode of one in-process run with `replicas` seeds."""
    config = bench_config(mdp, privacy, mechanism, delta, episodes, noise)
    start = time.perf_counter()
    run_in_process(config, mdp, list(range(replicas)))
    return 1e3 * (time.perf_counter() - start) / episodes


def noise_draws(config: RunConfig) -> tuple[str, int, bool, int]:
    """(kind, count) of the standard draws one replica-episode makes: every released entry once
    per fresh tree node (about one node per item, two with the smoothed tree's full dyadic
    tree) in JDP, once per user report in LDP; (kind, 0) without noise; whether they are
    integers; and how many episodes' draws one call makes (a group of level-0 tree nodes in
    JDP, one user in LDP)."""
    cal = bind(config).calibration()
    if cal.mechanism is None:
        return config.mechanism, 0, False, 1
    entries = sum(int(np.prod(f.shape)) for f in cal.families)
    central = cal.boundary.counters  # noise drawn per counter node, not per report
    nodes = 2 if central and cal.smooth else 1
    return cal.mechanism_name, entries * nodes, cal.integer, nodes_per_draw(0) if central else 1


def time_noise(kind: str, draws: int, integer: bool, episodes: int, per_call: int = 1) -> float:
    """Milliseconds per replica-episode of drawing `draws` values of `kind` per episode,
    `per_call` episodes' worth from each fresh seeded stream, the way the runs draw them:
    discrete integers (scale 3), or float standard draws."""
    calls = max(1, min(episodes, 200) // per_call)
    size = draws * per_call
    start = time.perf_counter()
    if integer:
        draw = discrete_laplace if kind == "laplace" else discrete_gaussian
        for k in range(calls):
            draw(generator(0, "floor", k), 3.0, size)
    else:
        for k in range(calls):
            rng = generator(0, "floor", k)
            if kind == "laplace":
                rng.laplace(0.0, 1.0, size)
            else:
                rng.standard_normal(size)
    return 1e3 * (time.perf_counter() - start) / (calls * per_call)


def rlberry_agent(horizon: int) -> Any | None:
    """A fresh rlberry-scool UCBVIAgent (stage_dependent, no real-time DP) on a 6-state chain,
    or None when rlberry-scool is not installed or does not import."""
    try:
        from rlberry_scool.agents import UCBVIAgent
        from rlberry_scool.envs import Chain
    except Exception:  # not installed, or broken (rlberry 0.7 fails on gymnasium >= 1.0)
        return None
    env = Chain(L=6, fail_prob=0.1)
    return UCBVIAgent(env, horizon=horizon, stage_dependent=True, real_time_dp=False, seeder=0)


def time_rlberry(episodes: int, horizon: int) -> float | None:
    """Milliseconds per episode of rlberry-scool's UCBVIAgent, None when not installed."""
    agent = rlberry_agent(horizon)
    if agent is None:
        return None
    start = time.perf_counter()
    agent.fit(budget=episodes)
    return 1e3 * (time.perf_counter() - start) / episodes


def measure(mdp: TabularMDP, episodes: int, replicas: list[int], rounds: int,
            rlberry: bool) -> tuple[list[Row], Row | None, float]:
    """Interleaved rounds of every (variant, replica count) and rlberry; returns the rows,
    rlberry's row (None when not asked or not installed) and the warm-up seconds (the first
    call of each variant: loading the kernels from numba's cache, or compiling them)."""
    start = time.perf_counter()
    every = variants()
    for _, privacy, mech, delta, noise in every:  # warm-up: load kernels, build caches
        time_privrl(mdp, privacy, mech, delta, noise, 2, 1)
    warmup = time.perf_counter() - start
    rows = [Row(name, privacy, r) for r in replicas for name, privacy, *_ in every]
    settings = {(name, r): rest for r in replicas for name, *rest in every}
    # rlberry's UCBVI is the non-private learner
    peer = (Row(RLBERRY, trust.baseline().name, 1)
            if rlberry and rlberry_agent(mdp.H) is not None else None)
    draws = {name: noise_draws(bench_config(mdp, privacy, mech, delta, episodes, noise))
             for name, privacy, mech, delta, noise in every}
    for row in rows:
        row.noise_draws = draws[row.variant][1]
    for _ in range(rounds):
        if peer is not None:
            peer.samples_ms.append(time_rlberry(episodes, mdp.H) or 0.0)
        for row in rows:
            row.samples_ms.append(time_privrl(mdp, *settings[(row.variant, row.replicas)],
                                              episodes, row.replicas))
            if row.noise_draws and row.replicas == replicas[0]:
                kind, count, integer, per_call = draws[row.variant]
                row.noise_samples_ms.append(time_noise(kind, count, integer, episodes,
                                                       per_call))
    return rows, peer, warmup


def paired_ratio(peer: Row, row: Row) -> float:
    """Median over rounds of rlberry's ms per episode over the row's per replica-episode,
    each ratio taken within one round."""
    return statistics.median(p * row.replicas / s for p, s in zip(peer.samples_ms,
                                                                   row.samples_ms, strict=True))


def report(mdp: TabularMDP, episodes: int, rounds: int, rows: list[Row], peer: Row | None,
           warmup: float) -> dict[str, Any]:
    """The JSON form of a bench run: settings, machine, every row and the ratios to rlberry."""
    out: dict[str, Any] = {
        "world": repr(mdp), "episodes": episodes, "rounds": rounds,
        "warmup_seconds": warmup,
        "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg())},
        "rows": [], "rlberry": None,
    }
    for row in rows:
        entry = {**asdict(row), "ms_per_episode": row.ms_per_episode,
                 "ms_per_replica_episode": row.ms_per_replica_episode,
                 "noise_ms_per_replica_episode": row.noise_ms}
        if peer is not None:
            entry["x_faster_than_rlberry"] = paired_ratio(peer, row)
            entry["target"] = target(row.privacy)
            if row.noise_ms:  # the ratio the variant would have if it only drew its noise
                entry["x_rlberry_noise_bound"] = peer.ms_per_episode / row.noise_ms
        out["rows"].append(entry)
    by_name = {(row.variant, row.replicas): row for row in rows}
    for entry in out["rows"]:
        twin = by_name.get((entry["variant"] + FLOAT_SUFFIX, entry["replicas"]))
        if twin is not None:  # integer noise's cost over the float backend, same rounds
            entry["integer_over_float"] = entry["ms_per_episode"] / twin.ms_per_episode
    if peer is not None:
        out["rlberry"] = {**asdict(peer), "ms_per_episode": peer.ms_per_episode}
    return out
