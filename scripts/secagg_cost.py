"""What secure aggregation costs in process, per episode, against LDP at the same budget
(docs/explanation/secure-aggregation.md, "Cost per episode"): the three runs of the figures
(per-step DP-UCBVI at eps = 3, pooled at eps = 1, UCRL-VTR at eps = 10; cohorts of 1,000; the
run's own delta, Gaussian), each run with `--privacy secagg` (every round of every cohort),
with `--privacy secagg` and `PRIVRL_SECAGG_ROUNDS=ideal` (each cohort's sum without its
rounds) and with `--privacy ldp`, in this one process, one after the other, `--repeats` times,
one seed each; the median of their wall times per episode.

    python scripts/secagg_cost.py --episodes 5000 --json docs/results/secagg/cost.json

A benchmark, not a test: the numbers depend on the machine and its load (recorded).
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from privrl.client.cli import build_parser
from privrl.client.cli_common import world_from_args
from privrl.client.lab_cli import sweep_configs
from privrl.lab.experiments import run_exact
from privrl.trust.secagg.boundary import ROUNDS_ENV
from results_table import save_table

ROWS = (("dp-ucbvi", (), 3.0), ("dp-ucbvi", ("--knob", "pooled=true"), 1.0),
        ("ucrl-vtr", (), 10.0))
COLUMNS = [("run", ""), ("world", ""), ("eps", "g"), ("K", ","), ("repeats", "d"),
           ("secagg ms / episode", ".2f"), ("ideal rounds ms / episode", ".2f"),
           ("LDP ms / episode", ".2f"), ("secagg / LDP", ".1f"), ("ideal / LDP", ".2f"),
           ("secagg / ideal", ".0f")]
# each variant: its privacy and how in-process cohorts are summed
VARIANTS = {"secagg": ("secagg", "protocol"), "ideal": ("secagg", "ideal"), "ldp": ("ldp", None)}


def ms_per_episode(algo: str, extra: tuple[str, ...], epsilon: float, variant: str,
                   episodes: int, cohort: int) -> tuple[str, float]:
    """One seed's run of the configuration in this process: its world and wall ms per
    episode."""
    privacy, rounds = VARIANTS[variant]
    if rounds is None:
        os.environ.pop(ROUNDS_ENV, None)
    else:
        os.environ[ROUNDS_ENV] = rounds
    argv = ["run", "--algo", algo, *extra, "--privacy", privacy, "--epsilon", str(epsilon),
            "--mechanism", "gaussian", "--episodes", str(episodes), "--seeds", "1"]
    if privacy == "secagg":
        argv += ["--schedule", f"batch:{cohort}"]
    args = build_parser().parse_args(argv)
    world = world_from_args(args)
    (config,) = sweep_configs(args, world.build())
    record, _ = run_exact(config, world, [0])
    return record["world"]["name"], record["ms_per_episode"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--cohort", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    rows = []
    for algo, extra, eps in ROWS:
        times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
        world = ""
        for _ in range(args.repeats):
            for variant in times:
                world, ms = ms_per_episode(algo, extra, eps, variant, args.episodes,
                                           args.cohort)
                times[variant].append(ms)
        sec, ideal, ldp = (statistics.median(times[v]) for v in VARIANTS)
        name = algo + (" pooled" if extra else "")
        rows.append([name, world, eps, args.episodes, args.repeats, sec, ideal, ldp, sec / ldp,
                     ideal / ldp, sec / ideal])
        print(rows[-1], flush=True)
    save_table(args.json, COLUMNS, rows)


if __name__ == "__main__":
    main()
