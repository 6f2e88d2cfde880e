"""The plug-in contract every privrl algorithm implements.

An algorithm is four small steps (Flower's `Strategy` crossed with TF-Privacy's `DPQuery`):

  configure  `Learner.plan`: billboard -> the policy message the next users are sent
  user step  `Algorithm.user_statistics`: one trajectory -> clean statistics (the user's process;
             in LDP the generic local randomizer then noises every released family)
  accumulate the privacy layer (identity, central tree counters or LDP aggregator) turns
             contributions into the billboard, calibrated from `Algorithm.families()`
  plan       `Learner.plans_at` says when the billboard becomes a new policy

Three optional hooks let a workload other than learning use the same server and users (policy
evaluation: users post first-visit returns, the server releases one smoothed-sensitivity
estimate): `play` (how a user plays a message in its world), `check_world` (which worlds can),
and `privatizer` (an algorithm-specific trusted release instead of the generic privacy layer).

`privatizer` is also the home of a **trusted store of raw history**: an algorithm whose release
must re-read past raw data (LSVI-UCB re-evaluates every stored next state with each new value
function) keeps it inside its privatizer, which lives in the central curator (JDP; such an
algorithm refuses LDP, naming why in `unsupported_reasons`). `user_statistics` then returns the
raw per-episode data the store keeps (computed on the server from the trusted report); the
learner still sees only what the privatizer releases.

The server, the users, the in-process runner and the CLI are written against this module only:
adding an algorithm is one folder under `algorithms/` and one `register(...)` line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from .. import trust
from ..privacy.calibration import Family, calibrate
from ..privacy.schedules import parse_schedule
from ..stats import Stats
from ..wire import error_text
from ..worlds.first_visit import FirstVisits
from ..worlds.model_spec import model_spec_of
from ..worlds.rollout import Trajectories, draw_uniforms, rollout, rollout_stochastic

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..privacy.calibration import Calibration
    from ..privacy.privatizers import Privatizer
    from ..trust.base import TrustBoundary

# What users are sent: "actions" (R, H, S) int is always there; an algorithm may add float
# arrays (declared by `Algorithm.message_arrays`), e.g. value tables users compute features from.
PolicyMessage = dict[str, np.ndarray]
# What users' play produces: raw trajectories, or (policy evaluation) first-visit returns.
Played = Trajectories | FirstVisits


def check_model_sizes(config: RunConfig, have: tuple[int, int, int]) -> None:
    """Refuse (ValueError) a public model whose (S, A, H) is not the run's model class."""
    want = (config.n_states, config.n_actions, config.horizon)
    if have != want:
        name = config.model.name if config.model is not None else "?"
        raise ValueError(f"the public model {name!r} has (S, A, H) = {have}, the run is"
                         f" configured for {want}")


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
    # Bumped whenever the same configuration gives other numbers (a preset's values, a learner's
    # rule): results name `versioned_id()` (gymnasium's `name-vN`), and studies re-run.
    version: ClassVar[int] = 1
    summary: ClassVar[str] = ""
    knobs_model: ClassVar[type[BaseModel]] = NoKnobs
    presets: ClassVar[Mapping[str, BaseModel]] = {"faithful": NoKnobs(), "practical": NoKnobs()}
    default_world: ClassVar[str] = "riverswim"
    default_mechanism: ClassVar[str] = "laplace"
    # Under integer noise, users report Bernoulli(r) rewards instead of r (unbiased), so that
    # families that sum rewards stay integers (`privrl.privacy.grid.bernoulli_rewards`).
    integer_rewards: ClassVar[bool] = False
    # What a user reports to a curator that sees raw data (`privrl.reports.ReportKind`); a trust
    # boundary may turn it into another kind (`TrustBoundary.report_kind`).
    raw_report_kind: ClassVar[str] = "trajectory"
    # The JDP release schedule and counter of the practical preset (the best measured); the
    # faithful preset releases every episode from the binary tree, as the papers do. The counter
    # is (kind, bands); a matrix counter needs Gaussian seeded integer noise, and a run without
    # it takes the smoothed tree.
    practical_schedule: ClassVar[str] = "every"
    practical_counter: ClassVar[tuple[str, int | None]] = ("smoothed", None)

    @classmethod
    def versioned_id(cls) -> str:
        """`name-vN`: the name and the version whose numbers a result holds."""
        return f"{cls.name}-v{cls.version}"

    def __init__(self, config: RunConfig) -> None:
        """Bind to `config`; refuse (ValueError) a privacy mode, knobs or a schedule this
        algorithm lacks. `self.config` is the configuration runs use: the preset's schedule
        filled in."""
        self.check_mode(config.privacy)
        config.boundary.check_config(config)
        self.check_schedule(config)
        self.check_counter(config)
        self.config = self.effective_config(config)
        self.knobs: Any = self.resolve_knobs(config.preset, config.knobs)

    @classmethod
    def preset_schedule(cls, preset: str, privacy: str, episodes: int) -> str:
        """The release schedule `preset` gives a run: the practical one under JDP when it
        releases before episode K (a run that never learns is no preset), else 'every'."""
        boundary = trust.get(privacy)
        if (own := boundary.default_schedule(episodes)) is not None:
            return own
        if preset != "practical" or not boundary.counters:
            return "every"
        if parse_schedule(cls.practical_schedule).releases(episodes - 1) < 1:
            return "every"
        return cls.practical_schedule

    @classmethod
    def check_schedule(cls, config: RunConfig) -> None:
        """Refuse a release schedule where the boundary has no central counters: it shapes
        their releases only."""
        if (not config.boundary.counters and not config.boundary.cohorts
                and config.schedule not in (None, "every")):
            raise ValueError("a release schedule shapes JDP's central counters: with privacy"
                             f" {config.privacy!r} leave schedule at 'every'")

    @classmethod
    def check_counter(cls, config: RunConfig) -> None:
        """Refuse the matrix counter outside JDP: counters release JDP's central sums only, so
        elsewhere it would be a setting that does nothing."""
        if not config.boundary.counters and config.counter == "matrix":
            raise ValueError(config.matrix_refusal())

    @classmethod
    def preset_counter(cls, config: RunConfig) -> tuple[str, int | None]:
        """The counter (kind, bands) `config`'s preset gives it: the binary tree in faithful;
        in practical, the algorithm's measured one where the run's noise allows it, else the
        smoothed tree."""
        if config.preset != "practical":
            return "tree", None
        kind, bands = cls.practical_counter
        if kind == "matrix" and config.matrix_refusal():
            return "smoothed", None
        return kind, bands

    @classmethod
    def effective_config(cls, config: RunConfig) -> RunConfig:
        """`config` with a concrete schedule and counter: the user's where given, else the
        preset's."""
        update: dict[str, Any] = {}
        if config.schedule is None:
            update["schedule"] = cls.preset_schedule(config.preset, config.privacy,
                                                     config.episodes)
        if config.counter is None:
            update["counter"], update["counter_bands"] = cls.preset_counter(config)
        return config.model_copy(update=update) if update else config

    @classmethod
    def mechanism_for(cls, boundary: TrustBoundary) -> str:
        """The mechanism a run across `boundary` gets when none is given: the frontier's rows
        read it too, so a run without flags is the frontier's row. Default: `default_mechanism`,
        or the boundary's first mechanism where it releases with others only."""
        own = boundary.mechanisms
        if own is not None and cls.default_mechanism not in own:
            return own[0]
        return cls.default_mechanism

    @classmethod
    def refuses(cls, boundary: TrustBoundary) -> str | None:
        """Why this algorithm cannot run across `boundary` (None: it can), from what the
        boundary declares, never its name. Default: it runs across every boundary."""
        return None

    @classmethod
    def boundaries(cls) -> tuple[str, ...]:
        """The registered trust boundaries this algorithm runs across."""
        return tuple(n for n in trust.names() if cls.refuses(trust.get(n)) is None)

    @classmethod
    def check_mode(cls, privacy: str) -> None:
        """Refuse a trust boundary this algorithm does not support, saying which it does."""
        why = cls.refuses(trust.get(privacy))
        if why is not None:
            raise ValueError(
                f"algorithm {cls.name!r} does not support privacy={privacy!r}; it supports"
                f" {', '.join(cls.boundaries())} ({why})"
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
            errors = exc.errors()
            parts = [f"{'.'.join(map(str, e['loc']))}: "
                     + ("unknown knob" if e["type"] == "extra_forbidden" else error_text(e))
                     for e in errors]
            message = f"knobs of {cls.name!r}: " + "; ".join(parts)
            if any(e["type"] == "extra_forbidden" for e in errors):
                known = ", ".join(f"{k}={v!r}" for k, v in sorted(base.items()))
                message += f". Valid knobs, as preset {preset!r} sets them: {known}"
            raise ValueError(message) from None

    @abstractmethod
    def families(self) -> tuple[Family, ...]:
        """The statistic families the generic privacy layer calibrates and releases (none:
        it releases and spends nothing; an algorithm's own `privatizer` may still release)."""

    @abstractmethod
    def user_statistics(self, trajectories: Played, message: PolicyMessage) -> Stats:
        """What users compute from their own trajectories, played under `message`: clean
        contributions of the released families, one row each. A ValueError refuses the
        contribution (a server answers it with a 4xx and changes nothing)."""

    @abstractmethod
    def learner(self, calibration: Calibration, seeds: list[int]) -> Learner:
        """A fresh learner for replicas seeded by the server's secret `seeds`."""

    def play(
        self, world: Any, message: PolicyMessage, rngs: list[np.random.Generator]
    ) -> Played:
        """User r plays `message` in its own `world` with its own generator `rngs[r]`.

        Default: a tabular rollout (2H+1 uniforms per user) of message["actions"], or, for a
        stochastic policy, of message["probs"] with H more uniforms for the actions.
        """
        uniforms = draw_uniforms(rngs, world.H)
        if "probs" in message:
            action_uniforms = np.stack([rng.random(world.H) for rng in rngs])
            return rollout_stochastic(world, message["probs"], uniforms, action_uniforms)
        return rollout(world, message["actions"], uniforms)

    def check_world(self, world: Any) -> None:
        """Refuse (ValueError) a users' world this run cannot be played in. Default: a tabular
        world whose (S, A, H) is the run's public model class."""
        cfg = self.config
        shape = (getattr(world, "S", None), getattr(world, "A", None), getattr(world, "H", None))
        if shape != (cfg.n_states, cfg.n_actions, cfg.horizon):
            raise ValueError(
                f"the users' world has (S, A, H) = {shape} but the run is for"
                f" {(cfg.n_states, cfg.n_actions, cfg.horizon)}: pass matching world options"
            )
        if cfg.model is not None and model_spec_of(world) != cfg.model:
            raise ValueError(
                "the users' world has another public model than the run (its features or"
                " rewards differ): pass the run's world and its options"
            )

    def calibration(self) -> Calibration:
        """The run's noise, calibrated from its budget and `families()`."""
        return calibrate(self.config, self.families())

    def spend_depends_on_data(self) -> bool:
        """Whether how much the run spends depends on released data (then its ledger's totals
        are an odometer and the users' guarantee is the budget alone). Default: no, every
        charge follows the public release schedule."""
        return False

    def privatizer(self, calibration: Calibration, seeds: list[int], max_items: int
                   ) -> Privatizer:
        """The server-side privacy layer of a run. Default: its trust boundary's (exact sums,
        central counters, or the aggregator of noisy reports) over `families()`."""
        return calibration.boundary.privatizer(calibration, seeds, max_items)

    def message_arrays(self) -> dict[str, tuple[int, ...]]:
        """The arrays the policy message carries besides "actions", with their shapes for one
        replica (users refuse a ticket that does not match); default: none."""
        return {}

    def raw_report_numbers(self) -> int:
        """How many numbers one raw report carries at most (a server's body limit): a
        trajectory's H+1 states, H actions and H rewards."""
        return 3 * self.config.horizon + 1

    def report_kind(self, privacy: str) -> str:
        """The report kind users send (`privrl.reports.kind_named`) across boundary `privacy`: the
        boundary's, from this algorithm's `raw_report_kind`."""
        return trust.get(privacy).report_kind(self.raw_report_kind)

    def postprocess(self, release: Stats) -> Stats:
        """Statistics derived from the release for free (post-processing); default: none."""
        return release
