"""The calibrated noise of secure aggregation's two kinds of shares (docs/explanation/
secure-aggregation.md, "Skellam or discrete Gaussian"): for pooled and per-step DP-UCBVI on
RiverSwim (K = 50,000, the practical preset, delta = 1e-5, the default cohorts), the cohort
sum's standard deviation and a user's share's, in grid units of the first released family,
next to the central Gaussian calibration of the same budget. Nothing is run: calibration only.

    python scripts/secagg_noise_table.py --json docs/results/secagg/noise.json
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.worlds import riverswim
from results_table import save_table

COLUMNS = [("run", ""), ("eps", "g"), ("Gaussian sigma", ".2f"),
           ("discrete Gaussian: cohort sigma", ".2f"), ("its share", ".3f"),
           ("Skellam: cohort sigma", ".2f"), ("its share", ".3f")]


def row(pooled: bool, epsilon: float, episodes: int = 50_000) -> list[object]:
    """One row: the Gaussian sigma, then each kind of share's cohort sigma and share sigma."""
    mdp = riverswim(6)
    base = dict(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes,
                epsilon=epsilon, mechanism="gaussian", delta=1e-5, knobs={"pooled": pooled},
                preset="practical")
    gauss = bind(RunConfig(privacy="ldp", **base)).calibration().families[0]
    cells: list[object] = ["dp-ucbvi pooled" if pooled else "dp-ucbvi", epsilon,
                           gauss.scale / gauss.grid]
    for noise in ("ddg", "skellam"):
        cal = bind(RunConfig(privacy="secagg", secagg_noise=noise, **base)).calibration()
        fam, spec = cal.families[0], cal.cohort
        assert spec is not None
        sigma = fam.scale / fam.grid
        cells += [sigma, sigma / math.sqrt(spec.honest_shares)]
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    rows = [row(pooled, eps) for pooled in (True, False) for eps in (1.0, 3.0, 10.0)]
    save_table(args.json, COLUMNS, rows)


if __name__ == "__main__":
    main()
