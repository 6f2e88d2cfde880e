"""The budget sweep of issue 31: every registered algorithm x privacy mode x mechanism x preset x
spending knob choice x continual-release choice (JDP: counter, schedule, bands) x epsilon, either
refused at creation or planned (and run) within budget.

Print the measured table: `cd tests && python -m support.budget_sweep [EPISODES] [--run K]`.
"""

from __future__ import annotations

import math
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from privrl.algorithms import registry
from privrl.budget import OverspendingPlan, plan_totals, refuse_overspending, release_plan
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec
from privrl.privacy.accountant import Charge
from privrl.run import run_in_process
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.tabular import TabularMDP
from pydantic import ValidationError

EPSILONS = (0.1, 1.0, 10.0, 1e3, 1e5)
DELTA = 1e-5
MECHANISMS = ("laplace", "gaussian")
# JDP's continual release, one choice at a time beside the preset's (the matrix counter only
# with the Gaussian mechanism: the schema refuses it otherwise)
CONTINUAL: tuple[dict[str, Any], ...] = (
    {}, {"counter": "tree"}, {"counter": "smoothed"}, {"counter": "matrix"},
    {"schedule": "batch:10"}, {"schedule": "geometric:1.5"},
    {"counter": "matrix", "schedule": "geometric:1.5"}, {"counter": "matrix", "counter_bands": 8},
)


def knob_choices(algo: str) -> list[dict[str, Any] | None]:
    """The preset as it is, then each enum (Literal) or switch (bool) knob set to each of its
    values, one knob at a time (the choices that can change what a run releases)."""
    out: list[dict[str, Any] | None] = [None]
    for name, field in registry.get(algo).knobs_model.model_fields.items():
        if typing.get_origin(field.annotation) is typing.Literal:
            values: tuple[Any, ...] = typing.get_args(field.annotation)
        elif field.annotation is bool:
            values = (False, True)
        else:
            continue
        out += [{name: v} for v in values]
    return out


@dataclass(frozen=True)
class Case:
    """One creatable configuration of the sweep, its world and its release plan (computed once,
    when `cases` checks that the configuration is creatable; `measure`'s outcome keeps the case
    without it, () - a plan of K releases is large)."""

    config: RunConfig
    world: WorldSpec
    plan: tuple[Charge, ...]

    @property
    def label(self) -> str:
        """algo mode mechanism preset knobs."""
        c = self.config
        knobs = ",".join(f"{k}={v}" for k, v in (c.knobs or {}).items()) or "-"
        release = f" {c.counter}" + (f"/{c.counter_bands}" if c.counter_bands else "")
        release += f" {c.schedule}" if c.schedule != "every" else ""
        return f"{c.algo} {c.privacy} {c.mechanism} {c.preset} {knobs}" + (
            release if c.privacy == "jdp" else "")


def cases(episodes: int, epsilons: tuple[float, ...] = EPSILONS,
          algos: list[str] | None = None, presets_only: bool = False) -> Iterator[Case]:
    """Every creatable combination (the schema or the algorithm refusing a combination, e.g.
    LDP for LSVI or Laplace for a Gaussian-only family, leaves it out); one knob choice that
    equals the preset's value is kept once. `algos`: only these; `presets_only`: no knob
    choices beyond the presets'."""
    for algo in registry.names() if algos is None else algos:
        plugin = registry.get(algo)
        world = WorldSpec(plugin.default_world, None, {})
        mdp = world.build()
        for privacy in [p for p in plugin.boundaries() if p != "none"]:
            for mech, preset in ((m, p) for m in MECHANISMS for p in plugin.presets):
                seen: set[str] = set()
                releases = CONTINUAL if privacy == "jdp" else CONTINUAL[:1]
                choices = [(k, {}) for k in knob_choices(algo)[:1 if presets_only else None]]
                choices += [(None, r) for r in releases[1:]]
                for knobs, release in choices:
                    for eps in epsilons:
                        try:
                            config = RunConfig(
                                algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                                model=model_spec_of(mdp), episodes=episodes, privacy=privacy,
                                epsilon=eps, delta=DELTA if mech == "gaussian" else 0.0,
                                mechanism=mech, preset=preset,
                                knobs=knobs, **release)
                            algorithm = registry.bind(config)
                            resolved = algorithm.knobs
                            algorithm.calibration()  # e.g. a schedule releasing nothing in K
                            # e.g. noise shares beyond integer sampling
                            plan = tuple(release_plan(config))
                        except (ValidationError, ValueError):
                            continue
                        key = f"{resolved!r}{config.counter}{config.counter_bands}"
                        key += f"{config.schedule}{eps}"
                        if key in seen:
                            continue
                        seen.add(key)
                        yield Case(config, world, plan)


@dataclass(frozen=True)
class Outcome:
    """What the sweep measured for one case: refused (with the message), or the projected and
    (when run) actual ledger epsilons."""

    case: Case
    refused: str | None
    projected: float
    actual: float | None = None

    @property
    def within(self) -> bool:
        """Refused, or both the projected and the actual spend within the budget."""
        eps = self.case.config.epsilon * (1 + 1e-9)
        return self.refused is not None or (
            self.projected <= eps and (self.actual is None or self.actual <= eps))


def measure(case: Case, run: bool = False, seeds: tuple[int, ...] = (0,)) -> Outcome:
    """Creation's verdict on `case`; when admitted and `run`, the actual ledger after a run of
    its K episodes (worlds with regret only: policy evaluation has no `run_in_process`)."""
    projected = plan_totals(case.plan, case.config.accounting_delta).epsilon
    try:
        refuse_overspending(case.config, case.plan)
    except OverspendingPlan as exc:
        return Outcome(replace(case, plan=()), str(exc), projected)
    actual = None
    mdp = case.world.build()
    if run and isinstance(mdp, TabularMDP):
        result = run_in_process(case.config, mdp, list(seeds))
        actual = result.ledger.totals(case.config.accounting_delta).epsilon
    return Outcome(replace(case, plan=()), None, projected, actual)


def table(outcomes: list[Outcome]) -> str:
    """One line per case: label, epsilon, projected and actual spend, verdict."""
    lines = [f"{'case':<72} {'budget':>8} {'projected':>11} {'actual':>11}  verdict"]
    for o in outcomes:
        actual = "-" if o.actual is None else f"{o.actual:.6g}"
        verdict = "refused" if o.refused else ("ok" if o.within else "OVER")
        lines.append(f"{o.case.label:<72} {o.case.config.epsilon:>8g} {o.projected:>11.6g}"
                     f" {actual:>11}  {verdict}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the sweep's table (K from argv, default 10,000; `--run K`: actual runs of K)."""
    episodes = int(argv[0]) if argv and not argv[0].startswith("-") else 10_000
    run_k = int(argv[argv.index("--run") + 1]) if "--run" in argv else None
    outcomes = [measure(c) for c in cases(episodes)]
    if run_k is not None:
        outcomes += [measure(c, run=True) for c in cases(run_k)]
    print(table(outcomes))
    over = [o for o in outcomes if not o.within]
    refused = sum(o.refused is not None for o in outcomes)
    ratio = max((o.projected / o.case.config.epsilon for o in outcomes if not o.refused),
                default=math.nan)
    print(f"{len(outcomes)} cases: {refused} refused at creation, {len(over)} over budget;"
          f" largest projected/budget among admitted: {ratio:.9f}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
