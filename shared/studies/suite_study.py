"""Frontier cases across a suite's split: one study per world, each world's threshold, and the
suite's median and worst (`privrl frontier --suite NAME`).

Each world of the split gets its own study (`frontier.py`, with `StudySpec.world` set) in
`OUT/<world>/frontier.json`, so a world's runs resume like any study's, and its thresholds
come from the study's own machinery (`threshold.py`). A case runs on the worlds its algorithm
accepts (its own check of the world's model); the worlds it refuses are listed with the reason.
The suite's summary (`OUT/suite.json`) reports per case and preset every world's smallest ε that
learns, the median (the upper median: the larger middle one of an even count) and the worst
(the largest) over the worlds, and per grid ε each world's % of uniform with the median and
the worst; a world that does not learn on the grid counts as beyond it (∞).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..algorithms import registry
from ..provenance import commit as checkout_commit
from ..worlds.suites import Split, Suite, SuiteWorld
from .cases import case_named
from .frontier import Planner, Study, StudySpec, eps_text, run_study, series

SUMMARY = "suite.json"


def world_dict(world: SuiteWorld) -> dict[str, Any]:
    """The world in `StudySpec.world`'s form (WorldSpec.to_dict)."""
    return {"name": world.name, "horizon": world.horizon, "params": dict(world.params)}


def folder(world: SuiteWorld) -> str:
    """A file-system name for the world's study: 'gridworld_size_4_slip_0.2'."""
    return re.sub(r"[^A-Za-z0-9.]+", "_", world.label).strip("_")


def refusal(spec: StudySpec, case_name: str) -> str:
    """Why the case's algorithm refuses the study's world ('' when it accepts it): the
    algorithm's own check of a run configured for that world."""
    planner = Planner(spec)
    case = case_named(case_name)
    try:
        config, _ = planner.config(case, "faithful", spec.grid(case)[-1])
        registry.get(case.algo)(config).check_world(planner.world(case.algo)[1])
    except ValueError as exc:
        return str(exc)
    return ""


