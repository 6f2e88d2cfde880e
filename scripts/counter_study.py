"""DP-UCBVI on RiverSwim under each continual counter and release schedule (issue 31, part 3).

    python scripts/counter_study.py --runs DIR [--episodes 20000] [--seeds 3] [--measure]
        [--json docs/results/counters/dp-ucbvi-riverswim.json]

Each case is one `privrl run` (JDP, Gaussian, delta = 1e-5, practical preset, integer noise)
whose output folder DIR/NAME holds its summary.json; `--measure` runs the cases whose folder is
missing (sequentially: about 5-15 minutes per case at K = 20,000 on a loaded 2-core machine).
The table gives the last 10% of episodes' mean regret as a percentage of the uniform policy's
(mean and std over seeds) and the ledger's epsilon.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
from privrl.config import RunConfig
from privrl.privacy.calibration import counter_plan
from results_table import save_table

BANDS = 1024  # the matrix counter's bands under the every-episode schedule (O(bands) state)
CASES = [  # (pooled, counter, schedule, epsilons)
    *[(True, c, s, (0.1, 1.0)) for s in ("every", "geometric:1.1")
      for c in ("tree", "smoothed", "matrix")],
    *[(False, c, s, (1.0,)) for s in ("every", "geometric:1.1")
      for c in ("tree", "smoothed", "matrix")],
]
COLUMNS = (("statistics", ""), ("counter", ""), ("schedule", ""), ("releases T", ","),
           ("ε", "g"), ("last 10%, % of uniform", ".1f"), ("ε spent", ".4g"))


def name(pooled: bool, counter: str, schedule: str) -> str:
    """The case's output folder."""
    return f"{'pooled' if pooled else 'perstep'}-{counter}-{schedule.split(':')[0]}"


def command(pooled: bool, counter: str, schedule: str, epsilons: tuple[float, ...],
            episodes: int, seeds: int, out: Path) -> list[str]:
    """The `privrl run` command of one case."""
    cmd = ["privrl", "run", "--privacy", "jdp", "--epsilon", *map(str, epsilons),
           "--mechanism", "gaussian", "--delta", "1e-5", "--episodes", str(episodes),
           "--seeds", str(seeds), "--seed", "0", "--workers", "1", "--quiet", "--out", str(out),
           "--counter", counter, "--schedule", schedule]
    if counter == "matrix" and schedule == "every":
        cmd += ["--counter-bands", str(BANDS)]
    return cmd + (["--knob", "pooled=true"] if pooled else [])


def rows_of(summary: Path, pooled: bool, counter: str, schedule: str) -> list[list]:
    """One row per epsilon of a case's summary.json."""
    out = []
    for res in json.loads(summary.read_text())["results"]:
        config = RunConfig.model_validate(res["config"])
        plan, _ = counter_plan(config)
        regret = np.asarray(res["regret"]["per_episode"])
        tail = regret[:, -(regret.shape[1] // 10):].mean(axis=1)
        pct = 100.0 * tail / res["regret"]["random_policy_per_episode"]
        bands = f" ({config.counter_bands} bands)" if config.counter_bands else ""
        out.append(["pooled" if pooled else "per step", counter + bands, schedule,
                    plan.releases if plan else None, config.epsilon,
                    [float(pct.mean()), float(pct.std())], res["ledger"]["epsilon"]])
    return out


def main(argv: list[str]) -> int:
    """Run the missing cases (with --measure), print and save the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, required=True, help="one folder per case")
    p.add_argument("--episodes", type=int, default=20_000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--measure", action="store_true", help="run the cases not yet in --runs")
    p.add_argument("--json", help="save the table here (for the docs)")
    args = p.parse_args(argv)
    rows, commands = [], []
    for pooled, counter, schedule, epsilons in CASES:
        out = args.runs / name(pooled, counter, schedule)
        cmd = command(pooled, counter, schedule, epsilons, args.episodes, args.seeds, out)
        if args.measure and not (out / "summary.json").exists():
            subprocess.run(cmd, check=True)
        if (out / "summary.json").exists():
            commands.append(shlex.join(cmd))
            rows += rows_of(out / "summary.json", pooled, counter, schedule)
    for row in rows:
        mean, std = row[5]
        print(f"{row[0]:9s} {row[1]:22s} {row[2]:14s} T={row[3]:>6} eps={row[4]:<4g}"
              f" {mean:6.1f} ± {std:4.1f} %  spent {row[6]:.4g}")
    if args.json:
        save_table(args.json, COLUMNS, rows, runs=commands, episodes=args.episodes,
                   seeds=args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
