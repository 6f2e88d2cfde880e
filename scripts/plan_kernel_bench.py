"""Microseconds per call of the compiled planner on a realistic billboard (RiverSwim, H = 20).

    python scripts/plan_kernel_bench.py [--episodes 300] [--calls 20000] [--rounds 7]

For each mode (non-private, JDP Gaussian eps = 1, practical preset, one replica) it plays
`--episodes` episodes through the generic server path, then times `plan_replicas` on the
resulting billboard in a compiled loop (medians of `--rounds`): rebuilding the model every call,
and for non-private also keeping it with one stale cell per step (as the episode loop does). For
JDP it times `project_cell` per cell of 6 entries. Point PYTHONPATH at another checkout's
package to time its kernels the same way (that checkout's `plan_replicas` signature permitting).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numba
import numpy as np
from privrl.accel.planning import plan_replicas, project_cell
from privrl.algorithms.ucbvi.learner import NO_KEPT_MODEL
from privrl.config import RunConfig
from privrl.run import Run, user_episode
from privrl.worlds import riverswim

MODES = {
    "non-private": dict(privacy="none", preset="practical"),
    "JDP gaussian eps=1": dict(privacy="jdp", mechanism="gaussian", epsilon=1.0, delta=1e-5,
                               preset="practical"),
}


@numba.njit(cache=True)
def _plan_loop(calls: int, plan_args: tuple, outputs: tuple, model: tuple) -> None:
    """`calls` plans of the same billboard; a kept model gets one stale cell per step per call."""
    stale = model[-1]
    for i in range(calls):
        if stale.shape[0] > 0:
            for h in range(stale.shape[1]):
                stale[0, h, (i + h) % stale.shape[2], i % stale.shape[3]] = True
        plan_replicas(*plan_args, *outputs, *model)


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
    """plan_replicas' inputs (before its outputs) after `episodes` episodes of one replica."""
    mdp = riverswim(20)
    run = Run(RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=50_000, **case),
              [0])
    for k in range(episodes):
        message = run.message()
        trajectories, _ = user_episode(mdp, message, run.seeds, k, run.algorithm,
                                       run.calibration)
        run.ingest_trajectories(trajectories, message)
    board, planner, learner = run.billboard(), run.learner.planner, run.learner
    radius = learner.radius(run.reported)
    return (np.ascontiguousarray(board["sas"], dtype=float),
            np.ascontiguousarray(board["sa"], dtype=float),
            np.ascontiguousarray(board["r"], dtype=float), float(radius),
            run.calibration.mechanism is not None,
            float(planner.knobs.unknown_below * learner.pair_std(run.reported)),
            planner.constants(radius), planner.caps, planner.q.copy(),
            bool(planner.knobs.clip_previous), bool(radius > 0),
            bool(planner.knobs.variance_terms))


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
        q = plan_args[8]
        n_rep, horizon, n_states, n_actions = q.shape
        outputs = (np.empty_like(q), np.empty(q.shape[:3], np.int64), np.empty(n_rep, np.bool_))
        models = {"model rebuilt": NO_KEPT_MODEL}
        if not plan_args[4]:
            shape = (n_rep, horizon, n_states, n_actions)
            models["model kept"] = (np.empty((*shape, n_states)), np.empty(shape),
                                    np.empty(shape), np.empty((*shape, 2)),
                                    np.empty(shape[:3]), np.ones(shape, np.bool_))
        for label, model in models.items():
            _plan_loop(2, plan_args, outputs, model)
            us = median_us(_plan_loop, (args.calls, plan_args, outputs, model), args.calls,
                           args.rounds)
            print(f"{name:20s} plan_replicas ({label}): {us:7.2f} us", flush=True)
        if plan_args[4]:
            sas, sa = plan_args[0][0, 0], plan_args[1][0, 0]
            out, scratch = np.empty_like(sas), np.empty(4 * n_states)
            _project_loop(2, sas, sa, plan_args[3], out, scratch)
            cells = n_states * n_actions
            us = median_us(_project_loop, (args.calls, sas, sa, plan_args[3], out, scratch),
                           args.calls * cells, args.rounds)
            print(f"{name:20s} project_cell: {us * 1000:7.0f} ns per cell of {n_states}",
                  flush=True)


if __name__ == "__main__":
    main()