def median_and_worst(values: Sequence[float]) -> tuple[float, float]:
    """The upper median and the maximum (∞: beyond the grid)."""
    return statistics.median_high(values), max(values)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def summarize(worlds: Sequence[dict[str, Any]], studies: dict[str, dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """Per case and preset: each world's threshold and % of uniform per ε, median and worst.

    `worlds`: the per-world entries (label, refused cases); `studies`: label -> study data."""
    out = []
    keys = dict.fromkeys((t["case"], t["preset"]) for data in studies.values()
                         for t in data["thresholds"])
    for case, preset in keys:
        by_world: dict[str, dict[str, Any]] = {}
        for label, data in studies.items():
            found = next((t for t in data["thresholds"]
                          if (t["case"], t["preset"]) == (case, preset)), None)
            if found is None:
                continue
            points = series(data, case, preset)
            by_world[label] = {
                "epsilon": found["epsilon"], "low": found["low"], "high": found["high"],
                "grid": found["grid"],
                "percent": {f"{e:g}": [ci.mean, ci.low, ci.high] for e, ci in points}}
        eps = [math.inf if t["epsilon"] is None else t["epsilon"] for t in by_world.values()]
        grid = sorted({float(e) for t in by_world.values() for e in t["percent"]})
        per_eps = {}
        for e in grid:
            means = [t["percent"][f"{e:g}"][0] for t in by_world.values()
                     if f"{e:g}" in t["percent"]]
            median, worst = median_and_worst(means)
            per_eps[f"{e:g}"] = {"worlds": len(means), "median": median, "worst": worst}
        median, worst = median_and_worst(eps) if eps else (math.inf, math.inf)
        out.append({
            "case": case, "preset": preset, "worlds": len(by_world),
            "median_epsilon": _finite(median), "worst_epsilon": _finite(worst),
            "learning_worlds": sum(math.isfinite(e) for e in eps),
            "refused": {w["label"]: w["refused"][case] for w in worlds
                        if case in w["refused"]},
            "by_world": by_world, "per_epsilon": per_eps})
    return out


def table(summary: dict[str, Any]) -> dict[str, Any]:
    """A results_table document: a row per case, preset and world, then the suite's median and
    worst (scripts/results_table.py renders it)."""
    columns = [("case", ""), ("preset", ""), ("world", ""), ("smallest ε that learns", ""),
               ("95% interval", ""), ("% of uniform per grid ε", "")]
    rows = []
    for s in summary["summary"]:
        for label, t in s["by_world"].items():
            grid = t["grid"]
            rows.append([s["case"], s["preset"], label, eps_text(t["epsilon"], grid),
                         f"[{eps_text(t['low'], grid)}, {eps_text(t['high'], grid)}]",
                         "; ".join(f"ε {e}: {p[0]:.1f} ± {p[2] - p[0]:.1f}"
                                   for e, p in t["percent"].items())])
        grid = sorted({g for t in s["by_world"].values() for g in t["grid"]})
        per = "; ".join(f"ε {e}: {p['median']:.1f} / {p['worst']:.1f}"
                        for e, p in s["per_epsilon"].items())
        both = f"{eps_text(s['median_epsilon'], grid)} / {eps_text(s['worst_epsilon'], grid)}"
        rows.append([s["case"], s["preset"], f"**median / worst of {s['worlds']} worlds**",
                     both, "", per])
    spec = summary["spec"]
    note = (f"Suite `{summary['suite']}`, its {summary['split']} worlds; K ="
            f" {spec['episodes']:,}, {len(spec['seeds'])} seeds, δ = {spec['delta']:g}, Gaussian"
            " mechanism. A world's smallest ε that learns and its interval are its study's"
            " (`privrl.studies.threshold`); the suite's median is the upper median over the"
            " worlds, its worst the largest, a world that does not learn on the grid counting"
            " as beyond it. Per grid ε: each world's mean % of uniform (last 10% of episodes) ±"
            " the 95% t half-width over the seeds, and for the suite the median / worst of"
            " those means.")
    commits = ", ".join(f"{n} at {c}" for c, n in summary["run_commits"].items())
    note += f" Runs done: {commits}." if commits else ""
    if summary["not_run"]:
        note += (f" Not run (so not in the median and worst): {', '.join(summary['not_run'])}"
                 f" of the suite's {summary['split']} worlds.")
    refused = {w: r for s in summary["summary"] for w, r in s["refused"].items()}
    if refused:
        note += f" Worlds a case's algorithm refuses (not counted): {', '.join(refused)}."
    return {"command": summary["command"], "commit": summary["commit"],
            "load_average": summary["load_average"],
            "columns": [{"title": t, "format": f} for t, f in columns], "rows": rows,
            "note": note}


def run_suite(suite: Suite, split: Split, spec: StudySpec, out: Path, command: str,
              workers: int = 1, quiet: bool = False,
              note: Callable[[str], None] | None = None, commit: str | None = None,
              only: Sequence[str] = ()) -> dict[str, Any]:
    """Run (or continue) every world's study of the split (`only`: these labels of it; the
    summary names the others as not run); write and return the summary (`commit`: the
    code's, default the checkout's, asked of git once)."""
    say = note or (lambda text: print(text, flush=True))
    commit = commit if commit is not None else checkout_commit()
    members = suite.worlds_in(split)
    unknown = set(only) - {w.label for w in members}
    if unknown:
        raise ValueError(f"not {split} worlds of suite {suite.name!r}: {', '.join(sorted(unknown))}"
                         f" (`privrl worlds --suite {suite.name}` lists them)")
    left_out = [w.label for w in members if only and w.label not in only]
    worlds, studies = [], {}
    for world in members:
        if world.label in left_out:
            continue
        world_spec = replace(spec, world=world_dict(world))
        refused = {c: r for c in spec.cases if (r := refusal(world_spec, c))}
        accepted = tuple(c for c in spec.cases if c not in refused)
        entry = {"label": world.label, "world": world_dict(world), "study": folder(world),
                 "refused": refused}
        worlds.append(entry)
        for case, reason in refused.items():
            say(f"{world.label}: {case} refused: {reason}")
        if not accepted:
            continue
        say(f"{world.label}: {', '.join(accepted)}")
        study = Study(out / folder(world) / "frontier.json",
                      replace(world_spec, cases=accepted), command, commit)
        study.resume()
        studies[world.label] = run_study(study, workers=workers, quiet=quiet, note=say)
    summary = {"schema": 1, "privrl": __version__, "command": command, "commit": commit,
               "load_average": [round(x, 1) for x in os.getloadavg()],
               "suite": suite.name, "split": split, "spec": spec.to_dict(), "worlds": worlds,
               "not_run": left_out}
    summary["summary"] = summarize(worlds, studies)
    summary["run_commits"] = dict(Counter(
        r.get("commit", "unknown") for data in studies.values() for r in data["runs"].values()
        if r.get("status") == "done"))
    summary.update(table(summary))
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY).write_text(json.dumps(summary, indent=1, allow_nan=False) + "\n")
    return summary
