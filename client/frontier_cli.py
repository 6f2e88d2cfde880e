"""`privrl frontier`: the privacy–utility frontier of every learning family, and the ablation of
the levers by which the practical presets depart from the faithful ones."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from privrl.client.cli_common import (
    CliError,
    add_executor_options,
    epsilon_value,
    executor_from_args,
    positive_int,
)
from privrl.studies.cases import ABLATIONS, CASES

if TYPE_CHECKING:
    from privrl.studies.frontier import StudySpec

OUTPUTS = ("frontier.json", "frontier.png")


def cmd_frontier(args: argparse.Namespace) -> int:
    """privrl frontier: run (or continue) the study in --out, then draw its figure."""
    from privrl.lab.plots import plot_frontier_panels
    from privrl.studies.frontier import Study, StudySpec, panels, run_study, threshold_table

    if args.list:
        return list_cases()
    known = [c.name for c in CASES]
    unknown = [c for c in args.cases if c not in known]
    if unknown:
        raise CliError(f"unknown case(s) {', '.join(unknown)}: use {', '.join(known)}")
    if args.seeds < 2:
        raise CliError("--seeds: at least 2 seeds (an interval over seeds needs two)")
    spec = StudySpec(episodes=args.episodes,
                     seeds=tuple(range(args.seed, args.seed + args.seeds)), delta=args.delta,
                     cases=tuple(args.cases), presets=tuple(args.presets),
                     grid_size=args.grid_size, epsilons=tuple(args.epsilon or ()),
                     ablation=not args.no_ablation)
    out = Path(args.out)
    if args.suite:
        return run_suite_cli(args, spec, out)
    path = out / OUTPUTS[0]
    if args.force and path.exists():
        path.unlink()
    study = Study(path, spec, shlex.join(["privrl", *sys.argv[1:]]))
    try:
        resumed = study.resume()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if resumed:
        print(f"continuing {path}: {resumed} run(s) already there", file=sys.stderr)
    data = run_study(study, workers=args.workers, quiet=args.quiet,
                     executor=executor_from_args(args))
    png = plot_frontier_panels(panels(data), out / OUTPUTS[1], data["learns_below_percent"])
    print_thresholds(threshold_table(data))
    print(path)
    print(png)
    return 0


def run_suite_cli(args: argparse.Namespace, spec: StudySpec, out: Path) -> int:
    """--suite: the cases on every world of the suite's split; print and write the summary."""
    from privrl.studies.suite_study import SUMMARY, run_suite
    from privrl.worlds.suites import suite_named
    from privrl.worlds.tabular import WorldError

    try:
        suite = suite_named(args.suite)
    except WorldError as exc:
        raise CliError(str(exc)) from None
    if args.force and out.exists():
        for path in out.glob("*/frontier.json"):
            path.unlink()
    command = shlex.join(["privrl", *sys.argv[1:]])
    try:
        summary = run_suite(suite, args.split, spec, out, command, workers=args.workers,
                            quiet=args.quiet, note=lambda text: print(text, file=sys.stderr),
                            only=args.worlds or ())
    except ValueError as exc:
        raise CliError(str(exc)) from None
    for s in summary["summary"]:
        for label, t in s["by_world"].items():
            pct = ", ".join(f"ε {e}: {p[0]:.1f}%" for e, p in t["percent"].items())
            eps = "beyond the grid" if t["epsilon"] is None else f"{t['epsilon']:g}"
            print(f"{s['case']:<24} {s['preset']:<10} {label:<44} smallest learning ε {eps};"
                  f" {pct}")
        med, worst = s["median_epsilon"], s["worst_epsilon"]
        print(f"{s['case']:<24} {s['preset']:<10} median / worst over {s['worlds']} worlds:"
              f" {'beyond' if med is None else f'{med:g}'} /"
              f" {'beyond' if worst is None else f'{worst:g}'}")
    print(out / SUMMARY)
    return 0


