"""Public run configuration: everything fixed before a run starts (and known to everyone).

The true world is *not* part of it: the server only knows the model class (S, A, H). Presets fill
the learner's public, data-independent knobs; no knob ever changes the privacy noise.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from shared.wire import FloatOrInfinity, JsonInt

PrivacyMode = Literal["none", "jdp", "ldp"]
MechanismName = Literal["laplace", "gaussian"]
PresetName = Literal["faithful", "practical"]
DEFAULT_ACCOUNTING_DELTA = 1e-5


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

# The cross-field rules of RunConfig._check, stated in the JSON schema (absent = the default).
_DELTA_RULES: dict[str, Any] = {
    "allOf": [
        {
            "if": {
                "properties": {
                    "privacy": {"not": {"const": "none"}},
                    "mechanism": {"const": "gaussian"},
                    "epsilon": {"type": "number"},
                },
                "required": ["mechanism"],
            },
            "then": {"properties": {"delta": {"exclusiveMinimum": 0}}, "required": ["delta"]},
        },
        {
            "if": {
                "properties": {
                    "privacy": {"not": {"const": "none"}},
                    "mechanism": {"const": "laplace"},
                },
            },
            "then": {"properties": {"delta": {"const": 0}}},
        },
    ]
}


class UCBVIKnobs(BaseModel):
    """DP-UCBVI's public knobs (spec §7.5). Faithful values are the paper's constants."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    bonus_scale: float = Field(1.0, ge=0, description="c_b, multiplies bonus terms 1, 2 and 4")
    privacy_scale: float = Field(1.0, ge=0, description="c_p, multiplies bonus term 3")
    radius_mode: Literal["union", "std"] = Field(
        "union", description="E: union-bound tail radius (paper) or radius_scale x release std"
    )
    radius_scale: float = Field(
        1.0, gt=0, le=RADIUS_SCALE_MAX, description="c_E: multiplier of the error radius E"
    )
    clip_previous: bool = Field(True, description="Q~^k = min(Q~^{k-1}, ...) as in the paper")
    clip_remaining: bool = Field(False, description="clip Q~_h at H-h+1 instead of H (E15)")
    variance_terms: bool = Field(True, description="keep Bernstein terms 1 and 4")
    unknown_below: float = Field(
        0.0,
        ge=0,
        description="treat (h,s,a) as unvisited (optimistic) while N~(s,a) < this x the release"
        " std of N(s,a): a public, data-independent threshold",
    )


PRESETS: dict[str, UCBVIKnobs] = {
    "faithful": UCBVIKnobs(),
    "practical": UCBVIKnobs(
        bonus_scale=0.01,
        privacy_scale=0.0,
        radius_mode="std",
        radius_scale=1.0,
        clip_previous=True,
        clip_remaining=True,
        variance_terms=True,
        unknown_below=1.0,
    ),
}


class RunConfig(BaseModel):
    """A learning run: algorithm, model class, privacy, length, seed and knobs (all public)."""

    # epsilon = inf is legal: serialize it as "Infinity" (which validates back), not as null.
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        ser_json_inf_nan="strings",
        json_schema_extra=_DELTA_RULES,
    )

    algo: Literal["dp-ucbvi"] = "dp-ucbvi"
    n_states: JsonInt = Field(..., ge=1, le=500, description="S (public model class)")
    n_actions: JsonInt = Field(..., ge=1, le=50, description="A (public model class)")
    horizon: JsonInt = Field(..., ge=1, le=1000, description="H")
    episodes: JsonInt = Field(..., ge=1, le=10_000_000, description="K, fixed in advance")
    privacy: PrivacyMode = "jdp"
    epsilon: Epsilon = Field(
        1.0, ge=EPSILON_MIN, description='privacy budget per user ("Infinity" allowed)'
    )
    delta: float = Field(0.0, ge=0, lt=1, description="needed (> 0) for the Gaussian mechanism")
    mechanism: MechanismName = "laplace"
    beta: float = Field(0.1, ge=BETA_MIN, lt=1, description="failure probability in the radii")
    preset: PresetName = "practical"
    knobs: UCBVIKnobs | None = Field(None, description="overrides the preset's knobs")
    pair_counts: Literal["released", "derived"] | None = Field(
        None,
        description="release N(s,a) as its own family (paper) or derive it from N(s,a,s') for free;"
        " default: released in faithful, derived in practical",
    )
    tree_smoothing: bool | None = Field(
        None,
        description="JDP: noise the full dyadic tree and combine each node with its children"
        " (Honaker's upward pass; post-processing, same privacy). Default: on in practical,"
        " off in faithful (the paper's binary mechanism)",
    )
    pooled: bool = Field(
        False, description="pool statistics over h (time-homogeneous worlds only; an extension)"
    )
    seed: JsonInt = Field(0, ge=0, description="the server's seed (central noise, tie-breaking)")

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        if self.privacy != "none" and self.mechanism == "gaussian" and not math.isinf(self.epsilon):
            if not 0 < self.delta < 1:
                raise ValueError("the Gaussian mechanism needs 0 < delta < 1 (e.g. --delta 1e-5)")
        if self.privacy != "none" and self.mechanism == "laplace" and self.delta != 0:
            raise ValueError("the Laplace mechanism is pure epsilon-DP: leave delta at 0")
        return self

    @property
    def resolved_knobs(self) -> UCBVIKnobs:
        """The knobs in force: explicit ones, else the preset's."""
        return self.knobs if self.knobs is not None else PRESETS[self.preset]

    @property
    def accounting_delta(self) -> float:
        """The delta at which the ledger's (eps, delta) totals are stated (zCDP parts need one;
        pure-epsilon ledgers ignore it)."""
        return self.delta if self.delta > 0 else DEFAULT_ACCOUNTING_DELTA

    @property
    def smoothed_tree(self) -> bool:
        """Whether JDP tree counters use the variance-reducing upward pass."""
        if self.tree_smoothing is None:
            return self.preset == "practical"
        return self.tree_smoothing

    @property
    def derived_pairs(self) -> bool:
        """Whether N(s,a) is post-processed from N(s,a,s') instead of released."""
        if self.pair_counts is None:
            return self.preset == "practical"
        return self.pair_counts == "derived"
