"""Sweeps: configurations x seeds as tasks on an executor (local processes or Ray), summarized.

One configuration = one `RunConfig` whose seeds run as replicas of vectorized in-process runs,
one per seed-block (all seeds by default). Tasks run on an executor (executors.py) with a
progress bar; their results are merged, per configuration, into summary.json's records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..algorithms import effective, get
from ..config import RunConfig
from ..provenance import stamp
from ..worlds import optimal_return, uniform_random_return
from ..worlds.registry import UnknownWorld, make
from ..worlds.tabular import TabularMDP, WorldError
from .executors import (
    Executor,
    ExecutorError,
    LocalExecutor,
    Task,
    TaskResult,
    plan_tasks,
    run_task,
)

TAIL = 1000  # "final per-episode regret" = mean over the last TAIL episodes
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class WorldSpec:
    """How a user's private world is made: a registered name, a horizon and its parameters
    (client-side knowledge only; `privrl worlds` lists the names)."""

    name: str = "riverswim"
    horizon: int | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def build(self) -> TabularMDP:
        """The world from the registry: riverswim, garnet, gymnasium:<EnvId>, FILE.npz."""
        try:
            return make(self.name, self.horizon, **self.params)
        except UnknownWorld as exc:
            raise WorldError(f"unknown world {self.name!r}: use {', '.join(exc.known)}") from None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (summary.json's "world")."""
        return {"name": self.name, "horizon": self.horizon, "params": dict(self.params)}


def _round(x: np.ndarray, digits: int = 6) -> list:
    """Compact JSON: round to `digits` decimals."""
    return np.round(x, digits).tolist()


def regret_summary(regret: np.ndarray, mdp: TabularMDP, tail: int = TAIL) -> dict[str, Any]:
    """Per-seed per-episode regret (R, K) and its summaries: cumulative and last-`tail` means."""
    tail = min(tail, regret.shape[1])
    cumulative = regret.sum(axis=1)
    last = regret[:, regret.shape[1] - tail :].mean(axis=1)
    n = regret.shape[0]
    return {
        "per_episode": [_round(r) for r in regret],
        "final_cumulative_mean": float(cumulative.mean()),
        "final_cumulative_std": float(cumulative.std(ddof=1)) if n > 1 else 0.0,
        "tail_per_episode_mean": float(last.mean()),
        "tail_per_episode_std": float(last.std(ddof=1)) if n > 1 else 0.0,
        "tail_episodes": int(tail),
        "random_policy_per_episode": float(optimal_return(mdp) - uniform_random_return(mdp)),
        "optimal_return": float(optimal_return(mdp)),
    }


def summarize(
    config: RunConfig, world: WorldSpec, blocks: Sequence[TaskResult], mdp: TabularMDP
) -> dict[str, Any]:
    """The JSON record of one configuration from its seed-blocks' results (in seed order).

    Seeds are independent replicas, so the blocks' regret rows and ledgers are what one run of
    all seeds gives; with several blocks, "policy_versions" is the largest block's count and
    "seed_blocks" lists each block's seeds, policy versions and seconds.
    """
    if any(b.ledger != blocks[0].ledger for b in blocks):
        raise ValueError(f"{label(config)}: seed-blocks report different ledgers")
    regret = np.vstack([b.regret for b in blocks])
    seconds = sum(b.seconds for b in blocks)
    record = {
        "label": label(config),
        "algorithm": get(config.algo).versioned_id(),
        "config": effective(config).model_dump(mode="json"),  # the schedule the runs used
        "world": world.to_dict(),
        "seeds": [s for b in blocks for s in b.seeds],
        "regret": regret_summary(regret, mdp),
        "ledger": blocks[0].ledger,
        "policy_versions": max(b.policy_versions for b in blocks),
        "policy_changes": [int(x) for b in blocks for x in b.policy_changes],  # per seed
        "seconds": seconds,
        "ms_per_episode": 1e3 * seconds / regret.shape[1],
    }
    if len(blocks) > 1:
        record["seed_blocks"] = [
            {"seeds": list(b.seeds), "policy_versions": b.policy_versions, "seconds": b.seconds}
            for b in blocks
        ]
    return record


def label(config: RunConfig) -> str:
    """A short human label: 'jdp eps=1 gaussian'."""
    pooled = " pooled" if (config.knobs or {}).get("pooled") else ""
    pooled += " (faithful)" if config.preset == "faithful" else ""
    if not config.boundary.private:
        return f"{config.boundary.label}{pooled}"
    return f"{config.privacy} eps={config.epsilon:g} {config.mechanism}{pooled}"


