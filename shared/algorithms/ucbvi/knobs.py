"""DP-UCBVI's public knobs and presets. Faithful values are the paper's constants.

No knob ever changes the noise: they shape the bonus, the confidence radius E and which
statistics are released (and so how the budget is split), never the calibration of a family.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...config import RADIUS_SCALE_MAX
from .support import Support, as_support


class UCBVIKnobs(BaseModel):
    """Public, data-independent knobs of DP-UCBVI."""

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
    pair_counts: Literal["released", "derived"] = Field(
        "released",
        description="release N(s,a) as its own family (paper) or derive it from N(s,a,s') for"
        " free (post-processing, a third of the budget saved)",
    )
    pooled: bool = Field(
        False, description="pool statistics over h (time-homogeneous worlds only; an extension)"
    )
    support: Support | None = Field(
        None,
        description="the world's public transition support: the possible next states of each"
        " (s, a), in order s * A + a (`privrl.algorithms.ucbvi.support.support_knob`); only"
        " those N(s,a,s') cells are released (same sensitivity and noise per cell) and P~ is"
        " restricted to them. None: every cell",
    )
    threshold_per_pair: bool = Field(
        False,
        description="with a support: unknown_below scales each (s,a)'s own release std of N(s,a)"
        " (sqrt of its support's size x the cell std when derived) instead of the largest",
    )

    unknown_union: bool = Field(
        False,
        description="raise unknown_below to the Gaussian z of a union bound over every (h,s,a)"
        " and release of the run (public: the world's size, K and the schedule), so that a"
        " cell nobody visited passes for visited with probability about beta over the whole run",
    )

    @field_validator("support", mode="before")
    @classmethod
    def _frozen_support(cls, value: Any) -> Any:
        """Lists (JSON, --knob) become the knob's tuples."""
        if isinstance(value, list | tuple):
            return as_support(value)
        return value


PRESETS: dict[str, UCBVIKnobs] = {
    "faithful": UCBVIKnobs(),
    "practical": UCBVIKnobs(
        bonus_scale=0.01,
        privacy_scale=0.0,
        radius_mode="std",
        radius_scale=0.5,
        clip_previous=True,
        clip_remaining=True,
        variance_terms=True,
        unknown_below=2.0,
        pair_counts="derived",
    ),
}
