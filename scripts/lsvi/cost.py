"""Per-episode cost of the LSVI-UCB plug-ins against the episode index k, at d in {5, 10, 20} and
H in {5, 20}: `python scripts/lsvi/cost.py [--episodes 4000] [--json OUT]`.

World: lin-mix (S = 20, A = 4) with the given d and H. One replica (a server's shape), in
process: each episode is the server's whole work for one user (plan the message, the user's
rollout, ingest: history update, Gram leaf, and the release round when one is due), timed with
perf_counter. Three configurations: LSVI-UCB re-solved every episode (lsvi-ucb-batched without
noise, B = K: the worst case, a least-squares pass over the whole history every episode),
batched JDP eps = 10 and switching JDP eps = 10 (practical preset). The table gives the median
and the mean milliseconds per episode over the first and the last 10% of episodes, and the
ratio of the medians: a cost that grew linearly in k would give a ratio near 19 (mean k of the
last tenth over the first's). On a shared machine, compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from privrl.config import RunConfig
from privrl.run import Run, user_episode
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

CASES = (("every-episode LSVI-UCB", "lsvi-ucb-batched", "none", float("inf")),
         ("batched JDP eps=10", "lsvi-ucb-batched", "jdp", 10.0),
         ("switching JDP eps=10", "lsvi-ucb-switching", "jdp", 10.0))
COLUMNS = (("configuration", ""), ("d", ""), ("H", ""), ("first 10%: median ms/ep", ".3f"),
           ("(mean)", ".3f"), ("last 10%: median", ".3f"), ("(mean)", ".3f"),
           ("last / first (medians)", ".2f"))


def episode_times(config: RunConfig, world) -> np.ndarray:
    """Seconds of every episode of one replica, in order."""
    run = Run(config, [0])
    times = np.empty(config.episodes)
    for k in range(config.episodes):
        start = time.perf_counter()
        message = run.message()
        traj, _ = user_episode(world, message, [0], k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
        times[k] = time.perf_counter() - start
    return times


def main() -> None:
    """Print the table (and with --json save it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4000, help="K per configuration")
    parser.add_argument("--json", help="also save the table here (for the docs)")
    args = parser.parse_args()
    print(" | ".join(title for title, _ in COLUMNS))
    rows = []
    for d in (5, 10, 20):
        for horizon in (5, 20):
            world = make("lin-mix", horizon=horizon, d=d, n_states=20)
            for label, algo, privacy, eps in CASES:
                config = RunConfig(algo=algo, n_states=world.S, n_actions=world.A,
                                   horizon=world.H, model=model_spec_of(world),
                                   episodes=args.episodes, privacy=privacy, epsilon=eps,
                                   delta=1e-5 if privacy == "jdp" else 0.0, mechanism="gaussian")
                times = 1e3 * episode_times(config, world)
                tenth = max(args.episodes // 10, 1)
                first, last = times[:tenth], times[-tenth:]
                rows.append([label, d, horizon, float(np.median(first)), float(first.mean()),
                             float(np.median(last)), float(last.mean()),
                             float(np.median(last) / np.median(first))])
                print(" | ".join(format(v, spec) for v, (_, spec) in zip(rows[-1], COLUMNS,
                                                                            strict=True)),
                      flush=True)
    if args.json:
        save_table(args.json, COLUMNS, rows, episodes=args.episodes)


if __name__ == "__main__":
    main()
