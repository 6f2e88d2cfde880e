"""LSVI-UCB's practical beta against the paper's beta at the actual release noise: last-10% regret
as % of the uniform policy's, per epsilon, on held-out lin-cube worlds.

`python scripts/lsvi/beta.py --algo lsvi-ucb-batched --episodes 10000 --seeds 5 --first-seed 11
 --epsilon 3 10 30 --scale 1e-4 --json OUT`

Each (epsilon, seed) runs the practical preset twice, as `threshold.py` builds a run (world
lin-cube(seed = 100 + s), run seed s, JDP, delta = 1e-5): once as it is (beta = 2) and once with
beta = scale times the paper's formula at the release's noise norms (`noise_norms=variance`).
One run at a time, in this process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402
from threshold import LEARNS, one_run  # noqa: E402

COLUMNS = (("ε (δ = 1e-5)", "sci"), ("β = 2: per seed", ""), ("β = 2: mean ± std", ".1f"),
           ("noise β: value", ".3g"), ("noise β: per seed", ""), ("noise β: mean ± std", ".1f"),
           ("lower mean", ""))


def main() -> None:
    """Run both betas over the grid, print a line per epsilon, save the table with --json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", required=True)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=11)
    parser.add_argument("--epsilon", type=float, nargs="+", required=True)
    parser.add_argument("--scale", type=float, required=True, help="beta_scale of the noise beta")
    parser.add_argument("--json", help="save the table and every run here")
    args = parser.parse_args()
    variance = {"beta": None, "noise_norms": "variance", "beta_scale": args.scale}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows, runs = [], []
    for eps in args.epsilon:
        fixed = [one_run(args.algo, eps, s, args.episodes, "practical", {}, {}) for s in seeds]
        noise = [one_run(args.algo, eps, s, args.episodes, "practical", variance, {})
                 for s in seeds]
        for label, group in (("beta=2", fixed), ("noise", noise)):
            runs += [{**r, "beta": label} for r in group]
        a = [r["last10_pct_uniform"] for r in fixed]
        b = [r["last10_pct_uniform"] for r in noise]
        rows.append([eps, _seeds(a), [float(np.mean(a)), float(np.std(a))], noise[0]["beta"],
                     _seeds(b), [float(np.mean(b)), float(np.std(b))],
                     "noise β" if np.mean(b) < np.mean(a) else "β = 2"])
        print(" | ".join(str(v) for v in rows[-1]), flush=True)
    if args.json:
        save_table(args.json, COLUMNS, rows, algo=args.algo, episodes=args.episodes,
                   seeds=list(seeds), scale=args.scale, learns_below_percent=LEARNS, runs=runs)


def _seeds(pct: list[float]) -> str:
    """Per-seed percentages, comma-separated."""
    return ", ".join(f"{p:.1f}" for p in pct)


if __name__ == "__main__":
    main()
