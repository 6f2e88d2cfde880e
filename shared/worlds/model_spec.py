"""How a run names its public model class beyond (S, A, H): `ModelSpec`, used by every family
with public features (linear mixtures, linear MDPs), and `model_spec_of(world)`."""

from __future__ import annotations

from typing import Any

from privrl.worlds.tabular import TabularMDP
from pydantic import BaseModel, ConfigDict, Field


class ModelSpec(BaseModel):
    """A public model class beyond (S, A, H), named in a run configuration.

    `name` is a registered public model (e.g. `lm-hard`, `lm-mix`, `lin-cube`) with its public
    parameters, or an inline name with the arrays themselves (worlds loaded from a file).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(..., description="a registered public model, or 'inline'")
    params: dict[str, Any] = Field(default_factory=dict, description="its public parameters")


def model_spec_of(mdp: TabularMDP) -> ModelSpec | None:
    """The public model spec a run on `mdp` names: any world with public features (a linear
    mixture or a linear MDP) holds it as `spec`; None for a plain tabular world."""
    spec = getattr(mdp, "spec", None)
    return spec if isinstance(spec, ModelSpec) else None
