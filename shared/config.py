"""Public run configuration: everything fixed before a run starts (and known to everyone).

The true world is *not* part of it: the server only knows the model class (S, A, H), and for
linear-mixture worlds the public feature map (`model`, never the true parameters). Presets fill
the learner's public, data-independent knobs; no knob ever changes the privacy noise. Seeds are
not part of it either: a seed behind published noise is as private as the data (anyone who knows
it can recompute the noise and subtract it), so seeds travel separately (`privrl.seeding`).
"""

from __future__ import annotations

import math
import warnings
from typing import Annotated, Any, Literal

from privrl import trust
from privrl.privacy.noise import NoiseName
from privrl.privacy.schedules import SCHEDULE_PATTERN, parse_schedule
from privrl.wire import INTEGRAL, FloatOrInfinity, JsonInt
from privrl.worlds.model_spec import ModelSpec
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)


def _registered(name: str) -> str:
    """A registered trust boundary's name (`privrl.trust`; a ValueError names the known)."""
    trust.get(name)
    return name


# a trust boundary's name: the built-ins' in the schema, any registered one accepted
PrivacyMode = Annotated[str, AfterValidator(_registered),
                        WithJsonSchema({"type": "string", "enum": list(trust.BUILTIN)})]
MechanismName = Literal["laplace", "gaussian"]
PresetName = Literal["faithful", "practical"]
CounterName = Literal["tree", "smoothed", "matrix"]
# delta's 1-2-5 grid: the default delta is its largest value <= 1 / (10 K)
DELTA_GRID = (5, 2, 1)


def population_delta(episodes: int) -> float:
    """The default delta of a run of `episodes` users: the largest value of the 1-2-5 grid
    (5e-n, 2e-n, 1e-n) that is at most 1 / (10 K), so that delta K <= 0.1 (K = 50,000: 2e-6).
    Exact: compared in integers, so no rounding moves it off the grid or past 1 / (10 K)."""
    if episodes < 1:
        raise ValueError(f"a run has at least one user, got K = {episodes}")
    n = 1
    while True:
        for c in DELTA_GRID:
            if c * 10 * episodes <= 10**n:  # c 10^-n <= 1 / (10 K)
                return float(f"{c}e-{n}")
        n += 1


class DeltaWarning(UserWarning):
    """A run's delta is above 1 / K: the failure it allows is expected among its users."""


def delta_warning(delta: float, episodes: int) -> str:
    """A warning when `delta` is above 1 / K (each user's one-in-delta failure expected to hit
    someone among K users), else ''."""
    if delta * episodes <= 1.0:
        return ""
    return (f"delta = {delta:g} is above 1/K = {1 / episodes:.3g} for K = {episodes} users:"
            f" delta K = {delta * episodes:.3g}; the default is {population_delta(episodes):g}"
            " (<= 1/(10K))")


# Numeric domains: beyond them float64 calibration overflows (a noise scale of 1e300, a radius of
# 1e308) and nothing meaningful is lost (epsilon < 1e-6 or beta < 1e-12 only drown the counts).
EPSILON_MIN = 1e-6
BETA_MIN = 1e-12
RADIUS_SCALE_MAX = 1e6

# Strict mode refuses strings for floats: "Infinity" is the one string an epsilon may be.
Epsilon = Annotated[
    FloatOrInfinity,
    WithJsonSchema(
        {"anyOf": [{"type": "number", "minimum": EPSILON_MIN}, {"const": "Infinity"}]}
    ),
]

def _privacy_is(names: list[str]) -> dict[str, Any]:
    """The JSON-schema test "privacy is one of `names`" (a const for one name)."""
    return {"const": names[0]} if len(names) == 1 else {"enum": names}


def _cross_field_rules(schema: dict[str, Any]) -> None:
    """The cross-field rules of RunConfig._check, stated in the JSON schema (absent = the
    default). Which built-in boundaries a rule concerns is asked of them (what they declare),
    when a schema is made: the boundaries import the privacy layer, which imports this module."""
    public = [n for n in trust.BUILTIN if not trust.get(n).private]
    counters = [n for n in trust.BUILTIN if trust.get(n).counters]
    schema["allOf"] = [
        {
            "if": {
                "properties": {
                    "privacy": {"not": _privacy_is(public)},
                    "mechanism": {"const": "gaussian"},
                    "epsilon": {"type": "number"},
                },
                "required": ["mechanism"],
            },
            # absent: filled in by the population rule (`population_delta`)
            "then": {"properties": {"delta": {"exclusiveMinimum": 0}}},
        },
        {
            "if": {
                "properties": {
                    "privacy": {"not": _privacy_is(public)},
                    "mechanism": {"const": "laplace"},
                },
            },
            "then": {"properties": {"delta": {"const": 0}}},
        },

        # _check_counter's rules
        {
            "if": {"properties": {"counter_bands": {"type": "integer"}},
                   "required": ["counter_bands"]},
            "then": {"properties": {"counter": {"const": "matrix"}}, "required": ["counter"]},
        },
        {
            "if": {"properties": {"privacy": _privacy_is(counters),
                                  "counter": {"const": "matrix"}},
                   "required": ["counter"]},
            "then": {"properties": {"mechanism": {"const": "gaussian"},
                                    "noise": {"const": "numpy"}},
                     "required": ["mechanism"]},
        },
        {
            "if": {"properties": {"tree_smoothing": {"const": True}},
                   "required": ["tree_smoothing", "counter"]},
            "then": {"properties": {"counter": {"const": "smoothed"}}},
        },
        {
            "if": {"properties": {"tree_smoothing": {"const": False}},
                   "required": ["tree_smoothing", "counter"]},
            "then": {"properties": {"counter": {"const": "tree"}}},
        },
    ]


