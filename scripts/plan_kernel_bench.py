"""Microseconds per call of the compiled planner on a realistic billboard (RiverSwim, H = 20).

    python scripts/plan_kernel_bench.py [--episodes 300] [--calls 20000] [--rounds 7]

For each mode (non-private, JDP Gaussian eps = 1, practical preset, one replica) it plays
`--episodes` episodes through the generic server path, then times `plan_replicas` on the
resulting billboard in a compiled loop (medians of `--rounds`): rebuilding the model every call,
and for non-private also keeping it with one stale cell per step (as the episode loop does). For
JDP it times `project_cell` per cell of 6 entries. The kernels are `privrl.accel.kernels`, the
only implementation of DP-UCBVI's planner; the first run compiles them (or `privrl warmup`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numba
import numpy as np
from privrl import accel
from privrl.algorithms.ucbvi.learner import dense
from privrl.config import RunConfig
from privrl.run import Run, user_episode
from privrl.ties import TIE_TOL
from privrl.worlds import riverswim

KERNELS = accel.load()  # compiled here (saying so) or loaded from numba's cache
new_model, plan_replicas, project_cell = (KERNELS.new_model, KERNELS.plan_replicas,
                                          KERNELS.project_cell)

MODES = {
    "non-private": dict(privacy="none", preset="practical"),
    "JDP gaussian eps=1": dict(privacy="jdp", mechanism="gaussian", epsilon=1.0, delta=1e-5,
                               preset="practical"),
}


@numba.njit(cache=True)
def _plan_loop(calls: int, plan_args: tuple, outputs: tuple, model: tuple, kept: bool) -> None:
    """`calls` plans of the same billboard: a kept model gets one stale cell per step per call,
    a rebuilt one has every cell stale."""
    stale = model[-1]
    for i in range(calls):
        if kept:
            for h in range(stale.shape[1]):
                stale[0, h, (i + h) % stale.shape[2], i % stale.shape[3]] = True
        else:
            stale[:] = True
        plan_replicas(plan_args[0], plan_args[1], plan_args[2], plan_args[3], plan_args[4],
                      plan_args[5], plan_args[6], outputs[0], outputs[1], outputs[2], model,
                      TIE_TOL)


@numba.njit(cache=True)
def _project_loop(calls: int, sas: np.ndarray, sa: np.ndarray, radius: float, out: np.ndarray,
                  scratch: np.ndarray) -> float:
    """`calls` projections of every cell of one step."""
    total = 0.0
    for _ in range(calls):
        for s in range(sas.shape[0]):
            for a in range(sas.shape[1]):
                total += project_cell(sas, s, a, sa[s, a], radius, out, scratch)
    return total


def billboard_args(case: dict, episodes: int) -> tuple:
    """plan_replicas' inputs before its outputs (release, radius, threshold, constants, caps,
    flags, previous Q) after `episodes` episodes of one replica, as the learner passes them."""
    mdp = riverswim(20)
    run = Run(RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=50_000, **case),
              [0])
    for k in range(episodes):
        message = run.message()
        trajectories, _ = user_episode(mdp, message, run.seeds, k, run.algorithm,
                                       run.calibration)
        run.ingest_trajectories(trajectories, message)
    board, learner = run.billboard(), run.learner
    planner = learner.planner
    radius = learner.radius(run.reported)
    private = run.calibration.mechanism is not None
    return ((dense(board["sas"]), dense(board["sa"]), dense(board["r"])), float(radius),
            float(planner.knobs.unknown_below * learner.pair_std(run.reported)),
            planner.constants(radius), planner.caps, planner.flags(private), planner.q.copy())


def median_us(loop: Callable[..., object], loop_args: tuple, calls: int, rounds: int) -> float:
    """Median over `rounds` of microseconds per call of `loop(*loop_args)` doing `calls`."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        loop(*loop_args)
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    """Print the planner's and the projection's cost per call for each mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for name, case in MODES.items():
        plan_args = billboard_args(case, args.episodes)
        q, private = plan_args[6], bool(plan_args[5][0])
        n_rep, horizon, n_states, n_actions = q.shape
        outputs = (np.empty_like(q), np.empty(q.shape[:3], np.int64), np.empty(n_rep, np.bool_))
        hs = plan_args[0][1].shape[1]
        labels = {"model rebuilt": False} if private else {"model rebuilt": False,
                                                            "model kept": True}
        for label, kept in labels.items():
            model = new_model(n_rep, hs, n_states, n_actions)
            _plan_loop(2, plan_args, outputs, model, kept)
            us = median_us(_plan_loop, (args.calls, plan_args, outputs, model, kept), args.calls,
                           args.rounds)
            print(f"{name:20s} plan_replicas ({label}): {us:7.2f} us", flush=True)
        if private:
            sas, sa = plan_args[0][0][0, 0], plan_args[0][1][0, 0]
            out, scratch = np.empty_like(sas), np.empty(4 * n_states)
            _project_loop(2, sas, sa, plan_args[1], out, scratch)
            cells = n_states * n_actions
            us = median_us(_project_loop, (args.calls, sas, sa, plan_args[1], out, scratch),
                           args.calls * cells, args.rounds)
            print(f"{name:20s} project_cell: {us * 1000:7.0f} ns per cell of {n_states}",
                  flush=True)

if __name__ == "__main__":
    main()
