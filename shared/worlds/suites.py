"""Named suites of worlds, each split like data into *tuning* and *evaluation* worlds.

Presets, knobs, mechanisms and counters are chosen on a suite's tuning worlds; results are
reported on its evaluation worlds. The split is fixed here, before anything is measured on it,
by a stated rule:

* a world something was already tuned or compared on before the suite existed (`used` says
  what) is a tuning world;
* the other worlds of each *stratum* (one family at one size) are ordered by the SHA-256 of
  `"<suite>/<label>"` and alternate evaluation, tuning, evaluation, ... (so a stratum of one new
  world is evaluation, a stratum of two has one of each).

`privrl worlds --suite NAME` lists a suite with each world's split and size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .registry import make
from .tabular import TabularMDP, WorldError

Split = Literal["tuning", "evaluation"]
SPLITS: tuple[Split, ...] = ("tuning", "evaluation")


@dataclass(frozen=True)
class SuiteWorld:
    """A registered world with its parameters (and horizon, else the world's default)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    horizon: int | None = None
    stratum: str = ""  # the family and size the split alternates within
    used: str = ""  # what was tuned or compared on it before the suite (then: a tuning world)

    @property
    def label(self) -> str:
        """'gridworld(size=4, slip=0.2)', with ', H=40' when the horizon is not the default."""
        parts = [f"{k}={v}" for k, v in self.params.items()]
        if self.horizon is not None:
            parts.append(f"H={self.horizon}")
        return f"{self.name}({', '.join(parts)})" if parts else self.name

    def build(self) -> TabularMDP:
        """The world (a TabularMDP: every suite world is one)."""
        world = make(self.name, self.horizon, **self.params)
        if not isinstance(world, TabularMDP):
            raise WorldError(f"suite world {self.label} is not a tabular MDP")
        return world


@dataclass(frozen=True)
class Suite:
    """A named list of worlds and its fixed split (module docstring)."""

    name: str
    description: str
    worlds: tuple[SuiteWorld, ...]

    def __post_init__(self) -> None:
        """Refuse two worlds with one label (the split and the reports key worlds by label)."""
        labels = [w.label for w in self.worlds]
        if len(set(labels)) != len(labels):
            raise WorldError(f"suite {self.name!r} lists a world twice")

    def split_of(self, world: SuiteWorld) -> Split:
        """Whether `world` is a tuning or an evaluation world."""
        return self.split()[world.label]

    def split(self) -> dict[str, Split]:
        """Each world's label and split, in the suite's order."""
        out: dict[str, Split] = {w.label: "tuning" for w in self.worlds if w.used}
        strata: dict[str, list[SuiteWorld]] = {}
        for w in self.worlds:
            if not w.used:
                strata.setdefault(w.stratum, []).append(w)
        for members in strata.values():
            ordered = sorted(members, key=lambda w: self.digest(w))
            for i, w in enumerate(ordered):
                out[w.label] = SPLITS[1 - i % 2]  # evaluation first
        return {w.label: out[w.label] for w in self.worlds}

    def digest(self, world: SuiteWorld) -> str:
        """The SHA-256 the split orders a stratum by."""
        return hashlib.sha256(f"{self.name}/{world.label}".encode()).hexdigest()

    def worlds_in(self, split: Split) -> tuple[SuiteWorld, ...]:
        """The suite's worlds of one split, in the suite's order."""
        if split not in SPLITS:
            raise WorldError(f"a split is one of {', '.join(SPLITS)}, got {split!r}")
        of = self.split()
        return tuple(w for w in self.worlds if of[w.label] == split)


def _seeds(name: str, stratum: str, seeds: tuple[int, ...], used: str = "",
           **params: Any) -> tuple[SuiteWorld, ...]:
    """One world per seed (`params` shared; a `feature_seed` of None follows the seed)."""
    out = []
    for seed in seeds:
        p = {k: (seed if v is None else v) for k, v in params.items()}
        out.append(SuiteWorld(name, {**p, "seed": seed}, stratum=stratum, used=used))
    return tuple(out)


PRESETS_TUNED = "the presets' default world (presets and knobs were chosen on it)"
HELD_OUT = "measured as a held-out world (scripts/frontier/held_out.py)"
FRESH = (1001, 1002, 1003, 1004, 1005, 1006)  # world seeds nothing ran on before the suite

TABULAR = Suite(
    "tabular",
    "tabular worlds from 50 to 16,384 (s, a, s') cells: RiverSwim, Strens's chains, gridworlds"
    " with and without slip, FrozenLake 4x4 and 8x8, random Garnet MDPs",
    (
        SuiteWorld("riverswim", stratum="riverswim", used=PRESETS_TUNED),
        SuiteWorld("riverswim", {"n_states": 12}, 40, stratum="riverswim"),
        SuiteWorld("strens-chain", {"n_states": 5, "slip": 0.2}, 20, stratum="chain"),
        SuiteWorld("strens-chain", {"n_states": 10, "slip": 0.1}, 20, stratum="chain"),
        SuiteWorld("strens-chain", {"n_states": 20, "slip": 0.05}, 40, stratum="chain"),
        *(SuiteWorld("gridworld", {"size": n, "slip": slip}, stratum=f"gridworld-{n}")
          for n in (3, 4, 5) for slip in (0.0, 0.2)),
        SuiteWorld("frozen-lake", stratum="frozen-lake"),
        SuiteWorld("frozen-lake-8x8", stratum="frozen-lake"),
        *(SuiteWorld("garnet", {"n_states": s, "n_actions": a, "seed": seed},
                     stratum=f"garnet-{s}x{a}")
          for s, a in ((5, 2), (10, 3), (20, 4), (30, 5)) for seed in (1, 2)),
    ),
)

LINEAR = Suite(
    "linear",
    "linear-mixture worlds (LM-Hard, zhou-mix) and linear MDPs (lin-cube, d = 5 and 6) on many"
    " world seeds; each algorithm runs on the worlds of its model class",
    (
        *_seeds("lm-hard", "lm-hard", (0,), PRESETS_TUNED),
        *_seeds("lm-hard", "lm-hard", (101, 102, 103), HELD_OUT),
        *_seeds("lm-hard", "lm-hard", FRESH),
        *_seeds("zhou-mix", "zhou-mix", (0,), PRESETS_TUNED, feature_seed=None),
        *_seeds("zhou-mix", "zhou-mix", (101, 102, 103), HELD_OUT, feature_seed=None),
        *_seeds("zhou-mix", "zhou-mix", FRESH, feature_seed=None),
        *_seeds("lin-cube", "lin-cube-5", (0,), PRESETS_TUNED, d=5),
        *_seeds("lin-cube", "lin-cube-5", (101, 102, 103), HELD_OUT, d=5),
        *_seeds("lin-cube", "lin-cube-5", FRESH, d=5),
        *_seeds("lin-cube", "lin-cube-6", FRESH[:4], d=6),
    ),
)

SUITES: dict[str, Suite] = {s.name: s for s in (TABULAR, LINEAR)}


def suite_named(name: str) -> Suite:
    """The suite called `name` (WorldError naming the suites otherwise)."""
    if name not in SUITES:
        raise WorldError(f"unknown suite {name!r}: use {', '.join(SUITES)}")
    return SUITES[name]
