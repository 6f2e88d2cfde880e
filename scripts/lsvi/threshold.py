"""Where private LSVI-UCB starts to learn: last-10% regret as % of the uniform policy's, per
epsilon, on held-out lin-cube worlds (secret signs from world seeds other than the default's 0).

`python scripts/lsvi/threshold.py --algo lsvi-ucb-batched --episodes 50000 --seeds 3
 --epsilon 1 3 10 30 100 300 1000 [--knob shift=noise] [--workers 2] [--first-seed 1] --json OUT`

One run per (epsilon, seed): world lin-cube(seed = 100 + s), run seed s for s = first-seed ..
first-seed + seeds - 1, practical preset (or --preset), JDP, Gaussian, delta = 1e-5, the default
integer noise; --workers 1 runs them one after another in this process. Per run: the mean exact
regret of the last 10% of episodes divided by the uniform policy's regret (V*_1 minus the
uniform policy's return), the ledger's epsilon at delta, the policy switches, the seconds and
the public beta.
"Learns" = every seed at or under 25%.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.values import optimal_return, uniform_random_return

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

LEARNS = 25.0  # % of uniform
COLUMNS = (("ε (δ = 1e-5)", "sci"), ("last 10%, % of uniform, per seed", ""),
           ("mean ± std", ".1f"), ("ledger ε (largest)", ".4g"), ("switches (mean)", ".1f"),
           ("learns", ""))


def one_run(algo: str, epsilon: float, seed: int, episodes: int, preset: str,
            knobs: dict[str, object], extra: dict[str, object]) -> dict[str, object]:
    """One run's last-10% regret (% of uniform), ledger epsilon, switches and seconds."""
    world = make("lin-cube", seed=100 + seed)
    config = RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                       model=model_spec_of(world), episodes=episodes, privacy="jdp",
                       epsilon=epsilon, delta=1e-5, mechanism="gaussian", preset=preset,
                       knobs=knobs or None, **extra)
    start = time.perf_counter()
    res = run_in_process(config, world, [seed])
    seconds = time.perf_counter() - start
    uniform = optimal_return(world) - uniform_random_return(world)
    tail = res.regret[0, -max(episodes // 10, 1):]
    return {"epsilon": epsilon, "seed": seed, "last10_pct_uniform": 100 * tail.mean() / uniform,
            "ledger_epsilon": res.ledger.totals(config.accounting_delta).epsilon,
            "switches": int(res.policy_changes[0]), "seconds": seconds,
            "beta": bind(config).beta}


def main() -> None:
    """Run the grid and print one line per epsilon (and save every run with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", required=True)
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon", type=float, nargs="+",
                        default=[1, 3, 10, 30, 100, 300, 1000])
    parser.add_argument("--preset", default="practical")
    parser.add_argument("--knob", action="append", default=[], help="NAME=VALUE (JSON value)")
    parser.add_argument("--config", action="append", default=[],
                        help="RunConfig field NAME=VALUE (e.g. schedule=batch:50)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--json", help="save every run here")
    args = parser.parse_args()
    knobs = {k: _value(v) for k, v in (kv.split("=", 1) for kv in args.knob)}
    extra = {k: _value(v) for k, v in (kv.split("=", 1) for kv in args.config)}
    jobs = [(args.algo, eps, s, args.episodes, args.preset, knobs, extra)
            for eps in args.epsilon
            for s in range(args.first_seed, args.first_seed + args.seeds)]
    if args.workers == 1:
        runs = [one_run(*job) for job in jobs]
    else:
        with ProcessPoolExecutor(args.workers) as pool:
            runs = list(pool.map(one_run, *zip(*jobs, strict=True)))
    rows = []
    for eps in args.epsilon:
        runs_e = [r for r in runs if r["epsilon"] == eps]
        pct = [r["last10_pct_uniform"] for r in runs_e]
        rows.append([eps, ", ".join(f"{p:.1f}" for p in pct), [float(np.mean(pct)),
                                                              float(np.std(pct))],
                     max(r["ledger_epsilon"] for r in runs_e),
                     float(np.mean([r["switches"] for r in runs_e])),
                     all(p <= LEARNS for p in pct)])
        print(" | ".join(str(v) for v in rows[-1]), flush=True)
    if args.json:
        save_table(args.json, COLUMNS, rows, algo=args.algo, episodes=args.episodes,
                   runs=runs)


def _value(text: str) -> object:
    """A knob's value: JSON when it parses (numbers, true/false), else the text."""
    try:
        out = json.loads(text)
    except json.JSONDecodeError:
        return text
    return out if not (isinstance(out, float) and math.isnan(out)) else text


if __name__ == "__main__":
    main()
