"""The secure-aggregation runs' table (docs/explanation/secure-aggregation.md) from the
summary.json files `privrl run` wrote: each run's world, algorithm, budget, cohort size, the
last 10% and last 1,000 episodes' regret as a share of a uniform policy's, its cost per episode
and what it spent.

    python scripts/secagg_table.py RUN_DIR ... --json docs/results/secagg/k50k.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from results_table import save_table

COLUMNS = [("run", ""), ("world", ""), ("boundary", ""), ("eps", "g"), ("cohort B", ""),
           ("K", ","), ("seeds", "d"), ("last 10% / uniform", ".1%"),
           ("last 1,000 / uniform", ".1%"), ("ms / episode", ".2f"), ("eps spent", ".3f")]


def row(folder: Path) -> list[object]:
    """One run's row (the first result of its summary.json)."""
    result = json.loads((folder / "summary.json").read_text())["results"][0]
    cfg, regret = result["config"], result["regret"]
    per = np.asarray(regret["per_episode"], dtype=float)
    uniform = regret["random_policy_per_episode"]
    k = per.shape[1]
    pooled = bool((cfg.get("knobs") or {}).get("pooled"))
    name = cfg["algo"] + (" pooled" if pooled else "")
    cohort = cfg["schedule"].split(":")[1] if cfg["privacy"] == "secagg" else "—"
    return [name, result["world"]["name"], cfg["privacy"], cfg["epsilon"], cohort, k,
            per.shape[0], float(per[:, -k // 10:].mean() / uniform),
            float(per[:, -1000:].mean() / uniform), result["ms_per_episode"],
            result["ledger"]["epsilon"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders `privrl run --out` wrote")
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    save_table(args.json, COLUMNS, [row(folder) for folder in args.runs])


if __name__ == "__main__":
    main()
