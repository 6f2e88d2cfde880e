"""The public evaluation task of DP-LSW / DP-LSL: features, weights, lambda, return bound.

These knobs are the estimator's public parameters (Balle et al. 2016: Phi, w or rho, lambda, gamma,
F_max, the constants): the calibration is *derived* from them, exactly as the paper's
Algorithms 1 and 2 state, and none of them may depend on the private data. They never scale a
derived noise down.

Presets: `faithful` takes the paper's return bound F_max = R_max / (1 - gamma) (100 at
gamma = 0.99); `practical` takes F_max = 1, the tighter public bound of the chain world (every
return is at most 1: the main setting here). Returns are clipped to [0, F_max] either
way, so a bound that is too small costs accuracy, never privacy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .features import group_size


class PolicyEvalKnobs(BaseModel):
    """Public, data-independent parameters of first-visit Monte Carlo policy evaluation."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    features: str = Field(
        "tabular",
        pattern=r"^(tabular|agg[1-9][0-9]*)$",
        description="Phi: 'tabular' (identity) or 'aggK' (K adjacent states share one feature:"
        " agg2, agg4, agg8)",
    )
    gamma: float = Field(0.99, gt=0, lt=1, description="discount of the evaluated returns")
    r_max: float = Field(1.0, gt=0, description="public bound on one step's reward")
    f_max: float | None = Field(
        None, gt=0, description="public bound on a first-visit return (returns are clipped to"
        " [0, F_max]); None: R_max / (1 - gamma)"
    )
    weights: list[float] | None = Field(
        None, description="public per-state weights: w (DP-LSW, >= 0) or rho (DP-LSL, in"
        " [0, 1]); None: all 1. Never estimated from the data"
    )
    lam: float | None = Field(
        None, gt=0, description="DP-LSL's lambda; None: max(lam_c sqrt(m), 2 ||Phi||^2"
        " ||rho||_inf) with m the run's public number of trajectories"
    )
    lam_c: float = Field(1.0, gt=0, description="c of the lambda = c sqrt(m) schedule")
    constants: Literal["nrs", "appendix"] = Field(
        "nrs", description="alpha, beta of Lemma 1 (Algorithms 1 and 2 as printed) or of the"
        " appendix's Lemma 14 (more conservative)"
    )
    ldp_tau: float = Field(
        1.0, gt=0, description="LDP extension: public count threshold tau of Fbar~ = g~ /"
        " max(n~, tau)"
    )

    @field_validator("features")
    @classmethod
    def _known_features(cls, value: str) -> str:
        group_size(value)  # raises ValueError naming the choices
        return value

    @property
    def return_bound(self) -> float:
        """F_max: the explicit public bound, else R_max / (1 - gamma)."""
        return self.f_max if self.f_max is not None else self.r_max / (1.0 - self.gamma)


PRESETS: dict[str, PolicyEvalKnobs] = {
    "faithful": PolicyEvalKnobs(),
    "practical": PolicyEvalKnobs(f_max=1.0),
}
