"""`privrl run --executor ray` on a local Ray instance (2 CPUs, started once for this module):
the same summary as local processes, number for number, even when a worker dies mid-task."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import ray
from privrl.client.cli import main
from privrl.lab.executors import Progress, TaskFn
from privrl.lab.experiments import run_many
from privrl.lab.ray_executor import RayExecutor
from support.sweeps import WORLD, small_configs, untimed

pytestmark = [pytest.mark.slow,  # a local Ray instance and its worker processes
              pytest.mark.xdist_group("ray")]  # one xdist worker, one Ray instance

SWEEP = ["run", "--privacy", "none", "jdp", "ldp", "--epsilon", "5", "--mechanism", "gaussian",
         "--episodes", "150", "--horizon", "10", "--seeds", "3", "--seed", "11",
         "--seeds-per-task", "2", "--quiet", "--force"]


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """A new local Ray instance with 2 CPUs for the whole module (never one already running on
    this machine), shut down at its end."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers lack tests/
    yield
    ray.shutdown()


def summary(out: Path) -> list[dict[str, Any]]:
    """summary.json's records without wall-clock fields."""
    return untimed(json.loads((out / "summary.json").read_text())["results"])


def test_ray_sweep_equals_the_local_sweep_number_for_number(tmp_path: Path) -> None:
    assert main([*SWEEP, "--out", str(tmp_path / "local")]) == 0
    assert main([*SWEEP, "--executor", "ray", "--out", str(tmp_path / "ray")]) == 0
    local, remote = summary(tmp_path / "local"), summary(tmp_path / "ray")
    assert [r["label"] for r in remote] == [
        "non-private", "jdp eps=5 gaussian", "ldp eps=5 gaussian"]
    for r in remote:
        assert r["seeds"] == [11, 12, 13]
        assert [b["seeds"] for b in r["seed_blocks"]] == [[11, 12], [13]]
        assert len(r["regret"]["per_episode"]) == 3
    assert remote == local
    assert ray.is_initialized()  # the executor joined this instance and left it running


def crash_once(fn: TaskFn, marker: str, task: Any, progress: Any = None) -> Any:
    """`fn(task)`, but the worker running task (1, 0) dies (os._exit) at its first progress
    report, once: the marker file records the crash. Every attempt is logged."""
    with open(marker + ".attempts", "a") as log:
        log.write(f"{task.key}\n")

    def die_midway(n: int) -> None:
        if task.key == (1, 0) and not os.path.exists(marker):
            Path(marker).write_text(str(os.getpid()))
            os._exit(1)

    return fn(task, die_midway)


class CrashingRay(RayExecutor):
    """The Ray executor, with a worker killed mid-task once."""

    def __init__(self, marker: Path) -> None:
        super().__init__()
        self.marker = str(marker)

    def run(self, fn: TaskFn, tasks: Sequence[Any], progress: Progress) -> Iterator[tuple]:
        yield from super().run(functools.partial(crash_once, fn, self.marker), tasks, progress)


def test_a_worker_killed_mid_task_is_retried_and_counted_once(tmp_path: Path) -> None:
    configs, seeds = small_configs(episodes=600), [5, 6, 7]  # progress reports at 500 and 600
    local = run_many(configs, WORLD, seeds, workers=1, show_progress=False, seeds_per_task=2)
    marker = tmp_path / "crashed"
    remote = run_many(configs, WORLD, seeds, show_progress=False, seeds_per_task=2,
                      executor=CrashingRay(marker))
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker died
    attempts = (tmp_path / "crashed.attempts").read_text().split("\n")
    assert sorted(a for a in attempts if a) == sorted(
        ["(0, 0)", "(0, 1)", "(1, 0)", "(1, 0)", "(1, 1)"])  # (1, 0) ran twice
    assert untimed(remote) == untimed(local)
    assert all(r["seeds"] == seeds for r in remote)


def test_the_frontier_runs_on_ray_and_records_its_cores(tmp_path: Path) -> None:
    """`privrl frontier --executor ray` joins the running instance: the study's runs finish
    there, and its invocation records the executor, the cluster's cores and its wall time."""
    args = ["frontier", "--cases", "lsvi-ucb-batched-jdp", "--presets", "practical",
            "--epsilon", "1000", "--episodes", "20", "--seeds", "2", "--no-ablation", "--quiet",
            "--executor", "ray", "--out", str(tmp_path)]
    assert main(args) == 0
    saved = json.loads((tmp_path / "frontier.json").read_text())
    (invocation,) = saved["invocations"]
    assert invocation["executor"] == "RayExecutor" and invocation["cores"] == 2
    assert invocation["done"] == invocation["runs"] == 1 and invocation["wall_seconds"] > 0
    assert all(r["status"] == "done" for r in saved["runs"].values())
