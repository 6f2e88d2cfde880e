"""Sweeps as tasks on an executor: seed-blocks keep every seed's numbers, a result delivered twice
counts once, a lost task is an error, and the local executor never imports Ray."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from privrl.lab.executors import (
    Executor,
    ExecutorError,
    LocalExecutor,
    Progress,
    TaskFn,
    plan_tasks,
    run_task,
)
from privrl.lab.experiments import Sweep, run_many
from support.client import one_line_error, run_cli
from support.sweeps import WORLD, small_configs, untimed
from tqdm import tqdm


class Repeating(Executor):
    """An executor that delivers every result twice, the second round in reverse order."""

    def run(self, fn: TaskFn, tasks: Sequence[Any], progress: Progress) -> Iterator[tuple]:
        results = list(LocalExecutor(1).run(fn, tasks, progress))
        yield from results
        yield from reversed(results)


class Dropping(Executor):
    """An executor that loses its last task."""

    def run(self, fn: TaskFn, tasks: Sequence[Any], progress: Progress) -> Iterator[tuple]:
        yield from LocalExecutor(1).run(fn, tasks[:-1], progress)


def test_plan_tasks_cuts_every_configuration_into_seed_blocks() -> None:
    tasks = plan_tasks(small_configs(), WORLD, [7, 8, 9, 10, 11], seeds_per_task=2)
    assert [t.key for t in tasks] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [t.seeds for t in tasks[:3]] == [(7, 8), (9, 10), (11,)]
    assert [t.replica_episodes for t in tasks[:3]] == [240, 240, 120]
    assert [t.seeds for t in plan_tasks(small_configs(), WORLD, [7, 8, 9])] == [(7, 8, 9)] * 2


@pytest.mark.slow
def test_seed_blocks_give_every_seed_the_numbers_of_one_run() -> None:
    seeds = [3, 4, 5]
    whole = run_many(small_configs(), WORLD, seeds, workers=1, show_progress=False)
    split = run_many(small_configs(), WORLD, seeds, workers=2, show_progress=False,
                     seeds_per_task=1)
    for a, b in zip(untimed(whole), untimed(split), strict=True):
        assert [blk["seeds"] for blk in b.pop("seed_blocks")] == [[3], [4], [5]]
        a.pop("policy_versions"), b.pop("policy_versions")  # counted per vectorized run
        assert a == b
        assert "seed_blocks" not in a


@pytest.mark.slow
def test_a_result_delivered_twice_counts_once() -> None:
    configs, seeds = small_configs(), [1, 2]
    local = run_many(configs, WORLD, seeds, show_progress=False, seeds_per_task=1)
    twice = run_many(configs, WORLD, seeds, show_progress=False, seeds_per_task=1,
                     executor=Repeating())
    assert untimed(twice) == untimed(local)
    assert all(r["seeds"] == seeds for r in twice)

    tasks = plan_tasks(configs, WORLD, seeds, seeds_per_task=1)
    total = sum(t.replica_episodes for t in tasks)
    bar = tqdm(total=total, file=io.StringIO())
    sweep = Sweep(tasks, bar)
    result = run_task(tasks[0])
    sweep.advance(tasks[0].key, 100)  # partial progress, then the result twice
    assert sweep.add(tasks[0].key, result) is True
    assert sweep.add(tasks[0].key, result) is False
    sweep.advance(tasks[0].key, 50)  # late progress of a finished task: nothing
    assert bar.n == tasks[0].replica_episodes


def test_a_lost_task_is_an_error_not_a_shorter_summary() -> None:
    saved: list[list[str]] = []
    with pytest.raises(ExecutorError, match=r"no result for task\(s\) \[\(1, 1\)\]"):
        run_many(small_configs(), WORLD, [1, 2], show_progress=False, seeds_per_task=1,
                 executor=Dropping(), checkpoint=lambda done: saved.append(
                     [r["label"] for r in done]))
    assert saved == [["non-private"]]  # what finished is checkpointed, the rest is not


@pytest.mark.slow
def test_each_finished_configuration_is_checkpointed_in_order() -> None:
    saved: list[list[dict[str, Any]]] = []
    records = run_many(small_configs(), WORLD, [1, 2], workers=2, show_progress=False,
                       seeds_per_task=1, checkpoint=saved.append)
    assert [len(done) for done in saved] == [1, 2]
    assert saved[-1] == records
    assert saved[0][0] in records


@pytest.mark.slow
def test_the_local_executor_never_imports_ray(tmp_path: Path) -> None:
    code = (
        "import sys, privrl, privrl.lab\n"
        "from privrl.client.cli import main\n"
        f"rc = main(['run', '--privacy', 'none', 'jdp', '--episodes', '50', '--seeds', '2',"
        f" '--workers', '2', '--quiet', '--out', {str(tmp_path)!r}])\n"
        "assert rc == 0, rc\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(json.loads((tmp_path / "summary.json").read_text())["results"]) == 2


@pytest.mark.slow
def test_ray_missing_is_a_one_line_error(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # `import ray` -> ModuleNotFoundError\n"
        "from privrl.client.cli import main\n"
        f"sys.exit(main(['run', '--episodes', '5', '--seeds', '1', '--executor', 'ray',"
        f" '--out', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "privrl: error: --executor ray needs Ray: pip install 'privrl[ray]'\n"
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.slow
def test_ray_options_without_the_ray_executor_are_refused(tmp_path: Path) -> None:
    done = run_cli("run", "--episodes", "5", "--ray-address", "auto", "--out", str(tmp_path))
    one_line_error(done, r"--ray-address and --ray-runtime-env need --executor ray")
    done = run_cli("run", "--executor", "ray", "--ray-runtime-env", "[1]", "--out", str(tmp_path))
    one_line_error(done, r"--ray-runtime-env: expected a JSON object, got '\[1\]'")


@pytest.mark.slow
def test_a_ray_address_nobody_answers_is_a_one_line_error(tmp_path: Path) -> None:
    done = run_cli("run", "--episodes", "5", "--executor", "ray", "--ray-address",
                   "127.0.0.1:1", "--out", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "privrl: error: no Ray cluster answers at 127.0.0.1:1: ")
    assert "Traceback" not in done.stderr
