"""Learners that carry over to bigger worlds: DP-UCBVI's public levers on a suite's worlds.

`python scripts/frontier/carryover.py --split evaluation --cases dp-ucbvi-step-jdp=1
dp-ucbvi-pooled-jdp=0.3 --levers off support support+pair --episodes 50000 --seeds 0 1 2
--worlds W ... --out docs/results/suites/carryover --json docs/results/suites/carryover.json`

Each case at its ε runs, for each lever setting, as `privrl frontier --suite` runs it
(`privrl.studies.suite_study.run_suite`: one resumable study per world, under
OUT/<case>/<lever>/), with the lever's public knobs set on every run (`StudySpec.knobs`; the
noise calibration is the case's own, δ the population rule's). The JSON is an ablation table:
per case and world, each setting's final regret (% of uniform, last 10% of episodes) with its
95% interval over the seeds (`privrl.verdict.interval`), then the median and worst over the
worlds. A world that declares no support (a Garnet MDP) runs the same configuration with the
support lever on or off, so it is not run again.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from privrl.algorithms.ucbvi.support import WORLD
from privrl.studies.frontier import StudySpec
from privrl.studies.suite_study import folder, run_suite
from privrl.verdict import interval
from privrl.worlds.suites import suite_named

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

# each lever setting's knobs (the same for every world; "world": the world's own support)
LEVERS: dict[str, dict[str, Any]] = {
    "off": {},
    "support": {"support": WORLD},
    "support+pair": {"support": WORLD, "threshold_per_pair": True},
    "support+union": {"support": WORLD, "unknown_union": True},
    "union": {"unknown_union": True},
}


def fallback(lever: str) -> str:
    """The setting whose run a world without a declared support shows for `lever`: the same
    knobs without the support (threshold_per_pair does nothing without one: "off")."""
    rest = {k: v for k, v in LEVERS[lever].items() if k not in ("support", "threshold_per_pair")}
    return next(name for name, knobs in LEVERS.items() if knobs == rest)


def case_epsilon(text: str) -> tuple[str, float]:
    """'dp-ucbvi-step-jdp=1' -> ('dp-ucbvi-step-jdp', 1.0)."""
    name, _, eps = text.partition("=")
    return name, float(eps)


def fractions(out: Path, world_label: str) -> list[float] | None:
    """The seeds' final % of uniform of the one run of a world's study (None: not run)."""
    path = out / folder_of(world_label) / "frontier.json"
    if not path.exists():
        return None
    runs = [r for r in json.loads(path.read_text())["runs"].values() if r["status"] == "done"]
    return runs[0]["fractions"] if runs else None


def folder_of(label: str) -> str:
    """The study folder of a world label (`suite_study.folder`)."""
    return next(folder(w) for w in SUITE.worlds if w.label == label)


SUITE = suite_named("tabular")


def cell(values: list[float] | None) -> str:
    """'mean [low, high]' (one seed: the mean alone; not run: —)."""
    if not values:
        return "—"
    mean, low, high = interval(values)
    return f"{mean:.1f}" if len(values) < 2 else f"{mean:.1f} [{low:.1f}, {high:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="evaluation", choices=("tuning", "evaluation"))
    parser.add_argument("--cases", nargs="+", type=case_epsilon, required=True)
    parser.add_argument("--levers", nargs="+", default=list(LEVERS), choices=list(LEVERS))
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--worlds", nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--table-only", action="store_true", help="no runs: the table of OUT")
    args = parser.parse_args()
    command = shlex.join(["python", *sys.argv])  # what `save_table` records too
    members = {w.label: w for w in SUITE.worlds_in(args.split)}
    supported = {label: members[label].build().support is not None for label in args.worlds}
    rows, summary = [], []
    for case, eps in args.cases:
        def runs_in(lever: str, world: str) -> str:
            """The setting whose run a world shows for `lever` (`fallback` without a support)."""
            return lever if "support" not in LEVERS[lever] or supported[world] else fallback(lever)

        for lever in [] if args.table_only else args.levers:
            worlds = [w for w in args.worlds if runs_in(lever, w) == lever]
            if worlds:
                spec = StudySpec(episodes=args.episodes, seeds=tuple(args.seeds), cases=(case,),
                                 presets=("practical",), epsilons=(eps,), ablation=False,
                                 knobs=tuple(LEVERS[lever].items()))
                run_suite(SUITE, args.split, spec, args.out / case / lever, command, only=worlds)
        per_lever = {lever: {w: fractions(args.out / case / runs_in(lever, w), w)
                             for w in args.worlds} for lever in args.levers}
        for w in args.worlds:
            rows.append([case, f"{eps:g}", w, *(cell(per_lever[lv][w]) for lv in args.levers)])
        means = {lv: [statistics.fmean(v) for v in per_lever[lv].values() if v]
                 for lv in args.levers}
        rows.append([case, f"{eps:g}", "**median / worst over the worlds run**",
                     *(f"{statistics.median_high(m):.1f} / {max(m):.1f} ({len(m)} worlds)"
                       if m else "—" for m in means.values())])
        summary.append({"case": case, "epsilon": eps, "by_world": per_lever})
    columns = [("case", ""), ("ε", ""), ("world", ""),
               *((f"{lv}: % of uniform", "") for lv in args.levers)]
    note = (f"Suite `tabular`, {args.split} worlds; K = {args.episodes:,}, seeds"
            f" {', '.join(map(str, args.seeds))}, practical preset, the case's default mechanism"
            " and δ (the population rule's). Each cell: the seeds' mean final regret as % of the"
            " uniform policy's (last 10% of episodes) and its 95% t interval"
            " (`privrl.verdict.interval`). support: the world's public transition support is the"
            " `support` knob (only its cells released, P~ restricted to it); support+pair: also"
            " `threshold_per_pair`; union: `unknown_union`. A world without a declared support"
            " (Garnet) runs the same configuration without the support: its cell is that run's.")
    save_table(args.json, columns, rows, note=note, levers={k: LEVERS[k] for k in args.levers},
               results=summary)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
