"""The plug-in contract every privrl algorithm implements.

An algorithm is four small steps (Flower's `Strategy` crossed with TF-Privacy's `DPQuery`):

  configure  `Learner.plan`: billboard -> the policy message the next users are sent
  user step  `Algorithm.user_statistics`: one trajectory -> clean statistics (the user's process;
             in LDP the generic local randomizer then noises every released family)
  accumulate the privacy layer (identity, central tree counters or LDP aggregator) turns
             contributions into the billboard, calibrated from `Algorithm.families()`
  plan       `Learner.plans_at` says when the billboard becomes a new policy

The server, the users, the in-process runner and the CLI are written against this module only:
adding an algorithm is one folder under `algorithms/` and one `register(...)` line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..stats import Stats
from ..wire import error_text
from ..worlds.rollout import Trajectories

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..privacy.calibration import Calibration

PRIVACY_MODES = ("none", "jdp", "ldp")
# What users are sent: "actions" (R, H, S) int is always there; an algorithm may add arrays.
PolicyMessage = dict[str, np.ndarray]


@dataclass(frozen=True)
class Family:
    """A statistic family an algorithm releases: one user's contribution has `shape`, entries in
    [0, clean_max], and replace-one-user sensitivities `l1`, `l2` (the calibration and the ledger
    read these; nobody re-derives them)."""

    name: str
    shape: tuple[int, ...]
    l1: float
    l2: float
    clean_max: float = 1.0


class NoKnobs(BaseModel):
    """The knobs of an algorithm that has none."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Learner(ABC):
    """Plans from the billboard only (plus public facts): this is what makes JDP hold."""

    def plans_at(self, reported: int, last_planned: int) -> bool:
        """Whether to plan now that `reported` reports are in (last plan: at `last_planned`).

        Default: at every new report. Batched or switching algorithms override this.
        """
        return reported != last_planned

    @abstractmethod
    def plan(self, billboard: Stats, reported: int) -> PolicyMessage:
        """The policy message for every replica (arrays with leading axis R)."""

    def radius(self, reported: int) -> float:
        """The public error radius of the release the learner plans from (0 if it uses none)."""
        return 0.0


class Algorithm(ABC):
    """One registered algorithm, bound to one public run configuration."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    privacy_modes: ClassVar[tuple[str, ...]] = PRIVACY_MODES
    knobs_model: ClassVar[type[BaseModel]] = NoKnobs
    presets: ClassVar[Mapping[str, BaseModel]] = {"faithful": NoKnobs(), "practical": NoKnobs()}
    default_world: ClassVar[str] = "riverswim"

    def __init__(self, config: RunConfig) -> None:
        """Bind to `config`; refuse (ValueError) a privacy mode or knobs this algorithm lacks."""
        self.check_mode(config.privacy)
        self.config = config
        self.knobs: Any = self.resolve_knobs(config.preset, config.knobs)

    @classmethod
    def check_mode(cls, privacy: str) -> None:
        """Refuse a privacy mode this algorithm does not support, saying which it does."""
        if privacy not in cls.privacy_modes:
            raise ValueError(
                f"algorithm {cls.name!r} does not support privacy={privacy!r}; it supports"
                f" {', '.join(cls.privacy_modes)}"
            )

    @classmethod
    def resolve_knobs(cls, preset: str, overrides: Mapping[str, Any] | None) -> BaseModel:
        """The preset's knobs with explicit overrides applied (validated by `knobs_model`)."""
        if preset not in cls.presets:
            raise ValueError(f"algorithm {cls.name!r} has presets {sorted(cls.presets)}")
        base = cls.presets[preset].model_dump()
        try:
            return cls.knobs_model.model_validate({**base, **dict(overrides or {})})
        except ValidationError as exc:
            parts = [f"{'.'.join(map(str, e['loc']))}: {error_text(e)}" for e in exc.errors()]
            raise ValueError(f"knobs of {cls.name!r}: " + "; ".join(parts)) from None

    @abstractmethod
    def families(self) -> tuple[Family, ...]:
        """The released statistic families (none: nothing is released, nothing is spent)."""

    @abstractmethod
    def user_statistics(self, trajectories: Trajectories, message: PolicyMessage) -> Stats:
        """What users compute from their own trajectories, played under `message`: clean
        contributions of the released families, one row each."""

    @abstractmethod
    def learner(self, calibration: Calibration, seeds: list[int]) -> Learner:
        """A fresh learner for replicas seeded by the server's secret `seeds`."""

    def report_kind(self, privacy: str) -> str:
        """The report kind users send (`privrl.reports.KINDS`): locally randomized arrays in
        LDP, else raw trajectories for the trusted curator."""
        return "noisy" if privacy == "ldp" else "trajectory"

    def postprocess(self, release: Stats) -> Stats:
        """Statistics derived from the release for free (post-processing); default: none."""
        return release
