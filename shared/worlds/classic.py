"""Classic exploration worlds as exact tabular MDPs: Strens's chain, gridworlds, FrozenLake.

Each builder is deterministic given its parameters (nothing here is drawn) and declares its
public transition support (`TabularMDP.support`): the next states the world's structure allows
from a state under any action (a chain's next state and its start; a lake cell's neighbours and
itself), a fact of the model class that does not reveal which action goes where, nor how likely.

* **Strens's chain** (Strens 2000, "A Bayesian framework for reinforcement learning"): states
  0..N-1, action 0 ("forward") moves one state up (the last state stays) and pays 1 in the last
  state, action 1 ("return") goes back to state 0 and pays 0.2 (the paper's 10 and 2, over 10);
  with probability `slip` the other action happens. s1 = 0.
* **Lakes** (gridworlds and FrozenLake): a map of rows of `S` (start), `F` (frozen), `H` (hole)
  and `G` (goal); actions 0 LEFT, 1 DOWN, 2 RIGHT, 3 UP; a move off the map stays. A move goes in
  the intended direction with probability `1 - slip`, else in either perpendicular direction with
  probability `slip / 2` each. Entering the goal pays 1; the goal and the holes are absorbing with
  reward 0 (gymnasium's terminal states, as `privrl.worlds.gym` maps them). This is gymnasium's
  FrozenLake-v1 table (slippery: `slip = 2/3`), built from its public maps (`LAKE_MAPS`) without
  gymnasium. A *gridworld* of size n is the n x n lake without holes, start and goal at opposite
  corners.
"""

from __future__ import annotations

import numpy as np

from .tabular import TabularMDP, WorldError, any_action_support

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
STEPS = {LEFT: (0, -1), DOWN: (1, 0), RIGHT: (0, 1), UP: (-1, 0)}
LAKE_MAPS: dict[str, tuple[str, ...]] = {  # gymnasium's FrozenLake-v1 maps, as published
    "4x4": ("SFFF", "FHFH", "FFFH", "HFFG"),
    "8x8": ("SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF",
            "FHFFHFHF", "FFFHFFFG"),
}
FROZEN_LAKE_SLIP = 2.0 / 3.0  # gymnasium's is_slippery=True with success_rate 1/3
CHAIN_FORWARD, CHAIN_RETURN = 0, 1


def strens_chain(horizon: int, n_states: int = 5, slip: float = 0.2) -> TabularMDP:
    """Strens's chain of `n_states` states (module docstring)."""
    if n_states < 2:
        raise WorldError(f"strens-chain needs n_states >= 2, got {n_states}")
    if not 0.0 <= slip < 1.0:
        raise WorldError(f"strens-chain needs 0 <= slip < 1, got {slip}")
    S = int(n_states)
    s = np.arange(S)
    forward = np.minimum(s + 1, S - 1)
    intended = np.zeros((S, 2, S))
    intended[s, CHAIN_FORWARD, forward] = 1.0
    intended[s, CHAIN_RETURN, 0] = 1.0
    rewards = np.zeros((S, 2))
    rewards[S - 1, CHAIN_FORWARD] = 1.0
    rewards[:, CHAIN_RETURN] = 0.2
    swapped = intended[:, ::-1]
    P = (1.0 - slip) * intended + slip * swapped
    R = (1.0 - slip) * rewards + slip * rewards[:, ::-1]
    d1 = np.zeros(S)
    d1[0] = 1.0
    name = f"strens-chain(N={S},slip={slip:g})"
    return TabularMDP.from_arrays(P, R, d1, horizon=horizon, name=name,
                                  support=any_action_support((intended + swapped) > 0))


def lake(rows: tuple[str, ...] | list[str], horizon: int, slip: float, name: str
         ) -> TabularMDP:
    """The lake of map `rows` (module docstring): S, F, H and G cells, slip to the sides."""
    grid = np.array([list(r) for r in rows])
    if grid.ndim != 2 or not set(grid.ravel()) <= set("SFHG"):
        raise WorldError(f"a lake map is rows of equal length over S, F, H, G, got {rows!r}")
    if (grid == "S").sum() < 1 or (grid == "G").sum() < 1:
        raise WorldError("a lake map needs a start S and a goal G")
    if not 0.0 <= slip < 1.0:
        raise WorldError(f"a lake needs 0 <= slip < 1, got {slip}")
    nrow, ncol = grid.shape
    S = nrow * ncol
    cells = grid.ravel()
    absorbing = np.isin(cells, ["G", "H"])
    P = np.zeros((S, 4, S))
    R = np.zeros((S, 4))
    for s in range(S):
        if absorbing[s]:
            P[s, :, s] = 1.0
            continue
        row, col = divmod(s, ncol)
        for a in range(4):
            for b, p in ((a, 1.0 - slip), ((a - 1) % 4, slip / 2), ((a + 1) % 4, slip / 2)):
                dr, dc = STEPS[b]
                nxt = min(max(row + dr, 0), nrow - 1) * ncol + min(max(col + dc, 0), ncol - 1)
                P[s, a, nxt] += p
                R[s, a] += p * (cells[nxt] == "G")
    d1 = (cells == "S").astype(np.float64)
    d1 /= d1.sum()
    # the support: a live cell's four neighbours (a move off the map: itself), an absorbing one
    support = np.repeat(lake_support(S, ncol, absorbing)[:, None, :], 4, axis=1)
    return TabularMDP.from_arrays(P, R, d1, horizon=horizon, name=name, support=support)


def lake_support(n_cells: int, ncol: int, absorbing: np.ndarray) -> np.ndarray:
    """(S, S) bool: the cells a move from each cell may reach (its neighbours, or itself when
    a move leaves the map or the cell is absorbing)."""
    nrow = n_cells // ncol
    out = np.zeros((n_cells, n_cells), dtype=bool)
    for s in range(n_cells):
        if absorbing[s]:
            out[s, s] = True
            continue
        row, col = divmod(s, ncol)
        for dr, dc in STEPS.values():
            out[s, min(max(row + dr, 0), nrow - 1) * ncol + min(max(col + dc, 0), ncol - 1)] = True
    return out


def gridworld(horizon: int, size: int = 4, slip: float = 0.0) -> TabularMDP:
    """The size x size lake without holes: start top-left, goal bottom-right."""
    if size < 2:
        raise WorldError(f"gridworld needs size >= 2, got {size}")
    rows = ["F" * size for _ in range(size)]
    rows[0] = "S" + rows[0][1:]
    rows[-1] = rows[-1][:-1] + "G"
    return lake(rows, horizon, slip, f"gridworld({size}x{size},slip={slip:g})")


def frozen_lake(horizon: int, map_name: str = "4x4", slippery: bool = True) -> TabularMDP:
    """gymnasium's FrozenLake-v1 on its public map `map_name` ('4x4' or '8x8')."""
    if map_name not in LAKE_MAPS:
        raise WorldError(f"frozen-lake has maps {', '.join(LAKE_MAPS)}, got {map_name!r}")
    slip = FROZEN_LAKE_SLIP if slippery else 0.0
    return lake(LAKE_MAPS[map_name], horizon, slip,
                f"frozen-lake({map_name}{'' if slippery else ',not slippery'})")
