"""Choose the practical presets' counters, schedules and DP-UCBVI's learner on tuning seeds.

`python scripts/frontier/practical_choice.py --first-seed 5 --seeds 5 --workers 2 --json OUT`

Each candidate is the practical preset with some RunConfig fields overridden (the counter, its
bands, the release schedule) or some knobs (DP-UCBVI's radius and unknown-cell threshold), on
seeds the frontier never uses, run as `privrl frontier` runs a row (the case's default world,
K = 50,000, the algorithm's default mechanism with integer noise and the runs' default delta,
2e-6; measured so far at delta = 1e-5), at the ablation's epsilon of its case. The
table gives the last 10% of episodes as % of the uniform policy's regret, per seed; the
practical preset takes the lowest mean of each case (docs/results/frontier.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from privrl.lab.executors import LocalExecutor, Task
from privrl.provenance import save_measured
from privrl.studies.cases import case_named
from privrl.studies.frontier import Planner, StudySpec, precheck, random_regret, run_or_error
from privrl.studies.threshold import final_fractions

COUNTERS = {"matrix": {"counter": "matrix", "counter_bands": 256},
            "smoothed": {"counter": "smoothed"}}
LAPLACE = {"mechanism": "laplace", "delta": 0.0}  # pure epsilon


Candidate = tuple[str, float, str, dict[str, Any], dict[str, Any]]


def candidate(case: str, epsilon: float, counter: str, schedule: str,
              laplace: bool = False) -> Candidate:
    """(case, epsilon, label, RunConfig fields, knobs) of the practical preset on this counter
    (the matrix one with 256 bands) and schedule, under the Laplace mechanism if `laplace`."""
    label = ("Laplace: " if laplace else "") + ("matrix 256" if counter == "matrix" else counter)
    fields = {**(LAPLACE if laplace else {}), **COUNTERS[counter], "schedule": schedule}
    return case, epsilon, f"{label}, {schedule}", fields, {}


def ucbvi_learner(case: str, epsilon: float, radius: float, unknown: float) -> Candidate:
    """DP-UCBVI's practical preset (its own counter and schedule) with the radius E = `radius`
    × the release std and cells unvisited while N~(s,a) < `unknown` × that std."""
    return (case, epsilon, f"learner: radius {radius:g}, unknown below {unknown:g}", {},
            {"radius_scale": radius, "unknown_below": unknown})


# DP-UCBVI's learner: the knobs as they were (1, 1), then the candidates
UCBVI_LEARNERS = ((1.0, 1.0), (0.5, 1.0), (1.0, 2.0), (0.5, 2.0), (0.25, 2.0), (0.5, 3.0))

# the preset as it was, then the candidates
CANDIDATES: tuple[Candidate, ...] = (
    candidate("dp-ucbvi-step-jdp", 5.0, "smoothed", "every"),
    candidate("dp-ucbvi-step-jdp", 5.0, "smoothed", "geometric:1.1"),
    candidate("dp-ucbvi-step-jdp", 5.0, "matrix", "geometric:1.1"),
    candidate("dp-ucbvi-step-jdp", 1.9, "smoothed", "every"),
    candidate("dp-ucbvi-step-jdp", 1.9, "matrix", "geometric:1.1"),
    candidate("dp-ucbvi-step-jdp", 0.72, "matrix", "geometric:1.1"),
    candidate("dp-ucbvi-step-jdp", 0.72, "matrix", "geometric:1.3"),
    candidate("dp-ucbvi-step-jdp", 0.72, "matrix", "geometric:2"),
    candidate("dp-ucbvi-pooled-jdp", 0.1, "smoothed", "every"),
    candidate("dp-ucbvi-pooled-jdp", 0.1, "matrix", "geometric:1.1"),
    candidate("dp-ucbvi-pooled-jdp", 0.1, "matrix", "batch:200"),
    candidate("dp-ucbvi-pooled-jdp", 0.1, "matrix", "geometric:1.3"),
    candidate("dp-ucbvi-pooled-jdp", 0.1, "matrix", "geometric:2"),
    candidate("dp-ucbvi-step-jdp", 5.0, "smoothed", "every", laplace=True),
    candidate("dp-ucbvi-step-jdp", 5.0, "smoothed", "geometric:1.1", laplace=True),
    candidate("dp-ucbvi-pooled-jdp", 0.5, "smoothed", "every", laplace=True),
    candidate("dp-ucbvi-pooled-jdp", 0.5, "smoothed", "geometric:1.1", laplace=True),
    candidate("ucrl-vtr-jdp", 0.72, "smoothed", "batch:10"),
    candidate("ucrl-vtr-jdp", 0.72, "matrix", "batch:10"),
    candidate("ucrl-vtr-jdp", 0.72, "smoothed", "geometric:1.1"),
    candidate("ucrl-vtr-jdp", 0.72, "matrix", "geometric:1.1"),
    candidate("ucrl-vtr-jdp", 10.0, "smoothed", "batch:10"),
    candidate("ucrl-vtr-jdp", 10.0, "matrix", "batch:10"),
    candidate("ucrl-vtr-jdp", 10.0, "matrix", "geometric:1.1"),
    candidate("ucrl-vtr-jdp", 5.2, "smoothed", "batch:10"),
    candidate("ucrl-vtr-jdp", 5.2, "matrix", "geometric:1.1"),
    candidate("linopt-vi-jdp", 0.72, "smoothed", "batch:10"),
    candidate("linopt-vi-jdp", 0.72, "matrix", "batch:10"),
    candidate("linopt-vi-jdp", 0.72, "matrix", "geometric:1.1"),
    candidate("linopt-vi-jdp", 10.0, "smoothed", "batch:10"),
    candidate("linopt-vi-jdp", 10.0, "matrix", "batch:10"),
    candidate("linopt-po-jdp", 0.72, "smoothed", "batch:10"),
    candidate("linopt-po-jdp", 0.72, "matrix", "batch:10"),
    candidate("linopt-po-jdp", 10.0, "smoothed", "batch:10"),
    candidate("linopt-po-jdp", 10.0, "matrix", "batch:10"),
    candidate("lsvi-ucb-batched-jdp", 1.0, "smoothed", "every"),
    candidate("lsvi-ucb-batched-jdp", 1.0, "matrix", "every"),
    candidate("lsvi-ucb-batched-jdp", 10.0, "smoothed", "every"),
    candidate("lsvi-ucb-batched-jdp", 10.0, "matrix", "every"),
    candidate("lsvi-ucb-switching-jdp", 5.2, "smoothed", "batch:50"),
    candidate("lsvi-ucb-switching-jdp", 5.2, "matrix", "batch:50"),
    candidate("lsvi-ucb-switching-jdp", 100.0, "smoothed", "batch:50"),
    candidate("lsvi-ucb-switching-jdp", 100.0, "matrix", "batch:50"),
    *(ucbvi_learner(case, eps, radius, unknown)
      for case, eps in (("dp-ucbvi-step-jdp", 0.72), ("dp-ucbvi-step-jdp", 1.0),
                        ("dp-ucbvi-step-jdp", 5.0), ("dp-ucbvi-pooled-jdp", 0.1),
                        ("dp-ucbvi-pooled-jdp", 0.19), ("dp-ucbvi-pooled-ldp", 31.0))
      for radius, unknown in UCBVI_LEARNERS),
)


def main() -> None:
    """Run every candidate on the tuning seeds; print and save a row per candidate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-seed", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", nargs="*", help="only these cases")
    parser.add_argument("--matching", default="", help="only candidates whose label has this")
    parser.add_argument("--epsilon", type=float, nargs="*", help="only candidates at these ε")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    seeds = tuple(range(args.first_seed, args.first_seed + args.seeds))
    planner = Planner(StudySpec(episodes=args.episodes, seeds=seeds))
    chosen = [c for c in CANDIDATES
              if (not args.cases or c[0] in args.cases) and args.matching in c[2]
              and (not args.epsilon or c[1] in args.epsilon)]
    tasks, rows = [], {}
    for i, (name, eps, label, fields, knobs) in enumerate(chosen):
        config, world = planner.config(case_named(name), "practical", eps, fields, knobs)
        reason = precheck(config)
        if reason:
            sys.exit(f"{name} {label}: {reason}")
        tasks.append(Task((i, 0), config, world, seeds))
    levels = {n: random_regret(m) for n, m in planner.mdps.items()}
    for key, result in LocalExecutor(args.workers).run(run_or_error, tasks, lambda k, n: None):
        name, eps, label, fields, knobs = chosen[key[0]]
        if isinstance(result, str):
            sys.exit(f"{name} {label}: {result}")
        task = tasks[key[0]]
        fractions = final_fractions(result.regret, levels[task.world.name])
        rows[key[0]] = {"case": name, "epsilon": eps, "candidate": label, "fields": fields,
                        "knobs": knobs, "fractions": fractions,
                        "mean": float(np.mean(fractions)), "sd": float(np.std(fractions)),
                        "ledger_epsilon": result.ledger["epsilon"], "seconds": result.seconds}
        print(f"{name} ε={eps:g} {label}: {np.mean(fractions):.1f} ± {np.std(fractions):.1f}"
              f" ({', '.join(f'{f:.0f}' for f in fractions)}) in {result.seconds:.0f} s",
              flush=True)
    ordered = [rows[i] for i in sorted(rows)]  # the candidates' order, not the finishing one
    save_measured(args.json, {"seeds": list(seeds), "episodes": args.episodes,
                              **table(ordered), "runs": ordered})


