"""Where a sweep's tasks run: local processes (the default) or a Ray cluster (`privrl[ray]`).

A sweep is cut into tasks, one per (configuration, seed-block); an executor runs `fn(task,
progress)` for every task and yields `(task.key, result)` as tasks complete, in any order. The
sweep (experiments.run_many) keys results by task, drops duplicates and merges the blocks, so
every executor gives the same numbers. Ray is imported only by
`privrl.lab.experiments.make_executor("ray")`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import Manager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import RunConfig
from ..protocol import LedgerView
from ..run import run_in_process

if TYPE_CHECKING:
    from .experiments import WorldSpec

PROGRESS_EVERY = 500  # episodes between progress messages from a task

Progress = Callable[[Hashable, int], None]  # (task key, newly finished replica-episodes)
TaskFn = Callable[..., Any]  # fn(task, progress=None) -> result; picklable (module level)


class ExecutorError(RuntimeError):
    """An executor cannot run (Ray missing, a cluster out of reach, a task lost): one line."""


@dataclass(frozen=True)
class Task:
    """One configuration run on one block of seeds (one replica per seed)."""

    key: tuple[int, int]  # (configuration index, seed-block index) in the sweep
    config: RunConfig
    world: WorldSpec
    seeds: tuple[int, ...]

    @property
    def replica_episodes(self) -> int:
        """Episodes times seeds: the task's share of the progress bar."""
        return self.config.episodes * len(self.seeds)


@dataclass(frozen=True)
class TaskResult:
    """What a task sends back: exact regret (R, K), the ledger's JSON view and its timing."""

    seeds: tuple[int, ...]
    regret: np.ndarray
    ledger: dict[str, Any]
    policy_versions: int
    seconds: float
    policy_changes: tuple[int, ...] = ()  # per seed: policy switches


def plan_tasks(
    configs: Sequence[RunConfig],
    world: WorldSpec,
    seeds: Sequence[int],
    seeds_per_task: int | None = None,
) -> list[Task]:
    """Every (configuration, seed-block): consecutive blocks of `seeds_per_task` seeds (all)."""
    size = seeds_per_task or len(seeds)
    blocks = [tuple(int(s) for s in seeds[i : i + size]) for i in range(0, len(seeds), size)]
    return [Task((c, b), cfg, world, block)
            for c, cfg in enumerate(configs) for b, block in enumerate(blocks)]


def run_task(task: Task, progress: Callable[[int], None] | None = None) -> TaskResult:
    """Run one task in this process; `progress(n)` gets newly finished replica-episodes."""
    mdp = task.world.build()
    done = [0]

    def report(k: int) -> None:
        if progress is not None:
            progress((k - done[0]) * len(task.seeds))
            done[0] = k

    start = time.perf_counter()
    res = run_in_process(task.config, mdp, task.seeds, report, PROGRESS_EVERY)
    seconds = time.perf_counter() - start
    view = LedgerView.of("in-process", res.ledger, task.config.accounting_delta)
    return TaskResult(task.seeds, res.regret, view.model_dump(mode="json", exclude={"run_id"}),
                      res.policy_versions, seconds, tuple(int(x) for x in res.policy_changes))


class Executor:
    """Runs tasks, yielding `(task.key, fn(task))` as each completes; a `with` block holds
    whatever it runs on (a cluster connection) across runs."""

    def __enter__(self) -> Executor:
        """Acquire what the tasks run on (nothing for local processes)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Release it."""
        return None

    def run(self, fn: TaskFn, tasks: Sequence[Any], progress: Progress) -> Iterator[tuple]:
        """Every task's result, in completion order; `progress` may hear of partial work."""
        raise NotImplementedError

    def cores(self) -> int:
        """The cores the tasks run on (recorded beside a study's wall time)."""
        raise NotImplementedError


class LocalExecutor(Executor):
    """Local processes (one per task, at most `workers`); in this process when one suffices."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def cores(self) -> int:
        """The worker processes' count, at most this machine's CPUs."""
        return min(self.workers or os.cpu_count() or 1, os.cpu_count() or 1)

    def run(self, fn: TaskFn, tasks: Sequence[Any], progress: Progress) -> Iterator[tuple]:
        """Run the tasks, streaming each one's progress and result."""
        workers = self.workers or min(len(tasks), os.cpu_count() or 1)
        if workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                yield task.key, fn(task, lambda n, key=task.key: progress(key, n))
            return
        with Manager() as manager, ProcessPoolExecutor(max_workers=workers) as pool:
            queue = manager.Queue()
            futures = {pool.submit(_queued, fn, task, queue): task.key for task in tasks}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                while not queue.empty():
                    progress(*queue.get())
                for fut in finished:
                    yield futures[fut], fut.result()


def _queued(fn: TaskFn, task: Any, queue: Any) -> Any:
    """`fn(task)` in a worker process, its progress sent to the parent as (key, n)."""
    return fn(task, lambda n: queue.put((task.key, n)))