class RunConfig(BaseModel):
    """A learning run: algorithm, model class, privacy, length and knobs (all public, no seed)."""

    # epsilon = inf is legal: serialize it as "Infinity" (which validates back), not as null.
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        ser_json_inf_nan="strings",
        json_schema_extra=_cross_field_rules,
    )

    algo: str = Field(
        "dp-ucbvi", description="a registered algorithm (`privrl algorithms` lists them)"
    )
    n_states: JsonInt = Field(..., ge=1, le=500, description="S (public model class)")
    n_actions: JsonInt = Field(..., ge=1, le=50, description="A (public model class)")
    horizon: JsonInt = Field(..., ge=1, le=1000, description="H")
    episodes: JsonInt = Field(..., ge=1, le=10_000_000, description="K, fixed in advance")
    model: ModelSpec | None = Field(
        None,
        description="the public model class beyond (S, A, H): a registered feature map (e.g."
        " lm-hard, lm-mix, zhou-mix) with its public parameters, or 'inline' arrays; the true"
        " parameters stay with the users' world. Needed by linear-mixture algorithms",
    )
    privacy: PrivacyMode = trust.DEFAULT
    epsilon: Epsilon = Field(
        1.0, ge=EPSILON_MIN, description='privacy budget per user ("Infinity" allowed)'
    )
    delta: float = Field(
        0.0, ge=0, lt=1,
        description="> 0 for the Gaussian mechanism (absent: the largest of 1e-n, 2e-n, 5e-n"
        " at most 1/(10 K), e.g. 2e-6 for K = 50,000), 0 for Laplace",
    )
    mechanism: MechanismName = Field(
        "laplace",
        description="the noise: 'laplace' (pure epsilon) or 'gaussian' (zCDP). Absent from POST"
        " /v1/runs (with no delta either), `privrl run` and `privrl.simulate`: the algorithm's own"
        " across the run's boundary (`privrl algorithms` lists it: the frontier's row); a bare"
        " RunConfig, or a delta given alone: laplace",
    )
    noise: NoiseName = Field(
        "numpy",
        description="who draws the noise: 'numpy' (discrete Laplace/Gaussian integers on public"
        " grids from seeded generators, reproducible), 'opendp' (OpenDP's exact discrete"
        " samplers on the OS CSPRNG: for deployments; needs privrl[secure]) or 'float'"
        " (continuous noise added in floating point: simulation only: an outsider can remove"
        " it (Mironov 2012)). Same calibration either way",
    )
    beta: float = Field(0.1, ge=BETA_MIN, lt=1, description="failure probability in the radii")
    preset: PresetName = "practical"
    knobs: dict[str, Any] | None = Field(
        None,
        description="overrides of the preset's public knobs, checked by the algorithm (e.g."
        " dp-ucbvi: bonus_scale, radius_scale, pair_counts, pooled)",
    )
    counter: CounterName | None = Field(
        None,
        description="JDP: the continual counter behind every released family: 'tree' (the"
        " papers' binary tree), 'smoothed' (the tree with Honaker's upward pass;"
        " post-processing, same privacy) or 'matrix' (the square-root factorization of the"
        " prefix-sum matrix, banded with counter_bands; integer noise only). Default (null):"
        " the preset's: tree in faithful; in practical, the algorithm's measured counter where"
        " the run's noise allows it, else smoothed (`privrl algorithms` lists it); a created run"
        " states the one it uses",
    )
    schedule: str | None = Field(
        None,
        # stated in the schema; _check_counter refuses the rest with a message that says what to do
        json_schema_extra={"pattern": SCHEDULE_PATTERN},
        description="JDP: when the billboard is refreshed (secure aggregation: the cohorts,"
        " 'batch:B' only, default B = K / 50 within [100, 1000]): 'every' episode (the papers'),"
        " 'batch:B' (after episodes B, 2B, ...) or 'geometric:r' (after episodes ceil(r^j));"
        " the episodes between two releases enter the counter as one item. Default (null):"
        " the preset's: 'every' in faithful, the algorithm's measured schedule in practical"
        " (`privrl algorithms` lists it; JDP only); a created run states the one it uses",
    )
    counter_bands: Annotated[int, Field(ge=1), INTEGRAL] | None = Field(
        None, description="the matrix counter's bands (default: the full factorization)"
    )
    dropout: float | None = Field(
        None, ge=0, lt=1,
        description="secure aggregation: the fraction of a cohort that may drop out; a cohort"
        " with fewer inputs aborts and releases nothing (default null: 0.1)",
    )
    collusion: float | None = Field(
        None, ge=0, lt=1,
        description="secure aggregation: the fraction of a cohort that may collude with the"
        " server (their noise shares are not counted; default null: 0.1)",
    )
    secagg_noise: Literal["skellam", "ddg"] | None = Field(
        None,
        description="secure aggregation: the users' noise shares, Skellam (a sum of Skellams"
        " is Skellam) or the distributed discrete Gaussian (default null: skellam)",
    )
    tree_smoothing: bool | None = Field(
        None,
        description="deprecated: counter='smoothed' (true) or 'tree' (false); kept so older"
        " configurations still load",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_delta(cls, data: Any) -> Any:
        """A Gaussian run given no delta gets the population rule's (`population_delta`)."""
        if (not isinstance(data, dict) or "delta" in data
                or data.get("mechanism") != "gaussian"):
            return data
        episodes = data.get("episodes")
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            return data  # the field's own check says what is wrong
        return {**data, "delta": population_delta(episodes)}

    @model_validator(mode="before")
    @classmethod
    def _deprecated_smoothing(cls, data: Any) -> Any:
        """The counter the deprecated tree_smoothing names, when no counter is given (none: the
        preset's, filled in where an algorithm binds the configuration)."""
        if not isinstance(data, dict) or data.get("counter") is not None:
            return data
        smooth = data.get("tree_smoothing")
        if smooth is None:
            return data
        return {**data, "counter": "smoothed" if smooth is True else "tree"}

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        private = self.boundary.private
        if private and self.mechanism == "gaussian" and not math.isinf(self.epsilon):
            if not 0 < self.delta < 1:
                raise ValueError("the Gaussian mechanism needs 0 < delta < 1 (leave it out for"
                                 f" the default {population_delta(self.episodes):g})")
        if private and self.mechanism == "laplace" and self.delta != 0:
            raise ValueError("the Laplace mechanism is pure epsilon-DP: leave delta at 0")
        if private and (why := delta_warning(self.delta, self.episodes)):
            warnings.warn(why, DeltaWarning, stacklevel=2)
        self._check_counter()
        # Whether the algorithm exists and has this privacy mode, knobs and schedule is the
        # registry's to say, where a run is made (`privrl.algorithms.registry.bind`, and
        # `check` on a server): a configuration is plain data and imports no algorithm.
        return self

    @property
    def boundary(self) -> trust.TrustBoundary:
        """The run's trust boundary (`privrl.trust`, by `privacy`)."""
        return trust.get(self.privacy)

    @property
    def accounting_delta(self) -> float:
        """The delta at which the ledger's (eps, delta) totals are stated (zCDP parts need one;
        pure-epsilon ledgers ignore it): the run's, else the population rule's."""
        return self.delta if self.delta > 0 else population_delta(self.episodes)

    def _check_counter(self) -> None:
        """Counter, bands, schedule syntax and the deprecated tree_smoothing agree."""
        try:
            if self.schedule is not None:
                parse_schedule(self.schedule)
        except ValueError as exc:
            raise ValueError(f"schedule: {exc}") from None
        if self.tree_smoothing is not None and self.counter != (
                "smoothed" if self.tree_smoothing else "tree"):
            raise ValueError(f"tree_smoothing={str(self.tree_smoothing).lower()} contradicts"
                             f" counter={self.counter!r}: give counter alone")
        if self.counter_bands is not None and self.counter != "matrix":
            raise ValueError("counter_bands is for counter='matrix' only")
        # outside central counters it is refused where the run is made (`check_counter`)
        if (self.boundary.counters and self.counter == "matrix"
                and (why := self.matrix_refusal())):
            raise ValueError(why)

    def matrix_refusal(self) -> str:
        """Why this run could not release through the matrix counter, or '' if it could (the
        one home of the rule: the configuration, the binding and the preset all ask it)."""
        if not self.boundary.counters:
            return ("counter='matrix' shapes JDP's central counters: with privacy"
                    f" {self.privacy!r} leave counter at its default")
        if self.mechanism != "gaussian":
            return ("counter='matrix' is calibrated in l2 (zCDP): use mechanism 'gaussian'"
                    " (e.g. --mechanism gaussian)")
        if self.noise != "numpy":
            return ("counter='matrix' needs noise='numpy' (seeded integer noise: its encoder is"
                    " exact and its noise is re-derived on a restart)")
        return ""

    @property
    def smoothed_tree(self) -> bool:
        """Deprecated: whether JDP counters are smoothed trees (counter == 'smoothed')."""
        return self.counter == "smoothed"