def table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The docs' table of the runs (scripts/results_table.py's format): a row per candidate,
    the lowest mean of each (case, ε, mechanism, knobs or not) marked."""
    def group(r: dict[str, Any]) -> tuple[str, float, str, bool]:
        return (r["case"], r["epsilon"], r["fields"].get("mechanism", "gaussian"),
                bool(r.get("knobs")))

    best: dict[tuple[str, float, str, bool], float] = {}
    for r in runs:
        best[group(r)] = min(best.get(group(r), r["mean"]), r["mean"])
    columns = (("case", ""), ("ε", "g"), ("candidate", ""), ("per seed", ""),
               ("mean ± sd", ".1f"), ("lowest", ""), ("seconds", ".0f"))
    rows = [[r["case"], r["epsilon"], r["candidate"],
             ", ".join(f"{f:.0f}" for f in r["fractions"]), [r["mean"], r["sd"]],
             r["mean"] == best[group(r)], r["seconds"]] for r in runs]
    out = {"columns": [{"title": t, "format": f} for t, f in columns], "rows": rows}
    learners = [r for r in runs if r.get("knobs")]
    if learners:
        out["note"] = learner_note(learners)
    return out


def learner_note(runs: list[dict[str, Any]]) -> str:
    """Each knob candidate's mean over every (case, ε) it ran, the lowest first: one learner
    serves every case, so the preset takes the lowest overall."""
    means: dict[str, list[float]] = {}
    for r in runs:
        means.setdefault(r["candidate"], []).append(r["mean"])
    ranked = sorted(means.items(), key=lambda kv: float(np.mean(kv[1])))
    return ("Mean over the (case, ε) cells, per candidate, lowest first: "
            + "; ".join(f"{label.removeprefix('learner: ')}: {np.mean(v):.1f}% over {len(v)}"
                        for label, v in ranked) + ".")


if __name__ == "__main__":
    main()
