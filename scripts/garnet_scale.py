"""Per-episode cost and peak memory of a JDP run at scale, beside the noise-drawing floor.

    python scripts/garnet_scale.py --states 100 --actions 5 [--episodes 16] [--horizon 20]
        [--json OUT]

One Garnet world (seed 0), DP-UCBVI with per-step statistics, JDP Gaussian eps = 1,
delta = 1e-5, practical preset (smoothed tree), one replica. Prints the median per-episode wall
time (episodes timed one by one after a warm-up, each followed by a sample of the noise floor:
medians of both), the noise floor (the standard normals a binary
tree draws per episode, about two fresh nodes of every released counter, plus one sum), their
ratio, the process's peak resident memory and that memory per (h, s, a, s') cell. Run each size
in its own process: peak memory is per process. The first two episodes are not counted (they
load, or compile, DP-UCBVI's kernels).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import numpy as np
from privrl.config import RunConfig
from privrl.run import Run, user_episode
from privrl.seeding import generator
from privrl.worlds.tabular import garnet
from results_table import save_table

COLUMNS = (("world", ""), ("cells H·S·A·S", ","), ("released counters", ","),
           ("ms per episode (median)", ".1f"), ("noise floor ms", ".1f"), ("ratio", ".1f"),
           ("peak memory MB", ".0f"), ("bytes per cell", ".1f"))


def noise_floor(cells: int, k: int) -> float:
    """Seconds to draw two nodes of `cells` standard normals from fresh seeded generators and
    add them: what one episode of a binary tree needs, amortized."""
    start = time.perf_counter()
    a = generator(0, "floor", 2 * k).standard_normal(cells)
    b = generator(0, "floor", 2 * k + 1).standard_normal(cells)
    a += b
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    """Time the run episode by episode; print cost, floor, ratio and memory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=100)
    parser.add_argument("--actions", type=int, default=5)
    parser.add_argument("--horizon", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--json", help="also save the result as a table here (for the docs)")
    args = parser.parse_args(argv)
    mdp = garnet(args.states, args.actions, args.horizon, seed=0)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=args.episodes,
                       privacy="jdp", mechanism="gaussian", epsilon=1.0, delta=1e-5,
                       preset="practical")
    run = Run(config, [0])
    released = sum(int(np.prod(f.shape)) for f in run.calibration.families)
    per_episode, floors = [], []
    for k in range(args.episodes):  # an episode, then a floor sample: same load for both
        start = time.perf_counter()
        message = run.message()
        traj, _ = user_episode(mdp, message, run.seeds, k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
        per_episode.append(time.perf_counter() - start)
        floors.append(noise_floor(released, k))
    cells = mdp.H * mdp.S * mdp.A * mdp.S
    cost = statistics.median(per_episode[2:])  # past the warm-up (kernel loading)
    floor = statistics.median(floors[2:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"garnet S={mdp.S} A={mdp.A} H={mdp.H}: {cells:,} cells (H*S*A*S), {released:,} released"
          f" counters; per episode {1e3 * cost:.1f} ms (median of {len(per_episode) - 2}),"
          f" noise floor {1e3 * floor:.1f} ms, ratio {cost / floor:.1f}x; peak memory"
          f" {peak / 2**20:.0f} MB = {peak / cells:.1f} bytes per cell")
    if args.json:
        world = f"garnet S={mdp.S} A={mdp.A} H={mdp.H}"
        save_table(args.json, COLUMNS, [[world, cells, released, 1e3 * cost, 1e3 * floor,
                                         cost / floor, peak / 2**20, peak / cells]],
                   episodes=args.episodes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
