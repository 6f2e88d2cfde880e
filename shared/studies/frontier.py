"""`privrl frontier`: every case under both presets over its ε grid, and the levers' ablation.

The study is one JSON file (`frontier.json`): its spec, provenance (command, commit, load
average), and one record per distinct run configuration, keyed by a digest of the
configuration. A run that is already in the file is not run again (an interrupted study
continues where it stopped); the file is rewritten after every finished run. Seeds run as
replicas of one in-process run per configuration; configurations run in parallel on local
processes (executors.py). Thresholds (threshold.py) and tables are derived from the records.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__, trust
from ..algorithms import registry
from ..algorithms.ucbvi.support import WORLD, support_knob
from ..budget import OverspendingPlan, check_budget
from ..config import EPSILON_MIN, RunConfig, population_delta
from ..lab.executors import Executor, LocalExecutor, Task, TaskResult, run_task
from ..lab.experiments import WorldSpec
from ..privacy.accountant import continuous_gaussian, rho_to_epsilon
from ..provenance import commit as checkout_commit
from ..worlds import optimal_return, uniform_random_return
from ..worlds.model_spec import model_spec_of
from .cases import ABLATIONS, CASES, Ablation, Case, Lever, case_named
from .threshold import LEARNS_BELOW, Interval, final_fractions, smallest_learning_epsilon

PRESETS = ("faithful", "practical")
SCHEMA = 1
# a case that learns at its grid's smallest ε is run up to this many grid steps lower
EXTEND_BELOW = 3


@dataclass(frozen=True)
class StudySpec:
    """What a study measures: its size and which cases, presets, grid and ablations."""

    episodes: int = 50_000
    seeds: tuple[int, ...] = tuple(range(10))
    delta: float | None = None  # the Gaussian rows' δ (None: the population rule's at K)
    cases: tuple[str, ...] = tuple(c.name for c in CASES)
    presets: tuple[str, ...] = PRESETS
    grid_size: int = 8
    epsilons: tuple[float, ...] = ()  # an explicit grid for every case (empty: each case's own)
    ablation: bool = True
    # one world for every case (WorldSpec.to_dict's form, e.g. a suite's world); None: each
    # algorithm's default world
    world: dict[str, Any] | None = None
    # public knob overrides for every case's runs, e.g. (("support", "world"),): the value
    # "world" of `support` is the study world's own (`support_knob`; none: the knob is left out)
    knobs: tuple[tuple[str, Any], ...] = ()

    @property
    def gaussian_delta(self) -> float:
        """The δ of the Gaussian rows: the study's, else `population_delta(episodes)` (the
        default every run gets: 2e-6 at K = 50,000)."""
        return self.delta if self.delta is not None else population_delta(self.episodes)

    def grid(self, case: Case) -> list[float]:
        """The ε grid of `case`."""
        return sorted(self.epsilons) if self.epsilons else case.grid(self.grid_size)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (tuples as lists; δ as the runs use it)."""
        return json.loads(json.dumps({**asdict(self), "delta": self.gaussian_delta,
                                      "knobs": dict(self.knobs)}))


