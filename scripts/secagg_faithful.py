"""What each preset of every family with a secure-aggregation mode plans to spend across that
boundary (docs/explanation/secure-aggregation.md, "Which algorithms run across it"): for each
budget, the epsilon its whole release plan would spend over K episodes (`privrl.budget`, no run)
as a share of the budget. Creating the run admits it up to 1 and refuses it above, stating that
true spend (checked here); a dash: refused because a user's noise share would be beyond exact
integer sampling.

    python scripts/secagg_faithful.py --json docs/results/secagg/faithful.json
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from privrl.algorithms import registry
from privrl.budget import OverspendingPlan, check_budget, planned_totals
from privrl.config import RunConfig, population_delta
from privrl.lab.experiments import WorldSpec
from privrl.trust.secagg.spec import default_cohort
from privrl.worlds.model_spec import model_spec_of
from results_table import save_table

BOUNDARY = "secagg"
EPSILONS = (0.5, 1.0, 3.0, 10.0, 100.0, 1e3, 1e4)
COLUMNS = [("algorithm", ""), ("preset", ""), *((f"eps {eps:g}", ".2g") for eps in EPSILONS)]
NOTE = ("Each cell: the epsilon the run's release plan would spend over K = {k:,} episodes"
        " (Gaussian, delta = {delta:g}, cohorts of {cohort}) as a share of its budget. Up to 1"
        " the run is created; above 1 it is refused at creation with that true spend; a dash:"
        " refused at creation, a user's Skellam noise share would be beyond exact integer"
        " sampling.")


def config(algo: str, preset: str, epsilon: float, episodes: int) -> RunConfig:
    """A run of `algo` across secure aggregation on its own world: Gaussian, the run's own delta
    (the population rule's), the default cohorts (B = K / 50 within [100, 1000])."""
    mdp = WorldSpec(registry.get(algo).default_world, None, {}).build()
    return RunConfig(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                     model=model_spec_of(mdp), episodes=episodes, privacy=BOUNDARY,
                     epsilon=epsilon, delta=population_delta(episodes), mechanism="gaussian",
                     preset=preset)


def share(cfg: RunConfig) -> float | None:
    """What `cfg` plans to spend as a share of its budget (None: no calibration exists)."""
    try:
        spend = planned_totals(cfg).epsilon
    except ValueError as exc:  # a noise share past exact integer sampling
        if "beyond exact integer sampling" not in str(exc):
            raise
        return None
    try:
        check_budget(cfg)
        assert spend <= cfg.epsilon * (1 + 1e-9), cfg
    except OverspendingPlan as exc:  # refused, stating the plan's true spend
        assert f"would spend epsilon = {spend:.6g} " in str(exc), exc
    return spend / cfg.epsilon


def rows(episodes: int) -> Iterator[list[object]]:
    """Every family that runs across the boundary x its presets, a cell per budget."""
    for algo in registry.names():
        plugin = registry.get(algo)
        if BOUNDARY in plugin.boundaries():
            for preset in plugin.presets:
                yield [algo, preset,
                       *(share(config(algo, preset, eps, episodes)) for eps in EPSILONS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50_000, help="K of every run")
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    k = args.episodes
    note = NOTE.format(k=k, delta=population_delta(k), cohort=default_cohort(k))
    save_table(args.json, COLUMNS, list(rows(k)), note=note)


if __name__ == "__main__":
    main()
