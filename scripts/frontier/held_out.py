"""Each seeded-world case at its target ε (or at given ε) on worlds the study never saw.

`python scripts/frontier/held_out.py --world-seeds 101 102 103 --json OUT
[--cases C ...] [--epsilon E ...]`, or `--from OUT [OUT ...] --json OUT2` for their thresholds

The frontier runs each algorithm's default world. A case whose world is drawn from a seed (the
linear families: LM-Hard's secret signs, zhou-mix's features and kernels, lin-cube's signs) is
run here under the practical preset at its target ε (`--epsilon`: at each of these instead) on
the same world drawn from other seeds (zhou-mix: its public features too), seeds 0-4 as replicas,
K = 50,000, as `privrl frontier` runs a row. RiverSwim, DP-UCBVI's world, has no seed and is
left out. The JSON is rewritten after every run, so a stopped invocation keeps what finished.
Each row says whether the ledger is exact: the ε it spent is the budget (relative 1e-9), never
more. `--from OUT`: no runs; the table of OUT's runs per case and world: the smallest measured
ε that learns and its interval (`privrl.studies.threshold`, the frontier's rule).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from privrl.lab.executors import LocalExecutor, Task
from privrl.provenance import save_measured
from privrl.studies.cases import CASES
from privrl.studies.frontier import Planner, StudySpec, precheck, random_regret, run_or_error
from privrl.studies.threshold import final_fractions, smallest_learning_epsilon

SEEDED = {"lm-hard": ("seed",), "zhou-mix": ("seed", "feature_seed"), "lin-cube": ("seed",)}
LEARNS = 25.0  # % of uniform over the last 10% of episodes: at or below, the case learns
EXACT = 1e-9  # relative: the ledger's ε equals the budget the calibration spends


def main() -> None:
    """Run every seeded-world case at its ε on each held-out world; save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-seeds", type=int, nargs="+", default=[101, 102, 103])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", nargs="*", help="only these cases")
    parser.add_argument("--epsilon", type=float, nargs="+", help="these ε (default: the target)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--from", dest="runs", nargs="+",
                        help="no runs: the thresholds of these files' runs (same seeds and K)")
    args = parser.parse_args()
    if args.runs:
        saved = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.runs]
        if len({(json.dumps(d["seeds"]), d["episodes"]) for d in saved}) > 1:
            sys.exit("--from: the files ran other seeds or K; their thresholds do not combine")
        runs = [r for d in saved for r in d["runs"]]
        save_measured(args.json, {"source": args.runs, "seeds": saved[0]["seeds"],
                                  "episodes": saved[0]["episodes"], **threshold_table(runs)})
        return
    seeds = tuple(range(args.seeds))
    planner = Planner(StudySpec(episodes=args.episodes, seeds=seeds))
    jobs, tasks = [], []
    cases = [c for c in CASES if planner.world(c.algo)[0].name in SEEDED
             and (not args.cases or c.name in args.cases)]
    for seed in args.world_seeds:  # world by world: a stopped invocation keeps whole worlds
        for case in cases:
            world = planner.world(case.algo)[0].name
            for epsilon in args.epsilon or [case.target]:
                params = dict.fromkeys(SEEDED[world], seed)
                config, spec = planner.config(case, "practical", epsilon, world_params=params)
                if reason := precheck(config):
                    sys.exit(f"{case.name} on {world} {params} at ε={epsilon:g}: {reason}")
                level = random_regret(planner.world(case.algo, params)[1])  # the cached world
                jobs.append((case, world, params, epsilon, level))
                tasks.append(Task((len(tasks), 0), config, spec, seeds))
    rows: dict[int, dict[str, Any]] = {}
    for key, result in LocalExecutor(args.workers).run(run_or_error, tasks, lambda k, n: None):
        case, world, params, epsilon, level = jobs[key[0]]
        if isinstance(result, str):
            sys.exit(f"{case.name} on {world} {params} at ε={epsilon:g}: {result}")
        fractions = final_fractions(result.regret, level)
        spent = result.ledger["epsilon"]
        rows[key[0]] = {"case": case.name, "world": world, "params": params,
                        "epsilon": epsilon, "fractions": fractions,
                        "mean": float(np.mean(fractions)), "sd": float(np.std(fractions)),
                        "ledger_epsilon": spent, "ledger_exact": exact(spent, epsilon),
                        "seconds": result.seconds}
        print(f"{case.name} on {world} {params} at ε={epsilon:g}: {np.mean(fractions):.1f}"
              f" ± {np.std(fractions):.1f} in {result.seconds:.0f} s", flush=True)
        ordered = [rows[i] for i in sorted(rows)]  # the planned order, not the finishing one
        about = {"seeds": list(seeds), "episodes": args.episodes, "planned": len(tasks)}
        save_measured(args.json, {**about, **table(ordered), "runs": ordered})


def exact(spent: float, budget: float) -> bool:
    """The ledger spent the budget, up to rounding, and never more."""
    return abs(spent - budget) <= EXACT * budget


def world_text(row: dict[str, Any]) -> str:
    """'lm-hard seed=101'."""
    return f"{row['world']} " + ", ".join(f"{k}={v}" for k, v in row["params"].items())


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The docs' table (scripts/results_table.py's format): a row per case, world and ε."""
    columns = (("case", ""), ("world", ""), ("ε", "g"), ("per seed", ""),
               ("mean ± sd", ".1f"), ("learns", ""), ("ledger ε", ".4g"), ("ledger exact", ""))
    body = [[r["case"], world_text(r), r["epsilon"], ", ".join(f"{f:.0f}" for f in r["fractions"]),
             [r["mean"], r["sd"]], r["mean"] <= LEARNS, r["ledger_epsilon"],
             r.get("ledger_exact", exact(r["ledger_epsilon"], r["epsilon"]))] for r in rows]
    learned = sum(r["mean"] <= LEARNS for r in rows)
    note = (f"{learned} of {len(rows)} (case, world, ε) runs learn (mean of the last 10% of"
            f" episodes ≤ {LEARNS:g}% of the uniform policy's regret).")
    return {"columns": [{"title": t, "format": f} for t, f in columns], "rows": body,
            "note": note}


def threshold_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per case and world: the measured ε, the smallest that learns and its interval."""
    groups: dict[tuple[str, str], dict[float, list[float]]] = {}
    for r in rows:
        groups.setdefault((r["case"], world_text(r)), {})[r["epsilon"]] = r["fractions"]
    columns = (("case", ""), ("world", ""), ("ε measured", ""), ("smallest ε that learns", ""),
               ("its interval", ""))
    body = []
    for (case, world), fractions in groups.items():
        found = smallest_learning_epsilon(fractions, LEARNS)
        top = f"> {max(found.grid):g}"
        body.append([case, world, ", ".join(f"{e:g}" for e in found.grid),
                     f"{found.epsilon:g}" if found.epsilon is not None else top,
                     f"[{_or(found.low, top)}, {_or(found.high, top)}]"])
    note = ("The smallest measured ε from which the case learns at every larger measured ε (mean"
            f" over the seeds ≤ {LEARNS:g}%); the interval applies the rule to the ends of each ε's"
            " 95% t interval over the seeds, as `privrl frontier` does.")
    return {"columns": [{"title": t, "format": f} for t, f in columns], "rows": body,
            "note": note}


def _or(value: float | None, otherwise: str) -> str:
    return f"{value:g}" if value is not None else otherwise


if __name__ == "__main__":
    main()
