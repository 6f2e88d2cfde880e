"""CPU cost of the linear-mixture families per 1,000 episodes with their seeds as one
vectorized run (replica axis R), per release schedule, and what the issue-31 study would take:
`python scripts/linear/study_cost.py [--episodes 1000] [--replicas 5] [--json OUT]`.

Practical preset, Gaussian, eps = 1, delta = 1e-5, default worlds. CPU time of this process
(`time.process_time`, after a 200-episode warm-up run), not wall time: the machine is shared,
and wall time there measures the other users. Study: 8 epsilons x K = 50,000 with R seeds at
once, in CPU minutes (two cores halve the wall time).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

CASES = (("ucrl-vtr", "lm-hard", "jdp"), ("ucrl-vtr", "lm-hard", "ldp"),
         ("linopt-vi", "zhou-mix", "jdp"), ("linopt-po", "zhou-mix", "jdp"))
SCHEDULES = ("every", "batch:10", "batch:100")
COLUMNS = (("algorithm", ""), ("mode", ""), ("schedule", ""), ("replicas", ""),
           ("CPU s / 1000 episodes (all replicas)", ".2f"),
           ("study CPU min (8 ε, K = 50,000)", ".1f"))


def cpu_seconds(config: RunConfig, mdp, replicas: int) -> float:
    """CPU seconds of one run of `config` over `replicas` seeds at once (after a warm-up)."""
    run_in_process(config.model_copy(update={"episodes": 200}), mdp, list(range(replicas)))
    start = time.process_time()
    run_in_process(config, mdp, list(range(replicas)))
    return time.process_time() - start


def main() -> None:
    """Print the table (and with --json save it)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for algo, world, privacy in CASES:
        mdp = make(world, None)
        for schedule in SCHEDULES if privacy == "jdp" else ("every",):
            config = RunConfig(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                               model=model_spec_of(mdp), episodes=args.episodes,
                               privacy=privacy, epsilon=1.0, delta=1e-5, mechanism="gaussian",
                               preset="practical", schedule=schedule)
            per_1000 = 1e3 * cpu_seconds(config, mdp, args.replicas) / args.episodes
            study = 8 * 50 * per_1000 / 60.0
            rows.append([algo, privacy.upper(), schedule, args.replicas, per_1000, study])
            print(f"{algo:<10} {privacy} {schedule:<10} {per_1000:7.2f} CPU s/1000 ep,"
                  f" study {study:6.1f} CPU min", flush=True)
    if args.json:
        save_table(args.json, COLUMNS, rows, episodes=args.episodes)


if __name__ == "__main__":
    main()