def run_exact(
    config: RunConfig, world: WorldSpec, seeds: Sequence[int]
) -> tuple[dict[str, Any], np.ndarray]:
    """One configuration in this process, one replica per seed: its record and exact regret."""
    result = run_task(Task((0, 0), config, world, tuple(int(s) for s in seeds)))
    return summarize(config, world, [result], world.build()), result.regret


def make_executor(
    name: str = "local",
    workers: int | None = None,
    address: str | None = None,
    runtime_env: dict[str, Any] | None = None,
) -> Executor:
    """The executor called `name`; "ray" needs the `privrl[ray]` extra (imported only here)."""
    if name == "local":
        return LocalExecutor(workers)
    if name != "ray":
        raise ExecutorError(f"unknown executor {name!r}: use {', '.join(EXECUTORS)}")
    try:
        from .ray_executor import RayExecutor  # imports ray
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "ray":
            raise
        raise ExecutorError("--executor ray needs Ray: pip install 'privrl[ray]'") from None
    return RayExecutor(address=address, num_cpus=workers, runtime_env=runtime_env)


def run_many(
    configs: Sequence[RunConfig],
    world: WorldSpec,
    seeds: Sequence[int],
    workers: int | None = None,
    show_progress: bool = True,
    executor: Executor | None = None,
    seeds_per_task: int | None = None,
    checkpoint: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every configuration x seed-block as a task on `executor` (local processes by
    default); one record per configuration, in order, whichever executor ran it.

    `checkpoint(records)` hears the finished configurations' records each time one finishes.
    """
    tasks = plan_tasks(configs, world, seeds, seeds_per_task)
    executor = executor or LocalExecutor(workers)
    mdp = world.build()
    records: dict[int, dict[str, Any]] = {}
    with executor:
        bar = tqdm(total=sum(t.replica_episodes for t in tasks), desc="replica-episodes",
                   unit="ep", unit_scale=True, disable=not show_progress)
        sweep = Sweep(tasks, bar)
        for key, result in executor.run(run_task, tasks, sweep.advance):
            c = key[0]
            if sweep.add(key, result) and sweep.complete(c):
                records[c] = summarize(configs[c], world, sweep.blocks(c), mdp)
                if checkpoint is not None:
                    checkpoint([records[i] for i in sorted(records)])
        bar.close()
    lost = [k for k in sweep.tasks if k not in sweep.results]
    if lost:
        raise ExecutorError(f"no result for task(s) {lost}: the sweep is incomplete")
    return [records[c] for c in range(len(configs))]


class Sweep:
    """A sweep's results keyed by (configuration, seed-block): each counted once, on the bar
    and in the summary, however often an executor delivers it."""

    def __init__(self, tasks: Sequence[Task], bar: tqdm) -> None:
        self.tasks = {t.key: t for t in tasks}
        self.results: dict[tuple[int, int], TaskResult] = {}
        self.shown = dict.fromkeys(self.tasks, 0)
        self.bar = bar

    def advance(self, key: Any, n: int) -> None:
        """Partial progress of a task, never past its share of the bar."""
        task = self.tasks[key]
        step = max(0, min(n, task.replica_episodes - self.shown[task.key]))
        self.shown[task.key] += step
        self.bar.update(step)

    def add(self, key: Any, result: TaskResult) -> bool:
        """Keep a task's first result (and complete its share of the bar); False if a repeat."""
        if key in self.results:
            return False
        self.results[key] = result
        self.advance(key, self.tasks[key].replica_episodes)
        self.bar.set_postfix_str(label(self.tasks[key].config))
        return True

    def complete(self, config_index: int) -> bool:
        """Whether every seed-block of a configuration has its result."""
        return all(k in self.results for k in self.tasks if k[0] == config_index)

    def blocks(self, config_index: int) -> list[TaskResult]:
        """A complete configuration's results in seed-block order."""
        return [self.results[k] for k in sorted(self.tasks) if k[0] == config_index]


def save(results: list[dict[str, Any]], out: Path) -> Path:
    """Write DIR/summary.json, stamped with the privrl version and commit that made it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    path.write_text(json.dumps({**stamp(), "results": results}))
    return path


def read_summary(path: Path) -> dict[str, Any]:
    """The JSON of a summary.json, or of the one in a directory."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    if not path.exists():
        raise FileNotFoundError(f"no summary.json at {path}")
    return json.loads(path.read_text())


def load(path: Path) -> list[dict[str, Any]]:
    """Read results from a summary.json or a directory holding one."""
    return read_summary(path)["results"]
