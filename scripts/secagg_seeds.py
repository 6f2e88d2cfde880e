"""The secure-aggregation learning figures over seeds (docs/explanation/secure-aggregation.md,
"The figures at five seeds"): for each run folder `privrl run --out` wrote, the last 10% of the
episodes' regret as a share of a uniform policy's, its mean over the seeds with a Student-t
interval and its worst seed, the verdict of the project's one rule (`privrl.verdict`) on the
mean regret, what the run spent and its cost per episode and seed.

    python scripts/secagg_seeds.py DIR ... --json docs/results/secagg/k50k-seeds.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from privrl.verdict import LEVEL, interval, judge, verdict_tail
from results_table import save_table

COLUMNS = [("run", ""), ("world", ""), ("eps", "g"), ("delta", "g"), ("cohort B", ""),
           ("K", ","), ("seeds", "d"), ("last 10% / uniform", ".1%"),
           (f"{LEVEL:.0%} t-interval", ""), ("worst seed", ".1%"), ("learned", ""),
           ("eps spent", ".3f"), ("ms / episode / seed", ".2f")]


def row(folder: Path) -> list[object]:
    """One run's row (the first result of its summary.json)."""
    result = json.loads((folder / "summary.json").read_text())["results"][0]
    cfg, regret = result["config"], result["regret"]
    per = np.asarray(regret["per_episode"], dtype=float)  # (seeds, K)
    uniform = float(regret["random_policy_per_episode"])
    seeds, k = per.shape
    tail = verdict_tail(k)
    shares = per[:, -tail:].mean(axis=1) / uniform
    mean, low, high = interval(shares)
    pooled = bool((cfg.get("knobs") or {}).get("pooled"))
    return [cfg["algo"] + (" pooled" if pooled else ""), result["world"]["name"],
            cfg["epsilon"], cfg["delta"], cfg["schedule"].split(":")[1], k, seeds, mean,
            f"[{low:.1%}, {high:.1%}]" if seeds > 1 else None, float(shares.max()),
            judge(per.mean(axis=0), uniform).learned, result["ledger"]["epsilon"],
            result["ms_per_episode"] / seeds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders `privrl run --out` wrote")
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    save_table(args.json, COLUMNS, [row(folder) for folder in args.runs])


if __name__ == "__main__":
    main()
