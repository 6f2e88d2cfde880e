"""The secure-aggregation learning figures over seeds (docs/explanation/secure-aggregation.md,
"The figures at five seeds"): for each run folder `privrl run --out` wrote, the last 10% of the
episodes' regret as a share of a uniform policy's, its mean over the seeds with a Student-t
interval and its worst seed, the verdict of the project's one rule (`privrl.verdict`) on the
mean regret, what the run spent and its cost per episode and seed.

    python scripts/secagg_seeds.py DIR ... --json docs/results/secagg/k50k-seeds.json
"""

from __future__ import annotations

from privrl.verdict import LEVEL, interval, judge, verdict_tail
from secagg_runs import SecaggRun, tabulate

COLUMNS = [("run", ""), ("world", ""), ("boundary", ""), ("eps", "g"), ("delta", "g"),
           ("cohort B", ""), ("K", ","), ("seeds", "d"), ("rounds", ""),
           ("last 10% / uniform", ".1%"), (f"{LEVEL:.0%} t-interval", ""), ("worst seed", ".1%"),
           ("learned", ""), ("eps spent", ".3f"), ("ms / episode / seed", ".2f")]


def row(run: SecaggRun) -> list[object]:
    """One run's row."""
    shares = run.shares(verdict_tail(run.episodes))
    mean, low, high = interval(shares, floor=0.0)
    return [run.name, run.world, run.privacy, run.epsilon, run.delta, run.cohort, run.episodes,
            run.seeds, run.rounds, mean, f"[{low:.1%}, {high:.1%}]" if run.seeds > 1 else None,
            float(shares.max()), judge(run.regret.mean(axis=0), run.uniform).learned, run.spent,
            run.ms_per_episode / run.seeds]


if __name__ == "__main__":
    tabulate(__doc__, COLUMNS, row)
