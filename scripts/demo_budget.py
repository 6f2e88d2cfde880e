"""The demo's JDP run at budgets below 10: which public counter and release schedule learn at the
demo's size (RiverSwim, H = 20, K = 3,000), in process (issue 31).

    python scripts/demo_budget.py [--seeds 40] [--seed 1000] [--json docs/results/demo/budget.json]

Every case is the JDP run of `privrl demo` / `privrl compare --create` (its parser's defaults:
pooled, practical preset, Gaussian with delta = 1e-5, integer noise) with the case's counter,
schedule, epsilon and K; no knob touches the noise. A case learns when its last 10% of episodes
is at most 25% of the uniform policy's regret, mean over the seeds; a demo shows one run, so its
budget is the smallest at which the case also learns in at least 85% of single runs (seeds).
The counter and schedule were chosen on seeds 0-9, 100-109 and 200-219; the default --seed
1000 measures every case on fresh ones.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from privrl.client.cli import build_parser
from privrl.client.demo import demo_configs
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec, run_many
from privrl.privacy.calibration import counter_plan
from privrl.verdict import LEARNED  # % of random over the last 10%: at or below, it learns
from results_table import save_table

RELIABLE = 0.85  # the share of single runs (seeds) that must learn for a demo's budget
SMALL = (1.0, 2.0, 3.0, 5.0)  # the budgets tried below today's 10
CASES = [  # (counter, schedule, epsilons, K)
    ("smoothed", "every", (3.0, 5.0, 10.0), 3000),  # the practical preset's, before issue 31
    ("matrix", "geometric:1.1", SMALL, 3000),
    ("matrix", "batch:200", SMALL, 3000),
    ("matrix", "batch:200", (2.0,), 6000),
    ("matrix", "batch:200", (1.0,), 10_000),
]
COLUMNS = (("counter", ""), ("schedule", ""), ("releases T", ","), ("K", ","), ("ε", "g"),
           ("last 10%, % of uniform", ".1f"), ("worst seed, %", ".1f"),
           ("seeds ≤ 25%", ""), ("learns", ""), ("single runs learn", ""), ("ε spent", ".4g"),
           ("demo default", ""))


def demo_args() -> argparse.Namespace:
    """`privrl demo`'s parsed defaults (the compose setup's `privrl compare --create` has the
    same ones for the runs)."""
    return build_parser().parse_args(["demo"])


def jdp_config(counter: str, schedule: str, epsilon: float, episodes: int) -> RunConfig:
    """The demo's JDP run with this counter, schedule, budget and K."""
    args = demo_args()
    args.counter, args.schedule, args.epsilon, args.episodes = counter, schedule, epsilon, episodes
    return demo_configs(args, WorldSpec("riverswim", args.horizon).build())[1]


def is_default(config: RunConfig) -> bool:
    """Whether `config` is the demo's own JDP run."""
    args = demo_args()
    return config == demo_configs(args, WorldSpec("riverswim", args.horizon).build())[1]


def row(config: RunConfig, record: dict) -> tuple[list, list[float]]:
    """A case's table row and its seeds' % of uniform."""
    regret = np.asarray(record["regret"]["per_episode"])
    tail = regret[:, -(regret.shape[1] // 10):].mean(axis=1)
    pct = 100.0 * tail / record["regret"]["random_policy_per_episode"]
    plan, _ = counter_plan(config)
    ok = int((pct <= LEARNED).sum())
    return [config.counter, config.schedule, plan.releases if plan else None, config.episodes,
            config.epsilon, [float(pct.mean()), float(pct.std())], float(pct.max()),
            f"{ok}/{pct.size}", bool(pct.mean() <= LEARNED), ok >= RELIABLE * pct.size,
            record["ledger"]["epsilon"], is_default(config)], [round(float(p), 2) for p in pct]


def main(argv: list[str]) -> int:
    """Measure every case, print the table, save it (with each seed's figure) for the docs."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=40)
    p.add_argument("--seed", type=int, default=1000, help="the first seed")
    p.add_argument("--json", help="save the table here (for the docs)")
    args = p.parse_args(argv)
    args_demo = demo_args()
    world = WorldSpec("riverswim", args_demo.horizon)
    configs = [jdp_config(c, s, eps, k) for c, s, epsilons, k in CASES for eps in epsilons]
    seeds = list(range(args.seed, args.seed + args.seeds))
    records = run_many(configs, world, seeds, workers=1, show_progress=False)
    rows, per_seed = [], {}
    for config, record in zip(configs, records, strict=True):
        cells, pct = row(config, record)
        rows.append(cells)
        case = f"{config.counter} {config.schedule} K={config.episodes} eps={config.epsilon:g}"
        per_seed[case] = pct
        mean, std = cells[5]
        print(f"{cells[0]:9s} {cells[1]:14s} T={cells[2]:>6} K={cells[3]:>6} eps={cells[4]:<4g}"
              f" {mean:6.1f} ± {std:5.1f} %  worst {cells[6]:6.1f}  {cells[7]:>6}"
              f"  spent {cells[10]:.4g}{'  <- demo default' if cells[11] else ''}")
    demo_k = demo_args().episodes
    ok = [r for r in rows if r[3] == demo_k and r[8] and r[9]]
    best = min(ok, key=lambda r: (r[4], r[5][0]), default=None)  # then the least regret
    print(f"smallest budget at K = {demo_k} that learns on average and in {RELIABLE:.0%} of single"
          " runs: " + (f"eps = {best[4]:g} ({best[0]}, {best[1]})" if best else "none measured"))
    if args.json:
        save_table(args.json, COLUMNS, rows, seeds=seeds, world="riverswim H=20",
                   learned_at_most=LEARNED, reliable_share=RELIABLE, per_seed=per_seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
