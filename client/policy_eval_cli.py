"""`privrl policy-eval`: Figure 1 of Balle et al. 2016 in-process (DP-LSW / DP-LSL on the chain).

Writes DIR/summary.json (the sweep's configuration, RMSE per run with mean and standard error,
excess risks, the ledger of every batch) and the four panels (DIR/figure1.png, panel1..4.png);
`privrl plot DIR` redraws them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from privrl.client.cli_common import CliError, epsilon_value, positive_int


def batch_size(text: str) -> int:
    """argparse type: a batch size m >= 1, also written like 1e4."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of trajectories, got {text!r}"
                                         ) from None
    if not value >= 1 or value != round(value) or value > 10**7:
        raise argparse.ArgumentTypeError(f"m must be a whole number in [1, 10^7], got {text}")
    return int(round(value))


def unit_interval(text: str) -> float:
    """argparse type: a number in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def cmd_policy_eval(args: argparse.Namespace) -> int:
    """privrl policy-eval: the sweep, its summary, its panels and a table."""
    from privrl.lab import policy_eval as pe

    chain = {"n_states": args.states, "stay": args.stay, "gamma": args.gamma,
             "start": args.start, "reward": args.reward}
    try:
        spec = pe.SweepSpec(
            estimators=tuple(args.estimator), features=tuple(args.features),
            trajectories=tuple(args.trajectories), runs=args.runs, seed=args.seed,
            epsilon=args.epsilon, delta=args.delta, f_max=args.fmax, lam_c=args.lambda_c,
            lambdas=tuple(args.lambda_), lambda_at=tuple(args.lambda_at),
            constants=args.constants, chain=chain,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    cells = len(spec.estimators) * len(spec.features) * len(spec.trajectories)
    print(f"{spec.world!r}: {cells} cells x {spec.runs} runs, m up to"
          f" {max(spec.trajectories):.0e}", file=sys.stderr)
    started = time.perf_counter()
    summary = pe.sweep(spec, workers=args.workers, progress=not args.quiet)
    wall = time.perf_counter() - started
    out = Path(args.out)
    path = pe.save(summary, out)
    figures = pe.plot(summary, out)
    print(pe.table(summary, spec.estimators))
    print(f"sweep: {summary['seconds']:.1f} s with {summary['workers']} worker(s); total"
          f" {wall:.1f} s; figures: {', '.join(str(p) for p in figures)}")
    print(path)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `policy-eval` to the `privrl` parser."""
    from privrl.lab import policy_eval as pe

    p = sub.add_parser("policy-eval",
                       help="private policy evaluation on the chain (Balle et al. Figure 1)")
    p.add_argument("--estimator", nargs="+", choices=pe.ESTIMATORS, default=list(pe.ESTIMATORS))
    p.add_argument("--features", nargs="+", default=list(pe.FEATURE_SETS),
                   help="feature maps: tabular, agg2, agg4, agg8 (aggK: K adjacent states share"
                   " a feature)")
    p.add_argument("--epsilon", type=epsilon_value, default=0.1)
    p.add_argument("--delta", type=unit_interval, default=0.1)
    p.add_argument("--trajectories", nargs="+", type=batch_size, default=list(pe.HALF_DECADES),
                   metavar="M", help="batch sizes m (default 10^2, 10^2.5, ..., 10^7)")
    p.add_argument("--lambda", dest="lambda_", nargs="+", type=positive_float,
                   default=list(pe.PANEL2_LAMBDAS),
                   help="fixed lambdas of panel 2 (tabular LSL / DP-LSL)")
    p.add_argument("--lambda-at", nargs="+", type=batch_size, default=list(pe.PANEL2_AT),
                   metavar="M", help="batch sizes of panel 2 (default 1e4 1e6)")
    p.add_argument("--lambda-c", type=positive_float, default=1.0,
                   help="c of the schedule lambda = max(c sqrt(m), 2 ||Phi||^2 ||rho||_inf)")
    p.add_argument("--fmax", type=positive_float, default=1.0,
                   help="public bound on a return (1: the chain's; 100 = R_max / (1 - gamma))")
    p.add_argument("--constants", choices=["nrs", "appendix"], default="nrs",
                   help="Lemma 1's constants (Algorithms 1 and 2) or the appendix's Lemma 14")
    p.add_argument("--states", type=positive_int, default=40, help="N (the goal included)")
    p.add_argument("--stay", type=unit_interval, default=0.5, help="p, the stay probability")
    p.add_argument("--gamma", type=unit_interval, default=0.99)
    p.add_argument("--start", choices=["uniform", "first"], default="uniform",
                   help="s_1 uniform over the non-goal states, or always 0")
    p.add_argument("--reward", choices=["goal", "entry"], default="goal",
                   help="reward 1 on the goal's step (reading b) or on entering it (a)")
    p.add_argument("--runs", type=positive_int, default=20)
    p.add_argument("--seed", type=int, default=0,
                   help="simulation seed (in-process: nothing is published; recorded)")
    p.add_argument("--workers", type=positive_int, default=None, help="parallel processes")
    p.add_argument("--out", default="results/policy-eval")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_policy_eval)
