"""Seconds per 1,000 episodes of one in-process LSVI run with 5 seeds as replicas (the study's
unit of work): `python scripts/lsvi/study_cost.py [--episodes 2000] [--epsilon 10]
[--config schedule=batch:50 ...]`.

lin-cube, JDP, Gaussian, delta = 1e-5, practical preset, integer noise, replicas = seeds 0..4
in one process (`run_in_process`). Prints one line per algorithm; on a shared machine compare
runs made together.
"""

from __future__ import annotations

import argparse
import json
import time

from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

ALGOS = ("lsvi-ucb-batched", "lsvi-ucb-switching")


def main() -> None:
    """Time each algorithm once and print seconds per 1,000 episodes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--algo", nargs="+", default=list(ALGOS))
    parser.add_argument("--config", action="append", default=[],
                        help="RunConfig field NAME=VALUE (e.g. schedule=batch:50)")
    args = parser.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.config)
    extra = {k: json.loads(v) if v[:1].isdigit() else v for k, v in extra.items()}
    world = make("lin-cube")
    for algo in args.algo:
        config = RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                           model=model_spec_of(world), episodes=args.episodes, privacy="jdp",
                           epsilon=args.epsilon, delta=1e-5, mechanism="gaussian", **extra)
        start = time.perf_counter()
        run_in_process(config, world, [0, 1, 2, 3, 4])
        seconds = time.perf_counter() - start
        print(f"{algo} {extra or ''}: {1000 * seconds / args.episodes:.2f} s per 1,000 episodes"
              f" (5 seeds, K = {args.episodes})", flush=True)


if __name__ == "__main__":
    main()
