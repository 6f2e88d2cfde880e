"""Public feature maps Phi (N x d) for policy evaluation: tabular and state aggregation.

`tabular` is the identity (d = N). `aggK` groups K adjacent states, {0..K-1}, {K..2K-1}, ...
(the last group is smaller when K does not divide N): the paper's "function approximation" is
`agg2` (pairs, d = 20 on the 40-state chain, Phi = kron(I, [1; 1]), ||Phi|| = sqrt 2); `agg4` and
`agg8` are the coarser maps of panel 4 (ours, not in the paper). `aggKn` is the same
partition with unit-norm columns (phi_s = e_group / sqrt(K), ||Phi|| = 1): the same function
class, but DP-LSL's lambda floor ||Phi||^2 and noise factor ||Phi|| no longer grow with K (the
paper does not say how its aggregated features were scaled).
"""

from __future__ import annotations

import re

import numpy as np

FEATURES = ("tabular", "agg2", "agg4", "agg8")
_AGG = re.compile(r"^agg([1-9][0-9]*)(n?)$")


def group_size(name: str) -> int:
    """States per feature: 1 for tabular, K for aggK; a clear error for anything else."""
    if name == "tabular":
        return 1
    match = _AGG.match(name)
    if match is None:
        raise ValueError(f"unknown features {name!r}: use tabular, aggK or aggKn (e.g. agg2,"
                         " agg4, agg8, agg2n)")
    return int(match.group(1))


def feature_matrix(name: str, n_states: int) -> np.ndarray:
    """Phi for `name` on `n_states` states: row s is phi_s (one-hot of s's group)."""
    k = group_size(name)
    if n_states < 1:
        raise ValueError(f"n_states must be >= 1, got {n_states}")
    if k > n_states:
        raise ValueError(f"features {name!r} group {k} states, more than the {n_states} there are")
    groups = np.arange(n_states) // k
    phi = np.zeros((n_states, int(groups[-1]) + 1))
    phi[np.arange(n_states), groups] = 1.0
    if name.endswith("n"):
        phi /= np.sqrt(phi.sum(axis=0))[None, :]
    phi.setflags(write=False)
    return phi