def print_thresholds(table: dict) -> None:
    """The threshold table as plain text."""
    for row in table["rows"]:
        case, preset, grid, eps, interval, pct = row[:6]
        target, hit = row[-2:]
        at = "" if pct is None else f" ({pct[0]:.1f}% ± {pct[1]:.1f} at it)"
        goal = "" if hit is None else f"; at the target ε {target:g}: {hit[0]:.1f}% ± {hit[1]:.1f}"
        print(f"{case:<24} {preset:<10} smallest learning ε {eps:<10} {interval}{at}{goal}")


def list_cases() -> int:
    """Every case with its default grid, and every ablation's levers."""
    from privrl.studies.cases import case_named

    for case in CASES:
        print(f"{case.name:<24} {case.title:<28} target ε {case.target:g}; ε grid {case.grid(8)}")
    for ablation in ABLATIONS:
        algo = case_named(ablation.case).algo
        print(f"ablation {ablation.case} at ε = {ablation.epsilon:g}:")
        for lever in ablation.levers:
            missing = lever.missing(algo)
            state = f"not available ({'; '.join(missing)})" if missing else "available"
            print(f"  {lever.kind:<12} {lever.label:<40} {lever.overrides():<48} {state}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `frontier`."""
    p = sub.add_parser(
        "frontier", help="the privacy–utility frontier of every family, and the levers' ablation",
        description="Run every case (algorithm, privacy mode, knobs) under the faithful and the"
        " practical presets over its ε grid, seeds as replicas, in process and in parallel;"
        " find each case's smallest ε that learns (last 10% of episodes ≤ 25% of the uniform"
        " policy's regret) with an interval over the seeds; run the ablation of the levers;"
        " write --out/frontier.json and --out/frontier.png. A re-run with the same options"
        " continues an interrupted study; with other --cases (or, both grids explicit, other"
        " --epsilon values) it adds them to the study.")
    p.add_argument("--cases", nargs="+", default=[c.name for c in CASES], metavar="CASE",
                   help="the cases to run (default: all; --list names them)")
    p.add_argument("--presets", nargs="+", choices=["faithful", "practical"],
                   default=["faithful", "practical"], help="the presets (default: both)")
    p.add_argument("--epsilon", type=epsilon_value, nargs="+", default=None,
                   help="one ε grid for every case (default: each case's own range,"
                   " log-spaced, and its target ε)")
    p.add_argument("--grid-size", type=positive_int, default=8,
                   help="ε values per case over its own range (default: 8)")
    p.add_argument("--episodes", type=positive_int, default=50_000, help="K (default: 50,000)")
    p.add_argument("--seeds", type=positive_int, default=10,
                   help="seeds per run (default: 10; a threshold is decided by its interval)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default: 0)")
    p.add_argument("--delta", type=float, default=None,
                   help="δ of the Gaussian rows (default: the runs' default, the largest of"
                   " 1e-n, 2e-n, 5e-n at most 1/(10 K): 2e-6 at K = 50,000)")
    p.add_argument("--no-ablation", action="store_true", help="skip the levers' ablation")
    p.add_argument("--workers", type=positive_int, default=2,
                   help="parallel processes (default: 2); with --executor ray, the CPUs of the"
                   " local Ray instance it starts")
    add_executor_options(p)
    p.add_argument("--out", default="results/frontier",
                   help="where frontier.json and frontier.png go (default: results/frontier)")
    p.add_argument("--force", action="store_true",
                   help="start over: discard the study already in --out")
    p.add_argument("--quiet", action="store_true", help="no per-run progress lines")
    p.add_argument("--suite", default=None, metavar="SUITE",
                   help="run the cases on every world of this suite's --split instead of each"
                   " algorithm's default world, a study per world under --out, and report each"
                   " world's threshold and the suite's median and worst (`privrl worlds"
                   " --suite` lists the suites; default: none)")
    p.add_argument("--split", choices=["evaluation", "tuning"], default="evaluation",
                   help="the suite's worlds to run (default: evaluation)")
    p.add_argument("--worlds", nargs="+", default=None, metavar="LABEL",
                   help="with --suite: only these worlds of the split, by the label `privrl"
                   " worlds --suite` prints (default: all; the summary names the others as not"
                   " run)")
    p.add_argument("--list", action="store_true",
                   help="list the cases and the ablations' levers (available or not) and exit")
    p.set_defaults(handler=cmd_frontier)