def run_key(config: RunConfig, knobs: dict[str, Any] | None = None) -> str:
    """The digest of `config` with the knobs it runs with (`knobs`: as given, else its preset's
    with its overrides, as its algorithm resolves them today) and, past 1, its version."""
    algorithm = registry.get(config.algo)
    if knobs is None:
        knobs = algorithm.resolve_knobs(config.preset, config.knobs).model_dump(mode="json")
    keyed: dict[str, Any] = {"config": config.model_dump(mode="json"), "knobs": knobs}
    if algorithm.version > 1:  # keys made before versions existed are those of version 1
        keyed["version"] = algorithm.version
    text = json.dumps(keyed, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    """One row of the study: a configuration to run, or a reason it cannot run."""

    kind: str  # "frontier" or "ablation"
    case: str
    label: str  # the preset ("faithful", "practical"), or the ablation row's lever
    epsilon: float
    config: RunConfig | None
    world: WorldSpec
    lever: str = ""  # ablation: the lever's kind ("" for the presets, "all" for every lever)
    overrides: str = ""
    unavailable: str = ""  # why the row cannot run on this build

    @property
    def key(self) -> str:
        """The run's digest (its configuration and the knobs its preset resolves to, so a
        preset's new knob values make new runs): one record per distinct configuration."""
        if self.config is None:
            return ""
        return run_key(self.config)

    def row(self) -> dict[str, Any]:
        """The JSON row (frontier or ablation list) that points at its run."""
        out = {"case": self.case, "label": self.label, "epsilon": self.epsilon, "run": self.key}
        if self.kind == "ablation":
            out.update(lever=self.lever, overrides=self.overrides, unavailable=self.unavailable)
        return out


@dataclass
class Planner:
    """Builds the study's configurations (worlds built once each)."""

    spec: StudySpec
    mdps: dict[str, Any] = field(default_factory=dict)

    def world(self, algo: str, params: dict[str, Any] | None = None) -> tuple[WorldSpec, Any]:
        """The study's world (`spec.world`), else the algorithm's default world (with these
        parameters, e.g. another secret seed), and its MDP; `mdps` keys the default world by
        its name."""
        if self.spec.world is not None and not params:
            spec = WorldSpec(**self.spec.world)
            key = json.dumps(spec.to_dict(), sort_keys=True)
        else:
            spec = WorldSpec(registry.get(algo).default_world, params=dict(params or {}))
            key = spec.name if not params else f"{spec.name} {json.dumps(params, sort_keys=True)}"
        if key not in self.mdps:
            self.mdps[key] = spec.build()
        mdp = self.mdps[key]
        return WorldSpec(spec.name, mdp.H, dict(spec.params)), mdp

    def config(self, case: Case, preset: str, epsilon: float,
               lever_fields: dict[str, Any] | None = None,
               lever_knobs: dict[str, Any] | None = None,
               world_params: dict[str, Any] | None = None) -> tuple[RunConfig, WorldSpec]:
        """The case's RunConfig at `epsilon` under `preset`, with a lever's overrides, as its
        runs use it (the preset's schedule and counter filled in): what the run's key digests."""
        world, mdp = self.world(case.algo, world_params)
        knobs = world_knobs({**case.knobs, **dict(self.spec.knobs), **(lever_knobs or {})}, mdp)
        fields = {"mechanism": default_mechanism(case), **(lever_fields or {})}
        if fields["mechanism"] == "gaussian":
            fields.setdefault("delta", self.spec.gaussian_delta)
        config = RunConfig(
            algo=case.algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
            model=model_spec_of(mdp), episodes=self.spec.episodes, privacy=case.privacy,
            epsilon=float(epsilon), preset=preset, knobs=knobs or None, **fields)
        return registry.get(case.algo).effective_config(config), world

    def jobs(self) -> list[Job]:
        """Every frontier point, then every ablation row."""
        out = []
        for name in self.spec.cases:
            case = case_named(name)
            for preset in self.spec.presets:
                for eps in self.spec.grid(case):
                    config, world = self.config(case, preset, eps)
                    out.append(Job("frontier", name, preset, eps, config, world))
        if self.spec.ablation:
            for ablation in ABLATIONS:
                if ablation.case in self.spec.cases:
                    out += self.ablation_jobs(ablation)
        return out

    def below_floor(self, runs: dict[str, dict[str, Any]]) -> list[Job]:
        """Frontier jobs below the grid of each case and preset that learns at its smallest ε
        (its threshold on the floor), from the finished `runs`: one grid step lower at a time
        (the next job once the last has run), at most EXTEND_BELOW steps. A case's own grid
        only: an explicit --epsilon grid is the caller's."""
        if self.spec.epsilons:
            return []
        out = []
        for name in self.spec.cases:
            case = case_named(name)
            lo, hi = case.epsilon_range
            size = self.spec.grid_size
            step = (hi / lo) ** (1 / (size - 1)) if size > 1 else 10.0
            for preset in self.spec.presets:
                grid = self.spec.grid(case)
                for _ in range(EXTEND_BELOW):
                    jobs = [Job("frontier", name, preset, e, *self.config(case, preset, e))
                            for e in grid]
                    records = [runs.get(j.key) or {} for j in jobs]
                    if any(r.get("status") not in ("done", "refused") for r in records):
                        break  # not all known yet: nothing to extend from
                    fractions = {j.epsilon: r["fractions"] for j, r in zip(jobs, records,
                                                                          strict=True)
                                 if r["status"] == "done"}
                    if not fractions or not smallest_learning_epsilon(fractions).on_floor:
                        break
                    below = float(f"{min(grid) / step:.2g}")
                    if below < EPSILON_MIN:
                        break
                    out.append(Job("frontier", name, preset, below,
                                   *self.config(case, preset, below)))
                    grid = [below, *grid]
        return out

    def ablation_jobs(self, ablation: Ablation) -> list[Job]:
        """Faithful, each lever alone, every available lever together, practical."""
        case, eps = case_named(ablation.case), ablation.epsilon
        rows = []

        def job(label: str, lever: str, overrides: str, preset: str = "faithful",
                fields: dict[str, Any] | None = None, knobs: dict[str, Any] | None = None,
                unavailable: str = "") -> Job:
            config, world = (self.config(case, preset, eps, fields, knobs) if not unavailable
                             else (None, self.world(case.algo)[0]))
            return Job("ablation", case.name, label, eps, config, world, lever, overrides,
                       unavailable)

        rows.append(job("faithful preset", "", ""))
        together_fields: dict[str, Any] = {}
        together_knobs: dict[str, Any] = {}
        available: list[Lever] = []
        for lever in ablation.levers:
            missing = lever.missing(case.algo)
            if missing:
                rows.append(job(lever.label, lever.kind, lever.overrides(),
                                unavailable="; ".join(missing)))
                continue
            available.append(lever)
            together_fields.update(lever.fields)
            together_knobs.update(lever.knobs)
            rows.append(job(lever.label, lever.kind, lever.overrides(), fields=dict(lever.fields),
                            knobs=dict(lever.knobs)))
        kinds = ", ".join(dict.fromkeys(lever.kind for lever in available))
        rows.append(job(f"all available levers ({kinds})", "all", "", fields=together_fields,
                        knobs=together_knobs))
        rows.append(job("practical preset", "", "", preset="practical"))
        return rows


def world_knobs(knobs: dict[str, Any], mdp: Any) -> dict[str, Any]:
    """`knobs` with a `support` of "world" replaced by the world's public support (left out
    where the world declares none, so the run is the one without it)."""
    if knobs.get("support") != WORLD:
        return knobs
    out = {k: v for k, v in knobs.items() if k != "support"}
    support = support_knob(mdp)
    return out if support is None else {**out, "support": support}


def default_mechanism(case: Case) -> str:
    """The mechanism of `case`'s rows: its algorithm's default across its boundary
    (`Algorithm.mechanism_for`), the one a run without --mechanism gets, so that the default
    run is the frontier's row."""
    return registry.get(case.algo).mechanism_for(trust.get(case.privacy))


def random_regret(mdp: Any) -> float:
    """The uniformly random policy's per-episode regret on `mdp` (the 100% of the fractions)."""
    return float(optimal_return(mdp) - uniform_random_return(mdp))


def run_or_error(task: Task, progress: Callable[[int], None] | None = None) -> TaskResult | str:
    """`run_task`, with a failure returned as one line (the study records it and goes on)."""
    try:
        return run_task(task, progress)
    except Exception as exc:  # noqa: BLE001 (any failure of one run must not end the study)
        return f"{type(exc).__name__}: {exc}"


def precheck(config: RunConfig) -> str:
    """Why `config` cannot run (an overspending plan, a refused knob), or ''."""
    try:
        check_budget(config)
    except OverspendingPlan as exc:
        return f"refused: {exc}"
    except ValueError as exc:
        return f"invalid: {exc}"
    return ""


def record_of(job: Job, result: TaskResult | str, level: float, commit: str
              ) -> dict[str, Any]:
    """The JSON record of one finished run (`commit`: the code's that ran it)."""
    assert job.config is not None
    base = {"config": job.config.model_dump(mode="json"), "world": job.world.to_dict(),
            "algo": job.config.algo, "preset": job.config.preset,
            "algorithm": registry.get(job.config.algo).versioned_id()}
    if isinstance(result, str):
        return {**base, "status": "failed", "message": result}
    led = result.ledger
    episodes = result.regret.shape[1]
    return {**base, "status": "done", "seeds": list(result.seeds),
            "fractions": final_fractions(result.regret, level), "random_regret": level,
            "ledger": {k: led.get(k) for k in ("epsilon", "delta", "rho", "smaller_delta",
                                                "epsilon_at_smaller_delta")},
            "seconds": result.seconds, "commit": commit,
            "ms_per_replica_episode": 1e3 * result.seconds / (episodes * len(result.seeds)),
            "policy_versions": result.policy_versions}


class Study:
    """A study's JSON file: load (to resume), add records, save atomically."""

    def __init__(self, path: Path, spec: StudySpec, command: str,
                 commit: str | None = None) -> None:
        """`commit`: the code's commit (default: the checkout's, asked of git once)."""
        self.path, self.spec, self.command = Path(path), spec, command
        self.commit = commit if commit is not None else checkout_commit()
        self.runs: dict[str, dict[str, Any]] = {}
        self.rows: list[Job] = []
        # each invocation that ran runs: its command, commit, workers, runs and wall time
        self.invocations: list[dict[str, Any]] = []

    def resume(self) -> int:
        """Take the finished runs of an existing file of the same spec; how many."""
        if not self.path.exists():
            return 0
        data = json.loads(self.path.read_text())
        mine = self.spec.to_dict()
        # a study from before `world` or `knobs`
        saved = {"world": None, "knobs": {}, **(data.get("spec") or {})}
        grows = {"cases": None}  # other cases, or other ε of an explicit grid: the study grows
        if saved["epsilons"] and mine["epsilons"]:
            grows["epsilons"] = None
        if {**saved, **grows} != {**mine, **grows}:
            raise ValueError(f"{self.path} holds a study of another spec ({saved}):"
                             " use another --out, or --force to start over")
        cases = [*saved["cases"], *(c for c in self.spec.cases if c not in saved["cases"])]
        epsilons = sorted({*saved["epsilons"], *self.spec.epsilons})
        self.spec = replace(self.spec, cases=tuple(cases), epsilons=tuple(epsilons))
        self.runs = {k: r for k, r in data["runs"].items() if r["status"] != "failed"}
        self.invocations = list(data.get("invocations", []))
        return len(self.runs)

    def data(self) -> dict[str, Any]:
        """The whole JSON document."""
        frontier = [j.row() for j in self.rows if j.kind == "frontier"]
        ablation = [j.row() for j in self.rows if j.kind == "ablation"]
        # the runs the rows point at: a record whose configuration no row asks for any more (a
        # preset since changed) is not part of the study
        wanted = {j.key for j in self.rows}
        runs = {k: r for k, r in self.runs.items() if k in wanted} if self.rows else self.runs
        data = {"schema": SCHEMA, "privrl": __version__, "command": self.command,
                "commit": self.commit,
                "load_average": [round(x, 1) for x in os.getloadavg()],
                "spec": self.spec.to_dict(),
                "learns_below_percent": LEARNS_BELOW,
                "frontier": frontier, "ablation": ablation, "runs": runs,
                "invocations": self.invocations}
        data["thresholds"] = thresholds(data)
        return data

    def save(self) -> Path:
        """Rewrite the file (a temporary file renamed over it: never half-written)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data(), indent=1, allow_nan=False) + "\n")
        tmp.replace(self.path)
        return self.path


def clock(seconds: float) -> str:
    """'1h02m', '3m05s', '12s'."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """'[i/n] label: seconds; elapsed, ETA' on stderr; the ETA from the finished runs' seconds
    per replica-episode of the same algorithm (else of all), over the parallel workers."""

    def __init__(self, tasks: Sequence[Task], workers: int, quiet: bool = False) -> None:
        self.pending = {t.key: t for t in tasks}
        self.n, self.done, self.workers, self.quiet = len(tasks), 0, max(1, workers), quiet
        self.rate: dict[str, list[float]] = {}
        self.start = time.perf_counter()

    def eta(self) -> float | None:
        """Seconds left, or None before any run finished."""
        every = [r for rates in self.rate.values() for r in rates]
        if not every:
            return None
        left = 0.0
        for t in self.pending.values():
            rates = self.rate.get(t.config.algo) or every
            left += float(np.mean(rates)) * t.replica_episodes
        return left / min(self.workers, max(1, len(self.pending)))

    def finished(self, task: Task, seconds: float | None, what: str) -> None:
        """A run finished (seconds None: it failed)."""
        self.pending.pop(task.key, None)
        self.done += 1
        if seconds is not None:
            self.rate.setdefault(task.config.algo, []).append(seconds / task.replica_episodes)
        if self.quiet:
            return
        eta = self.eta()
        print(f"[{self.done}/{self.n}] {what}: "
              f"{'failed' if seconds is None else f'{seconds:.1f} s'}; elapsed "
              f"{clock(time.perf_counter() - self.start)}, ETA "
              f"{'?' if eta is None else clock(eta)}", file=sys.stderr, flush=True)


def describe(job: Job) -> str:
    """'dp-ucbvi-step-jdp practical ε=1'."""
    return f"{job.case} {job.label} ε={job.epsilon:g}"


def run_study(study: Study, workers: int = 2, quiet: bool = False,
              note: Callable[[str], None] | None = None,
              executor: Executor | None = None) -> dict[str, Any]:
    """Run every job of the study not yet in its file, on `executor` (default: `workers` local
    processes), then the jobs below the floors these runs found (`Planner.below_floor`), round
    after round; the file after each run, with the invocation's wall time and cores; its data."""
    say = note or (lambda text: print(text, file=sys.stderr, flush=True))
    executor = executor if executor is not None else LocalExecutor(workers)
    planner = Planner(study.spec)
    rows = planner.jobs()
    for job in rows:
        if job.unavailable:
            say(f"lever {job.label!r} ({job.lever}) is not available for family {job.case}:"
                f" {job.unavailable}")
    start, invocation = time.perf_counter(), None
    with executor:
        while True:
            study.rows = [*rows, *planner.below_floor(study.runs)]
            jobs = _to_run(study, say)
            tasks = [Task((i, 0), j.config, j.world, tuple(study.spec.seeds))
                     for i, j in enumerate(jobs) if j.config is not None]
            say(f"{len(study.rows)} rows, {len(study.runs)} runs already done or refused,"
                f" {len(tasks)} to run ({study.spec.episodes} episodes x"
                f" {len(study.spec.seeds)} seeds each) on {workers} worker(s)")
            if tasks and invocation is None:
                invocation = {"command": study.command, "commit": study.commit,
                              "workers": workers, "executor": type(executor).__name__,
                              "cores": executor.cores(), "runs": 0, "done": 0,
                              "wall_seconds": 0.0}
                study.invocations.append(invocation)
            study.save()
            if not tasks:
                break
            assert invocation is not None
            invocation["runs"] += len(tasks)
            progress = Progress(tasks, workers, quiet)
            levels = {algo: random_regret(planner.world(algo)[1])
                      for algo in {j.config.algo for j in jobs if j.config is not None}}
            by_key = {t.key: t for t in tasks}
            for key, result in executor.run(run_or_error, tasks, lambda k, n: None):
                job = jobs[key[0]]
                study.runs[job.key] = record_of(job, result, levels[job.config.algo],
                                                study.commit)
                invocation.update(done=invocation["done"] + 1,
                                  wall_seconds=time.perf_counter() - start)
                study.save()
                ok = not isinstance(result, str)
                progress.finished(by_key[key], result.seconds if ok else None, describe(job))
                if not ok:
                    say(f"  {result}")
    return study.data()


def _to_run(study: Study, say: Callable[[str], None]) -> list[Job]:
    """The study's jobs without a record yet; a job its plan refuses is recorded as refused."""
    todo: dict[str, Job] = {}
    for job in study.rows:
        if job.unavailable or job.key in study.runs or job.key in todo:
            continue
        assert job.config is not None
        reason = precheck(job.config)
        if reason:
            say(f"{describe(job)}: {reason}")
            study.runs[job.key] = {"config": job.config.model_dump(mode="json"),
                                   "world": job.world.to_dict(), "algo": job.config.algo,
                                   "preset": job.config.preset, "status": "refused",
                                   "message": reason}
            continue
        todo[job.key] = job
    return list(todo.values())


# ---------------------------------------------------------------- derived: thresholds, tables


def _interval(run: dict[str, Any] | None) -> Interval | None:
    if not run or run.get("status") != "done":
        return None
    return Interval.of(run["fractions"])


def series(data: dict[str, Any], case: str, preset: str) -> list[tuple[float, Interval]]:
    """(ε, interval of the final fractions) of a case under a preset, by ε; runs with results."""
    out = []
    for row in data["frontier"]:
        if row["case"] == case and row["label"] == preset:
            ci = _interval(data["runs"].get(row["run"]))
            if ci is not None:
                out.append((float(row["epsilon"]), ci))
    return sorted(out, key=lambda p: p[0])


def thresholds(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case and preset: the smallest ε that learns and its interval (threshold.py)."""
    out = []
    seen = dict.fromkeys((r["case"], r["label"]) for r in data["frontier"])
    for case, preset in seen:
        fractions = {}
        refused = []
        for row in data["frontier"]:
            if row["case"] != case or row["label"] != preset:
                continue
            run = data["runs"].get(row["run"]) or {}
            if run.get("status") == "done":
                fractions[float(row["epsilon"])] = run["fractions"]
            elif run:
                refused.append(float(row["epsilon"]))
        found = smallest_learning_epsilon(fractions, data["learns_below_percent"])
        out.append({"case": case, "preset": preset, **found.to_dict(),
                    "not_run": sorted(refused), "target": _target(case)})
    return out


def _target(name: str) -> float | None:
    """The case's target ε (None for a case this build no longer has)."""
    try:
        return case_named(name).target
    except ValueError:
        return None


def eps_text(value: float | None, grid: Sequence[float]) -> str:
    """A threshold as text: '1', or '> 100' beyond the grid ('—' without a grid)."""
    if value is None:
        return f"> {max(grid):g}" if grid else "—"
    return f"{value:g}"


def threshold_table(data: dict[str, Any]) -> dict[str, Any]:
    """The thresholds as a results_table document (columns, rows, provenance)."""
    columns = [("case", ""), ("preset", ""), ("ε grid", ""), ("smallest ε that learns", ""),
               ("95% interval (its upper end: decided)", ""), ("% of uniform at it", ".1f"),
               ("ledger ε at it", ".4g"),
               (f"its ledger at the runs' δ ({population_delta(data['spec']['episodes']):g})",
                ".4g"),
               ("% of uniform at the largest ε", ".1f"), ("target ε", "g"),
               ("% of uniform at the target", ".1f")]
    rows = []
    for t in data["thresholds"]:
        grid = t["grid"]
        points = dict(series(data, t["case"], t["preset"]))
        at = points.get(t["epsilon"]) if t["epsilon"] is not None else None
        top = points.get(max(grid)) if grid else None
        run = _run_at(data, t["case"], t["preset"], t["epsilon"]) if at else None
        spent = run["ledger"]["epsilon"] if run else None
        restated = epsilon_at(run, population_delta(data["spec"]["episodes"])) if run else None
        rows.append([t["case"], t["preset"],
                     _grid_text(grid, t["not_run"]),
                     ("≤ " if t.get("on_floor") else "") + eps_text(t["epsilon"], grid),
                     f"[{eps_text(t['low'], grid)}, {eps_text(t['high'], grid)}]",
                     [at.mean, at.high - at.mean] if at else None,
                     spent if isinstance(spent, float) else None,
                     restated if isinstance(spent, float) else None,
                     [top.mean, top.high - top.mean] if top else None])
        target = t.get("target")
        hit = points.get(target) if target is not None else None
        rows[-1] += [target, [hit.mean, hit.high - hit.mean] if hit else None]
    return _document(data, columns, rows, _threshold_note(data))


def epsilon_at(run: dict[str, Any], delta: float) -> float:
    """A run's ledger ε restated at `delta`: the same noise, so the same ρ, converted at `delta`
    (its pure and approximate parts kept). How a study run at one δ reads at the runs' default.
    """
    ledger = run["ledger"]
    rho = float(ledger.get("rho") or 0.0)
    if rho == 0.0:
        return float(ledger["epsilon"])
    continuous = continuous_gaussian(run["config"]["noise"])
    rest = ledger["epsilon"] - rho_to_epsilon(rho, ledger["delta"], continuous=continuous)
    return rest + rho_to_epsilon(rho, delta, continuous=continuous)


def _grid_text(grid: Sequence[float], refused: Sequence[float]) -> str:
    """'0.1 … 100 (4)', with the ε refused before they ran: '(2; 1000, 1e+05 refused)'."""
    text = f"{min(grid):g} … {max(grid):g} ({len(grid)}" if grid else "— ("
    if refused:
        text += ("; " if grid else "") + ", ".join(f"{e:g}" for e in refused) + " refused"
    return text + ")"


def _run_at(data: dict[str, Any], case: str, preset: str, epsilon: float) -> dict[str, Any]:
    """The frontier run of a case and preset at ε."""
    row = next(r for r in data["frontier"] if (r["case"], r["label"], float(r["epsilon"]))
               == (case, preset, epsilon))
    return data["runs"][row["run"]]


def timing_table(data: dict[str, Any], workers: int = 2) -> dict[str, Any]:
    """Per case and preset: the runs done of those planned, the measured seconds per run, per
    replica-episode and in all; the note sums every run (ablation included) and extrapolates
    the runs not yet done from their case's measured rate."""
    columns = [("case", ""), ("preset", ""), ("runs done", ""), ("s per run", ".1f"),
               ("ms per replica-episode", ".3f"), ("s in all", ".0f")]
    spec = data["spec"]
    replica_episodes = spec["episodes"] * len(spec["seeds"])
    rows, rate = [], {}
    for key in dict.fromkeys((r["case"], r["label"]) for r in data["frontier"]):
        planned = [r for r in data["frontier"] if (r["case"], r["label"]) == key]
        runs = [data["runs"][r["run"]] for r in planned
                if data["runs"].get(r["run"], {}).get("status") == "done"]
        refused = sum(data["runs"].get(r["run"], {}).get("status") == "refused" for r in planned)
        done = f"{len(runs)} of {len(planned) - refused}"
        if not runs:
            rows.append([*key, done, None, None, None])
            continue
        ms = float(np.mean([r["ms_per_replica_episode"] for r in runs]))
        rate[key[0]] = ms
        rows.append([*key, done, float(np.mean([r["seconds"] for r in runs])), ms,
                     float(sum(r["seconds"] for r in runs))])
    measured = sum(r.get("seconds", 0.0) for r in data["runs"].values()
                   if r.get("status") == "done")
    frontier = sum(data["runs"][r["run"]].get("seconds", 0.0) for r in data["frontier"]
                   if data["runs"].get(r["run"], {}).get("status") == "done")
    keys = {r["run"]: r["case"] for r in data["frontier"] + data["ablation"] if r["run"]}
    missing = [case for key, case in keys.items()
               if data["runs"].get(key, {}).get("status") not in ("done", "refused")]
    left = sum(rate.get(case, np.nan) * 1e-3 * replica_episodes for case in missing)
    note = (f"Measured: {measured / 3600:.2f} h of runs in all (frontier and ablation), so"
            f" {measured / 3600 / workers:.2f} h on {workers} workers; the frontier alone"
            f" {frontier / 3600:.2f} h, so {frontier / 3600 / workers:.2f} h on {workers} workers;"
            f" on this 2-core machine shared with other work (load average"
            f" {data['load_average']} at the last save).")
    for run in data.get("invocations", [])[-1:]:
        note += (f" The last invocation (`{run['command']}`, commit {run['commit']}) ran"
                 f" {run['done']} of its {run['runs']} runs in {clock(run['wall_seconds'])} of"
                 f" wall time on {run['workers']} workers.")
    if missing:
        note += (f" Not yet run: {len(missing)} runs"
                 + (f", about {left / 3600 / workers:.2f} h more on {workers} workers at their"
                    " cases' measured rates." if np.isfinite(left) else
                    " (some of a case with no run yet: no estimate)."))
    return _document(data, columns, rows, note)


def _world_text(spec: dict[str, Any]) -> str:
    """'each algorithm's default world', or the study's one world."""
    world = spec.get("world")
    if not world:
        return "each algorithm's default world"
    params = ", ".join(f"{k}={v}" for k, v in world["params"].items())
    horizon = f", H={world['horizon']}" if world.get("horizon") is not None else ""
    return f"the world {world['name']}({params}{horizon})"


def _threshold_note(data: dict[str, Any]) -> str:
    spec = data["spec"]
    return (f"K = {spec['episodes']:,}, {len(spec['seeds'])} seeds, δ = {spec['delta']:g},"
            f" each algorithm's default mechanism, {_world_text(spec)}. A case learns at ε"
            " when the"
            f" seeds' mean final fraction (last 10% of episodes, % of the uniformly random"
            f" policy's regret) is ≤ {data['learns_below_percent']:g}%; the smallest ε that"
            " learns is the smallest grid ε from which on it learns at every larger grid ε; the"
            " interval applies the same rule to the ends of each ε's 95% t interval over the"
            " seeds.")


def ablation_table(data: dict[str, Any]) -> dict[str, Any]:
    """The ablation rows as a results_table document."""
    columns = [("case", ""), ("ε", "g"), ("lever", ""), ("row", ""), ("overrides", ""),
               ("% of uniform", ".1f"), ("vs faithful (points)", "+.1f"), ("ledger ε", ".4g"),
               ("status", "")]
    rows = []
    base: dict[str, float] = {}
    for r in data["ablation"]:
        run = data["runs"].get(r["run"]) if r["run"] else None
        ci = _interval(run)
        if r["label"] == "faithful preset" and ci is not None:
            base[r["case"]] = ci.mean
        status = ("not available: " + r["unavailable"] if r["unavailable"]
                  else "done" if ci else (run or {}).get("message", "not run"))
        eps = run["ledger"]["epsilon"] if ci else None
        rows.append([r["case"], r["epsilon"], r["lever"] or "—", r["label"],
                     r["overrides"] or "—", [ci.mean, ci.high - ci.mean] if ci else None,
                     ci.mean - base[r["case"]] if ci and r["case"] in base else None,
                     eps if isinstance(eps, float) else None, status])
    note = ("Each lever alone on the faithful preset, then every available lever together, and"
            " the practical preset; % of uniform as mean ± 95% t half-width over the seeds.")
    return _document(data, columns, rows, note)


def _document(data: dict[str, Any], columns: list[tuple[str, str]], rows: list[list[Any]],
              note: str) -> dict[str, Any]:
    return {"command": data["command"], "commit": data["commit"],
            "load_average": data["load_average"],
            "columns": [{"title": t, "format": f} for t, f in columns], "rows": rows,
            "note": f"{note} {_provenance(data)}"}


def _provenance(data: dict[str, Any]) -> str:
    """Which commits ran the study's runs: a study grown by several invocations (`--cases`)
    names only the last one's command; every run records its own commit."""
    commits = Counter(r.get("commit", "unknown") for r in data["runs"].values()
                      if r.get("status") == "done")
    parts = ", ".join(f"{n} at {c}" for c, n in commits.items())
    return f"Runs done: {parts}." if parts else ""


def panels(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The figure's panels: per case its title, privacy mode and each preset's points."""
    out = []
    for name in dict.fromkeys(r["case"] for r in data["frontier"]):
        case = case_named(name)
        presets = {p: [(e, ci.mean, ci.low, ci.high) for e, ci in series(data, name, p)]
                   for p in dict.fromkeys(r["label"] for r in data["frontier"]
                                          if r["case"] == name)}
        out.append({"title": case.title, "privacy": case.privacy, "presets": presets})
    return out
