"""`privrl compare RESULTS [RESULTS ...]`: saved results side by side, with a stated test.

As rlberry's `compare_agents` does for trained agents: every configuration's seeds are
independent samples of one number (here each seed's mean exact regret over its last 10% of
episodes, the verdict's window, `privrl.verdict`), the pairs are tested with a named two-sample
test (Welch's t-test by default, or a permutation test), the p-values adjusted for the number of
pairs (Holm's step-down), and the decision printed with the test that made it. Which pairs: the
configurations of one file pairwise; of several files, the same configuration (label) across
them, else every configuration of one file against every one of another.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from privrl.client.cli_common import CliError
from privrl.verdict import TESTS, compare, interval, steady, verdict_tail, window_percents


@dataclass(frozen=True)
class Group:
    """One configuration of one results file: its seeds' last-10% mean regret."""

    name: str
    label: str
    source: int  # which RESULTS argument
    tails: np.ndarray  # per seed, mean regret of its last 10% of episodes
    random: float  # the uniformly random policy's regret per episode
    learned: str  # the verdict of the mean over seeds


def groups_of(path: Path, source: int) -> list[Group]:
    """Every configuration in a summary.json (or a directory holding one)."""
    from privrl.lab.experiments import load

    try:
        records = load(path)
    except (OSError, ValueError, KeyError) as exc:
        raise CliError(f"{path}: not a results file of privrl run / privrl demo ({exc})") from None
    out = []
    for record in records:
        reg = record["regret"]
        per = np.asarray(reg["per_episode"], dtype=np.float64)
        tail = verdict_tail(per.shape[1])
        random = float(reg["random_policy_per_episode"])
        learned = steady(window_percents(per.mean(axis=0), tail, random))
        out.append(Group(str(record["label"]), str(record["label"]), source,
                         per[:, per.shape[1] - tail:].mean(axis=1), random, learned))
    return out


def pairs_of(groups: list[Group], files: int) -> list[tuple[Group, Group]]:
    """One file: every pair of its configurations. Several: the same label across files, else
    every configuration against every one of another file."""
    if files == 1:
        return list(itertools.combinations(groups, 2))
    across = [(a, b) for a, b in itertools.combinations(groups, 2) if a.source != b.source]
    same = [(a, b) for a, b in across if a.label == b.label]
    return same or across


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment of `pvalues` (family-wise error at most the level)."""
    order = np.argsort(pvalues)
    adjusted = np.empty(len(pvalues))
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted.tolist()


def compare_results(paths: list[str], test: str, alpha: float) -> dict[str, Any]:
    """Load, test and print; the comparisons as JSON-ready rows."""
    groups = [g for i, p in enumerate(paths) for g in groups_of(Path(p), i)]
    if len(paths) > 1:  # name each configuration by its file too
        groups = [Group(f"{g.label} [{Path(paths[g.source]).name or paths[g.source]}#"
                        f"{g.source + 1}]", g.label, g.source, g.tails, g.random, g.learned)
                  for g in groups]
    pairs = pairs_of(groups, len(paths))
    if not pairs:
        raise CliError("nothing to compare: give one results file with several configurations,"
                       " or several results files")
    try:
        rows = [compare(a.tails, b.tails, test) | {"a": a.name, "b": b.name} for a, b in pairs]
    except ValueError as exc:
        raise CliError(str(exc)) from None
    for row, adj in zip(rows, holm([r["p_value"] for r in rows]), strict=True):
        row["p_adjusted"] = adj
        row["different"] = adj <= alpha
    width = max(len(g.name) for g in groups) + 2
    print("each seed's mean regret over its last 10% of episodes; % of random: of a uniformly"
          " random policy's regret, mean over the seeds [95% Student-t interval]")
    print(f"{'configuration':<{width}} {'seeds':>5} {'regret/ep':>10} {'% of random':>22}"
          f" {'learned':>9}")
    for g in groups:
        mean, lo, hi = interval(100 * g.tails / g.random)
        band = f"{mean:.1f}%" + ("" if np.isnan(lo) else f" [{lo:.1f}, {hi:.1f}]")
        print(f"{g.name:<{width}} {g.tails.size:>5} {g.tails.mean():>10.4f} {band:>22}"
              f" {g.learned:>9}")
    print(f"test: {TESTS[test]}; p-values adjusted by Holm's step-down method over"
          f" {len(rows)} comparison(s), alpha = {alpha:g}")
    for row in rows:
        decision = "different" if row["different"] else "not shown different"
        print(f"  {row['a']} vs {row['b']}: difference {row['difference']:+.4f} regret/ep,"
              f" statistic {row['statistic']:.3g}, p = {row['p_value']:.3g}, adjusted"
              f" {row['p_adjusted']:.3g}: {decision}")
    if any(not r["different"] for r in rows):
        print("not shown different: the seeds do not tell them apart at this level, which is"
              " not evidence that they are equal (more seeds give the test more power)")
    return {"test": test, "alpha": alpha, "comparisons": rows}
