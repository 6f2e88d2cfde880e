"""Experiment manager: run configurations x seeds in parallel processes, save and summarize.

One configuration = one `RunConfig` whose seeds are run as replicas of one vectorized in-process
run. Several configurations run in parallel worker processes with a progress bar.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import Manager
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..config import RunConfig
from ..privacy.accountant import Ledger
from ..protocol import LedgerView
from ..run import run_in_process
from ..worlds import optimal_return, uniform_random_return
from ..worlds.registry import UnknownWorld, make
from ..worlds.tabular import TabularMDP, WorldError

TAIL = 1000  # "final per-episode regret" = mean over the last TAIL episodes
PROGRESS_EVERY = 500  # episodes between progress messages from a worker


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
    config: RunConfig,
    world: WorldSpec,
    regret: np.ndarray,
    ledger: Ledger,
    seconds: float,
    policy_versions: int,
    mdp: TabularMDP,
    seeds: Sequence[int],
    policy_changes: Sequence[int] = (),
) -> dict[str, Any]:
    """The JSON record of one configuration (all seeds)."""
    view = LedgerView.of("in-process", ledger, config.accounting_delta)
    return {
        "label": label(config),
        "config": config.model_dump(mode="json"),
        "world": world.to_dict(),
        "seeds": [int(x) for x in seeds],
        "regret": regret_summary(regret, mdp),
        "ledger": view.model_dump(mode="json", exclude={"run_id"}),
        "policy_versions": policy_versions,
        "policy_changes": [int(x) for x in policy_changes],  # per seed: policy switches
        "seconds": seconds,
        "ms_per_episode": 1e3 * seconds / regret.shape[1],
    }


def label(config: RunConfig) -> str:
    """A short human label: 'jdp eps=1 gaussian'."""
    pooled = " pooled" if (config.knobs or {}).get("pooled") else ""
    pooled += " (faithful)" if config.preset == "faithful" else ""
    if config.privacy == "none":
        return f"non-private{pooled}"
    return f"{config.privacy} eps={config.epsilon:g} {config.mechanism}{pooled}"


def run_one(
    config: RunConfig, world: WorldSpec, seeds: Sequence[int], progress: Any = None
) -> dict[str, Any]:
    """Run one configuration with one replica per seed (simulation: the seeds are recorded).

    `progress` (a queue, or None) receives the number of newly finished episodes now and then.
    """
    return run_exact(config, world, seeds, progress)[0]


def run_exact(
    config: RunConfig, world: WorldSpec, seeds: Sequence[int], progress: Any = None
) -> tuple[dict[str, Any], np.ndarray]:
    """`run_one`'s record, plus the exact (unrounded) regret (R, K)."""
    mdp = world.build()
    done = [0]

    def report(k: int) -> None:
        if progress is not None:
            progress.put(k - done[0])
            done[0] = k

    start = time.perf_counter()
    res = run_in_process(config, mdp, seeds, progress=report, progress_every=PROGRESS_EVERY)
    seconds = time.perf_counter() - start
    record = summarize(
        config, world, res.regret, res.ledger, seconds, res.policy_versions, mdp, seeds,
        res.policy_changes,
    )
    return record, res.regret


def run_many(
    configs: Sequence[RunConfig],
    world: WorldSpec,
    seeds: Sequence[int],
    workers: int | None = None,
    show_progress: bool = True,
) -> list[dict[str, Any]]:
    """Run every configuration (in parallel processes when there are several)."""
    workers = workers or min(len(configs), os.cpu_count() or 1)
    results: list[dict[str, Any] | None] = [None] * len(configs)
    total = sum(c.episodes for c in configs)
    bar = tqdm(total=total, desc="episodes", unit="ep", unit_scale=True, disable=not show_progress)
    if workers <= 1 or len(configs) == 1:
        for i, cfg in enumerate(configs):
            queue: Any = _BarQueue(bar)
            results[i] = run_one(cfg, world, seeds, queue)
    else:
        with Manager() as manager, ProcessPoolExecutor(max_workers=workers) as pool:
            queue = manager.Queue()
            futures = {
                pool.submit(run_one, c, world, list(seeds), queue): i for i, c in enumerate(configs)
            }
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                while not queue.empty():
                    bar.update(queue.get())
                for fut in finished:
                    results[futures[fut]] = fut.result()
                    bar.set_postfix_str(str(results[futures[fut]]["label"]))
    bar.close()
    return [r for r in results if r is not None]


class _BarQueue:
    """Queue-like adapter that advances a progress bar directly (single-process runs)."""

    def __init__(self, bar: tqdm) -> None:
        self.bar = bar

    def put(self, n: int) -> None:
        self.bar.update(n)


def save(results: list[dict[str, Any]], out: Path) -> Path:
    """Write DIR/summary.json."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    path.write_text(json.dumps({"results": results}))
    return path


def load(path: Path) -> list[dict[str, Any]]:
    """Read results from a summary.json or a directory holding one."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    if not path.exists():
        raise FileNotFoundError(f"no summary.json at {path}")
    return json.loads(path.read_text())["results"]
