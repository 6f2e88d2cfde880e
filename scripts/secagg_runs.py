"""The folders `privrl run --out` wrote for the secure-aggregation figures, read once, and the
command line that tabulates them: scripts/secagg_seeds.py and scripts/secagg_table.py each give
only their columns and a run's row."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from privrl import trust
from privrl.lab.experiments import load
from privrl.trust.secagg.boundary import ROUNDS_ENV
from privrl.trust.secagg.spec import default_cohort
from privrl.worlds.suites import SuiteWorld
from results_table import save_table


@dataclass(frozen=True)
class SecaggRun:
    """The first result of a run folder's summary.json."""

    name: str  # the algorithm, "pooled" after it when it pools its statistics over h
    world: str  # its label: name and parameters
    privacy: str
    epsilon: float  # inf for a non-private run
    delta: float
    cohort: str  # B of a secure-aggregation run (its schedule batch:B), else a dash
    regret: np.ndarray  # (seeds, K) exact per-episode regret
    uniform: float  # a uniformly random policy's regret per episode
    ms_per_episode: float  # over all its seeds together
    spent: float  # the epsilon its ledger spent per user
    rounds: str  # "protocol": its cohorts ran every round; "ideal": their sums without; "—"

    @property
    def seeds(self) -> int:
        return self.regret.shape[0]

    @property
    def episodes(self) -> int:
        return self.regret.shape[1]

    def shares(self, last: int) -> np.ndarray:
        """Each seed's mean regret over its `last` episodes as a share of the uniform policy's."""
        return self.regret[:, -last:].mean(axis=1) / self.uniform


def read_run(folder: Path) -> SecaggRun:
    """The run `privrl run --out FOLDER` saved (its first configuration)."""
    result = load(folder)[0]
    cfg, regret, world = result["config"], result["regret"], result["world"]
    pooled = bool((cfg.get("knobs") or {}).get("pooled"))
    schedule = cfg["schedule"] or f"batch:{default_cohort(cfg['episodes'])}"  # B if none given
    cohort = schedule.split(":")[1] if cfg["privacy"] == "secagg" else "—"
    return SecaggRun(name=cfg["algo"] + (" pooled" if pooled else ""),
                     world=SuiteWorld(world["name"], world.get("params") or {},
                                     world.get("horizon")).label, privacy=cfg["privacy"],
                     epsilon=(math.inf if cfg["privacy"] == trust.baseline().name
                              else cfg["epsilon"]), delta=cfg["delta"], cohort=cohort,
                     regret=np.asarray(regret["per_episode"], dtype=float),
                     uniform=float(regret["random_policy_per_episode"]),
                     ms_per_episode=result["ms_per_episode"], spent=result["ledger"]["epsilon"],
                     rounds=(rounds_of(result["ledger"]["charges"]) if cfg["privacy"] == "secagg"
                             else "—"))


def rounds_of(charges: Sequence[dict[str, object]]) -> str:
    """How a run's cohorts were summed, as its ledger says: "ideal" when its cohorts' entries
    say the rounds were skipped (`PRIVRL_SECAGG_ROUNDS=ideal`), else "protocol"."""
    ideal = any(c["mechanism"] == "secagg:cohort" and f"{ROUNDS_ENV}=ideal" in str(c["note"])
                for c in charges)
    return "ideal" if ideal else "protocol"


def tabulate(doc: str, columns: Sequence[tuple[str, str]],
             row: Callable[[SecaggRun], list[object]]) -> None:
    """`python scripts/NAME.py DIR ... --json OUT`: one row a run folder, saved as a table."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders `privrl run --out` wrote")
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    save_table(args.json, columns, [row(read_run(folder)) for folder in args.runs])
