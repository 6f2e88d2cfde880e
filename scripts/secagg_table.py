"""The secure-aggregation runs' table (docs/explanation/secure-aggregation.md) from the
summary.json files `privrl run` wrote: each run's world, algorithm, budget, cohort size, the
last 10% and last 1,000 episodes' regret as a share of a uniform policy's, its cost per episode
and what it spent.

    python scripts/secagg_table.py RUN_DIR ... --json docs/results/secagg/k50k.json
"""

from __future__ import annotations

from privrl.verdict import verdict_tail
from secagg_runs import SecaggRun, tabulate

COLUMNS = [("run", ""), ("world", ""), ("boundary", ""), ("eps", "g"), ("cohort B", ""),
           ("K", ","), ("seeds", "d"), ("last 10% / uniform", ".1%"),
           ("last 1,000 / uniform", ".1%"), ("ms / episode", ".2f"), ("eps spent", ".3f")]


def row(run: SecaggRun) -> list[object]:
    """One run's row."""
    return [run.name, run.world, run.privacy, run.epsilon, run.cohort, run.episodes, run.seeds,
            float(run.shares(verdict_tail(run.episodes)).mean()),
            float(run.shares(1000).mean()), run.ms_per_episode, run.spent]


if __name__ == "__main__":
    tabulate(__doc__, COLUMNS, row)
