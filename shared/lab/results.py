"""The Python API: `privrl.simulate(...)` runs one configuration in-process over several seeds.

    import privrl
    res = privrl.simulate("dp-ucbvi", world="riverswim", epsilon=1.0,
                          mechanism="gaussian", episodes=20_000, seeds=5)
    res.regret      # (seeds, K) exact per-episode regret
    res.ledger      # what was spent: epsilon, delta, rho, and the charges by mechanism
    res.plot()      # matplotlib Figure, mean +- band
    res.save("out") # out/summary.json, the file `privrl run` writes; Results.load reads both

Seeds here are simulation seeds: nothing is published, and `summary.json` records them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from privrl import trust

from ..algorithms import registry
from ..config import RunConfig
from ..protocol import LedgerView
from ..worlds.model_spec import model_spec_of
from .experiments import WorldSpec, load, run_exact, save

if TYPE_CHECKING:  # matplotlib is imported when a figure is made: every CLI process imports this
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Results:
    """One configuration run over several seeds: exact regret, the ledger and the raw record."""

    record: dict[str, Any]  # one entry of summary.json's "results"
    regret: np.ndarray  # (seeds, K)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Results:
        """From one summary.json record (regret as saved: rounded to 1e-6)."""
        regret = np.asarray(record["regret"]["per_episode"], dtype=np.float64)
        return cls(dict(record), regret)

    @property
    def config(self) -> RunConfig:
        """The public run configuration."""
        return RunConfig.model_validate(self.record["config"])

    @property
    def seeds(self) -> list[int]:
        """The simulation seeds, one replica each."""
        return list(self.record["seeds"])

    @property
    def ledger(self) -> LedgerView:
        """Privacy spent per user (epsilon, delta, rho) and the charges by mechanism."""
        return LedgerView.model_validate({"run_id": "in-process", **self.record["ledger"]})

    @property
    def label(self) -> str:
        """A short human label, e.g. 'jdp eps=1 gaussian'."""
        return str(self.record["label"])

    @property
    def cumulative(self) -> np.ndarray:
        """Cumulative regret per seed (seeds, K)."""
        return np.cumsum(self.regret, axis=1)

    def plot(self, title: str = "") -> Figure:
        """Cumulative regret, mean +- 1 std over seeds (a Figure: display it or `.savefig`)."""
        from .plots import cumulative_figure

        return cumulative_figure([self.record], title)

    def save(self, out: str | Path) -> Path:
        """Write OUT/summary.json (the format `privrl run` writes and `privrl plot` reads)."""
        return save([self.record], Path(out))

    @classmethod
    def load(cls, path: str | Path) -> list[Results]:
        """Every configuration in a summary.json (or a directory holding one)."""
        return [cls.from_record(r) for r in load(Path(path))]

    def __repr__(self) -> str:
        r = self.record["regret"]
        return (f"Results({self.label!r}, seeds={len(self.seeds)}, K={self.regret.shape[1]},"
                f" cumulative regret {r['final_cumulative_mean']:.1f}"
                f" ± {r['final_cumulative_std']:.1f}, epsilon spent {self.ledger.epsilon})")


def simulate(
    algorithm: str = "dp-ucbvi",
    world: str | None = None,
    *,
    privacy: str = trust.DEFAULT,
    epsilon: float = 1.0,
    delta: float | None = None,
    mechanism: str | None = None,
    episodes: int = 10_000,
    seeds: int = 5,
    seed: int = 0,
    horizon: int | None = None,
    preset: str = "practical",
    knobs: Mapping[str, Any] | None = None,
    world_params: Mapping[str, Any] | None = None,
    **options: Any,
) -> Results:
    """Run `algorithm` on `world` for `episodes` episodes and `seeds` seeds (seed, seed+1, ...).

    `mechanism` defaults to the algorithm's (`privrl algorithms` lists it); `delta` to the
    population rule's for the Gaussian mechanism (the largest of 1e-n, 2e-n, 5e-n at most
    1/(10 K): `privrl.config.population_delta`) and 0 otherwise. `world_params` go to the
    world (e.g. n_states for garnet, is_slippery for gymnasium:FrozenLake-v1); other keyword
    options go to the run configuration (e.g. tree_smoothing, noise, beta). `world` defaults to
    the algorithm's own world; a linear-mixture world's public model goes into the configuration.
    """
    if world is None:
        world = registry.get(algorithm).default_world
    spec = WorldSpec(world, horizon, dict(world_params or {}))
    mdp = spec.build()
    given: dict[str, Any] = {} if mechanism is None else {"mechanism": mechanism}
    if delta is not None:
        given["delta"] = delta
    if not trust.get(privacy).private:
        given["delta"] = 0.0
    config = registry.configure(dict(
        algo=algorithm, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, model=model_spec_of(mdp),
        episodes=episodes, privacy=privacy, epsilon=epsilon, preset=preset, **given,
        knobs=dict(knobs) if knobs else None, **options,
    ))
    world_spec = WorldSpec(world, mdp.H, spec.params)
    record, regret = run_exact(config, world_spec, list(range(seed, seed + seeds)))
    return Results(json.loads(json.dumps(record)), regret)
