"""The public noise scales and shifts of both LSVI-UCB plug-ins against epsilon, on lin-cube:
`python scripts/lsvi/shift.py [--episodes 5000] [--json OUT]`.

Read from the algorithms themselves, built as a run would build them (JDP, Gaussian,
delta = 1e-5, practical preset): for the switching algorithm rho, the shift 2 lam~ added to the
Gram diagonal, the switch cap N_max and the target noise's sigma_y; for the batched one the batch
count B, its shift and sigma_u. Pure functions of public numbers: nothing is simulated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privrl.config import RunConfig
from privrl.run import Run
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import cell, save_table  # noqa: E402

EPSILONS = (10.0, 100.0, 1e3, 1e4, 1e5, 1e6)
COLUMNS = (("ε (δ = 1e-5)", "sci"), ("ρ", "sci"), ("switching: 2λ~ (shift)", ".4g"),
           ("N_max", ".4g"), ("σ_y", ".3g"), ("batched: B", ","), ("shift", ".4g"),
           ("σ_u", ".3g"))


def algorithm(algo: str, world, episodes: int, epsilon: float):
    """The plug-in as a JDP run of `episodes` on `world` builds it."""
    config = RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                       model=model_spec_of(world), episodes=episodes, privacy="jdp",
                       epsilon=epsilon, delta=1e-5, mechanism="gaussian")
    return Run(config, [0]).algorithm


def main(argv: list[str]) -> None:
    """Print (and with --json save) one row per epsilon."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5000, help="K")
    parser.add_argument("--json", help="also save the table here (for the docs)")
    args = parser.parse_args(argv)
    world = make("lin-cube")
    rows = []
    for eps in EPSILONS:
        switching = algorithm("lsvi-ucb-switching", world, args.episodes, eps)
        batched = algorithm("lsvi-ucb-batched", world, args.episodes, eps)
        rows.append([eps, switching.rho, switching.gram_diagonal, switching.constants.n_max,
                     switching.target_sigma, batched.constants.batches,
                     batched.gram_diagonal - batched.lam, batched.target_sigma])
        print(" ".join(cell(v, spec) for v, (_, spec) in zip(rows[-1], COLUMNS, strict=True)))
    if args.json:
        save_table(args.json, COLUMNS, rows, world=world.name, episodes=args.episodes)


if __name__ == "__main__":
    main(sys.argv[1:])
