"""UCRL-VTR+ against UCRL-VTR (Luyo et al. 2021, App. D) on LM-Hard or LM-Mix: regret per seed.

`python scripts/linear/vtr_plus.py --json docs/results/linear/vtr-plus-none-50k.json
[--episodes 10000] [--seeds 5] [--privacy none] [--epsilon 100] [--preset practical]
[--world lm-hard] [--world-seed 1]`

Each algorithm runs its seeds as one vectorized in-process run (replica axis R), Gaussian,
delta = 1e-5 when private. The world's secret parameters come from `--world-seed` (1: held out,
the practical radii were chosen on world seed 0). The JSON is a docs table
(`results_table.save_table`: regret at K as mean and std over seeds, its standard error, the last
10% per-episode regret, the ledger's epsilon, the wall time) with every seed's regret under
`per_seed`; it is rewritten after each algorithm.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

ALGOS = ("ucrl-vtr", "ucrl-vtr-plus")
COLUMNS = (("algorithm", ""), ("privacy", ""), ("ε", "g"), ("episodes", ","), ("seeds", ""),
           ("regret at K", ".1f"), ("standard error", ".1f"),
           ("last 10% regret per episode", ".4f"), ("ledger ε", ".4g"),
           ("s (wall, shared machine)", ".0f"))


def measure(algo: str, args: argparse.Namespace) -> dict:
    """One algorithm over all seeds at once."""
    mdp = make(args.world, None, seed=args.world_seed)
    private = args.privacy != "none"
    config = RunConfig(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                       model=model_spec_of(mdp), episodes=args.episodes, privacy=args.privacy,
                       epsilon=args.epsilon if private else math.inf,
                       delta=1e-5 if private else 0.0, mechanism="gaussian", preset=args.preset)
    start = time.perf_counter()
    res = run_in_process(config, mdp, list(range(args.seeds)))
    wall = time.perf_counter() - start
    total = res.regret.sum(axis=1)
    tail = res.regret[:, -max(1, args.episodes // 10):].mean()
    spent = res.ledger.totals(config.delta).epsilon if private else 0.0
    stderr = float(total.std(ddof=1) / math.sqrt(len(total))) if len(total) > 1 else 0.0
    return {"algo": algo, "regret": total.round(3).tolist(), "mean": float(total.mean()),
            "std": float(total.std()), "stderr": stderr, "tail": float(tail),
            "ledger_epsilon": float(spent), "seconds": round(wall, 1)}


def main() -> None:
    """Run both algorithms and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="the docs table to (re)write")
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--privacy", choices=("none", "jdp", "ldp"), default="none")
    parser.add_argument("--epsilon", type=float, default=100.0)
    parser.add_argument("--preset", default="practical")
    parser.add_argument("--world", choices=("lm-hard", "lm-mix"), default="lm-hard")
    parser.add_argument("--world-seed", type=int, default=1)
    args = parser.parse_args()
    rows: list[dict] = []
    for algo in ALGOS:
        rows.append(measure(algo, args))
        print(rows[-1], flush=True)
        eps = args.epsilon if args.privacy != "none" else math.inf
        table = [[r["algo"], args.privacy, eps, args.episodes, args.seeds, [r["mean"], r["std"]],
                  r["stderr"], r["tail"], r["ledger_epsilon"], r["seconds"]] for r in rows]
        save_table(args.json, COLUMNS, table, world=f"{args.world}(seed={args.world_seed})",
                   preset=args.preset, per_seed={r["algo"]: r["regret"] for r in rows})
    best = min(rows, key=lambda r: r["mean"])
    print(f"lowest mean regret: {best['algo']} ({best['mean']:.1f} +- {best['stderr']:.1f})")


if __name__ == "__main__":
    main()
