"""Each seeded-world case at its target ε on worlds the study never saw: other secret seeds.

`python scripts/frontier/held_out.py --world-seeds 101 102 103 --json OUT`

The frontier runs each algorithm's default world. A case whose world is drawn from a seed (the
linear families: LM-Hard's secret signs, zhou-mix's features and kernels, lin-cube's signs) is
run here under the practical preset at its target ε on the same world drawn from other seeds
(zhou-mix: its public features too), seeds 0-4 as replicas, K = 50,000, as `privrl frontier`
runs a row. RiverSwim, DP-UCBVI's world, has no seed and is left out.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from privrl.lab.executors import LocalExecutor, Task
from privrl.provenance import save_measured
from privrl.studies.cases import CASES
from privrl.studies.frontier import Planner, StudySpec, precheck, random_regret, run_or_error
from privrl.studies.threshold import final_fractions

SEEDED = {"lm-hard": ("seed",), "zhou-mix": ("seed", "feature_seed"), "lin-cube": ("seed",)}
LEARNS = 25.0  # % of uniform over the last 10% of episodes: at or below, the case learns


def main() -> None:
    """Run every seeded-world case at its target on each held-out world; save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-seeds", type=int, nargs="+", default=[101, 102, 103])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", nargs="*", help="only these cases")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    seeds = tuple(range(args.seeds))
    planner = Planner(StudySpec(episodes=args.episodes, seeds=seeds))
    jobs, tasks = [], []
    for case in CASES:
        world = planner.world(case.algo)[0].name
        if world not in SEEDED or (args.cases and case.name not in args.cases):
            continue
        for seed in args.world_seeds:
            params = dict.fromkeys(SEEDED[world], seed)
            config, spec = planner.config(case, "practical", case.target, world_params=params)
            if reason := precheck(config):
                sys.exit(f"{case.name} on {world} {params}: {reason}")
            level = random_regret(planner.world(case.algo, params)[1])  # the cached world
            jobs.append((case, world, params, level))
            tasks.append(Task((len(tasks), 0), config, spec, seeds))
    rows: dict[int, dict[str, Any]] = {}
    for key, result in LocalExecutor(args.workers).run(run_or_error, tasks, lambda k, n: None):
        case, world, params, level = jobs[key[0]]
        if isinstance(result, str):
            sys.exit(f"{case.name} on {world} {params}: {result}")
        fractions = final_fractions(result.regret, level)
        rows[key[0]] = {"case": case.name, "world": world, "params": params,
                        "epsilon": case.target, "fractions": fractions,
                        "mean": float(np.mean(fractions)), "sd": float(np.std(fractions)),
                        "ledger_epsilon": result.ledger["epsilon"], "seconds": result.seconds}
        print(f"{case.name} on {world} {params} at ε={case.target:g}: {np.mean(fractions):.1f}"
              f" ± {np.std(fractions):.1f} in {result.seconds:.0f} s", flush=True)
    ordered = [rows[i] for i in sorted(rows)]  # the cases' order, not the finishing one
    save_measured(args.json, {"seeds": list(seeds), "episodes": args.episodes,
                              **table(ordered), "runs": ordered})


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The docs' table (scripts/results_table.py's format): a row per case and world."""
    columns = (("case", ""), ("world", ""), ("target ε", "g"), ("per seed", ""),
               ("mean ± sd", ".1f"), ("learns", ""), ("ledger ε", ".4g"))
    body = [[r["case"], f"{r['world']} " + ", ".join(f"{k}={v}" for k, v in r["params"].items()),
             r["epsilon"], ", ".join(f"{f:.0f}" for f in r["fractions"]), [r["mean"], r["sd"]],
             r["mean"] <= LEARNS, r["ledger_epsilon"]] for r in rows]
    learned = sum(r["mean"] <= LEARNS for r in rows)
    note = (f"{learned} of {len(rows)} (case, world) pairs learn at their target ε (mean of the"
            f" last 10% of episodes ≤ {LEARNS:g}% of the uniform policy's regret).")
    return {"columns": [{"title": t, "format": f} for t, f in columns], "rows": body,
            "note": note}


if __name__ == "__main__":
    main()
