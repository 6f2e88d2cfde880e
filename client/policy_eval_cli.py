"""Private policy evaluation (Balle et al. 2016) from the command line.

`privrl policy-eval`: Figure 1 in-process (DP-LSW / DP-LSL on the chain). Writes DIR/summary.json
(the sweep's configuration, RMSE per run with mean and standard error, excess risks, the ledger of
every batch) and the four panels (DIR/figure1.png, panel1..4.png); `privrl plot DIR` redraws them.

`privrl policy-eval-round`: one evaluation round over HTTP. A server (started here on loopback,
or --server) opens a run of m users; this process swarms them (asyncio, C at a time), each posts
its first-visit returns; the server publishes only theta_hat. Prints episodes/s, the published
estimate's RMSE, and, with --seed, the in-process theta_hat of the same seeds (identical).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from privrl.algorithms import bind
from privrl.client.cli_common import (
    CliError,
    epsilon_value,
    positive_float,
    positive_int,
    refuse_overwrite,
    unit_interval,
)
from privrl.privacy.noise import NOISE_NAMES, SIMULATION_ONLY

# what `privrl policy-eval` writes to --out (privrl.lab.policy_eval's save and plot)
SWEEP_OUTPUTS = ("summary.json", "figure1.png", "panel1.png", "panel2.png", "panel3.png",
                 "panel4.png")


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
    out = Path(args.out)
    refuse_overwrite(out, SWEEP_OUTPUTS, args.force)  # before the sweep, not after its minutes
    cells = len(spec.estimators) * len(spec.features) * len(spec.trajectories)
    print(f"{spec.world!r}: {cells} cells x {spec.runs} runs, m up to"
          f" {max(spec.trajectories):.0e}", file=sys.stderr)
    started = time.perf_counter()
    summary = pe.sweep(spec, workers=args.workers, progress=not args.quiet)
    wall = time.perf_counter() - started
    path = pe.save(summary, out)
    figures = pe.plot(summary, out)
    print(pe.table(summary, spec.estimators))
    print(f"sweep: {summary['seconds']:.1f} s with {summary['workers']} worker(s); total"
          f" {wall:.1f} s; figures: {', '.join(str(p) for p in figures)}")
    print(path)
    return 0


def cmd_round(args: argparse.Namespace) -> int:
    """privrl policy-eval-round: one evaluation round through a real server."""
    from privrl.client.api import ApiError, ServerAPI
    from privrl.client.procs import ServerProcess
    from privrl.client.user_state import UserState
    from privrl.client.users import UserError, run_users
    from privrl.lab import policy_eval as pe
    from privrl.seeding import derived_seed, secret_seed
    from privrl.worlds.chain import ChainMRP

    try:
        world = ChainMRP(args.states, args.stay, args.gamma, args.start, args.reward)
        config = pe.round_config(world, args.estimator, args.features, args.trajectories,
                                 args.epsilon, args.delta, args.fmax, args.lambda_c,
                                 args.constants, args.lam, args.noise)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.seed is None:  # real secrets: nothing to compare in-process
        server_seed, users_seed = secret_seed(), None
    else:
        server_seed = derived_seed(args.seed, "policy-eval-round", "server")
        users_seed = derived_seed(args.seed, "policy-eval-round", "users")
    with tempfile.TemporaryDirectory(prefix="privrl-round-") as tmp:
        server: ServerProcess | None = None
        url, token = args.server, os.environ.get("PRIVRL_ADMIN_TOKEN", "")
        if url is None:
            token = secrets.token_urlsafe(24)
            server = ServerProcess(Path(tmp) / "round.db", token,
                                   log_path=Path(tmp) / "server.log",
                                   env={"PRIVRL_DB_SYNCHRONOUS": args.db_synchronous})
            server.start()
            url = server.url
        try:
            with ServerAPI(url, token=token or None) as api:
                info = api.create_run(config, seed=server_seed)
                users = UserState.of(users_seed)
                swarm = asyncio.run(run_users(url, info.id, None, args.concurrency, users.seed,
                                              world, progress=not args.quiet, user_state=users))
                board, ledger = api.billboard(info.id), api.ledger(info.id)
        except (ApiError, UserError) as exc:
            raise CliError(str(exc)) from None
        finally:
            if server is not None:
                server.stop()
    record = _round_record(config, world, swarm.summary(), board.arrays, ledger)
    if args.seed is not None:
        started = time.perf_counter()
        assert users_seed is not None
        reference = pe.round_in_process(config, world, server_seed, users_seed,
                                        users.started or 0)
        published = record["theta"]
        record["in_process"] = {
            "seconds": time.perf_counter() - started,
            "rmse": pe.rmse(world.values(), bind(config).phi, reference),  # type: ignore[attr-defined]
            "max_abs_difference": float(max(abs(a - b) for a, b in zip(
                published, reference.tolist(), strict=True))),
            "identical": published == reference.tolist(),
        }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(record))
    _print_round(record)
    return 0 if record.get("in_process", {}).get("identical", True) else 1


def _round_record(config: Any, world: Any, swarm: dict[str, Any], arrays: dict[str, list],
                  ledger: Any) -> dict[str, Any]:
    """What a round measured: throughput, latencies, the published estimate and its ledger."""
    from privrl.lab import policy_eval as pe

    theta = arrays.get("theta")
    if theta is None:
        raise CliError("the run finished but published no theta (every report counted?)")
    phi = bind(config).phi
    keep = ("reported", "refused", "seconds", "episodes_per_second", "claim_ms_p50",
            "claim_ms_p99", "report_ms_p50", "report_ms_p99", "report_bytes_max")
    return {
        "config": config.model_dump(mode="json"),
        "world": repr(world),
        "http": {k: swarm[k] for k in keep},
        "theta": theta,
        "rmse": pe.rmse(world.values(), phi, np.asarray(theta)),
        "ledger": ledger.model_dump(mode="json"),
    }


def _print_round(record: dict[str, Any]) -> None:
    """One paragraph a person reads."""
    http, led = record["http"], record["ledger"]
    cfg = record["config"]
    print(f"{record['world']}: {cfg['algo']} ({cfg['privacy']}) over HTTP,"
          f" {http['reported']} users in {http['seconds']:.1f} s ="
          f" {http['episodes_per_second']:.0f} episodes/s; claim p50/p99"
          f" {http['claim_ms_p50']:.1f}/{http['claim_ms_p99']:.1f} ms, report p50/p99"
          f" {http['report_ms_p50']:.1f}/{http['report_ms_p99']:.1f} ms")
    print(f"published theta: RMSE {record['rmse']:.6g} against the exact values; ledger"
          f" epsilon {led['epsilon']}, delta {led['delta']}")
    ref = record.get("in_process")
    if ref is not None:
        verdict = "identical" if ref["identical"] else "DIFFERENT"
        print(f"in-process with the same seeds: RMSE {ref['rmse']:.6g}, {verdict} (max |diff|"
              f" {ref['max_abs_difference']:.3g})")


def register(sub: argparse._SubParsersAction) -> None:
    """Add `policy-eval` and `policy-eval-round` to the `privrl` parser."""
    from privrl.lab import policy_eval as pe

    p = sub.add_parser("policy-eval",
                       help="private policy evaluation on the chain (Balle et al. Figure 1)")
    p.add_argument("--estimator", nargs="+", choices=pe.ALL_ESTIMATORS,
                   default=list(pe.ESTIMATORS),
                   help="lsw, lsl (non-private), dp-lsw, dp-lsl (central DP, the paper's),"
                   " ldp-lsw, ldp-lsl (the local-DP extension; not run by default)")
    p.add_argument("--features", nargs="+", default=list(pe.FEATURE_SETS),
                   help="feature maps: tabular, agg2, agg4, agg8 (aggK: K adjacent states share"
                   " a feature)")
    p.add_argument("--epsilon", type=epsilon_value, default=0.1,
                   help="privacy budget of the one release (the paper's Figure 1: 0.1)")
    p.add_argument("--delta", type=unit_interval, default=0.1,
                   help="delta of the smoothed-sensitivity release (Figure 1: 0.1)")
    p.add_argument("--trajectories", nargs="+", type=batch_size, default=list(pe.HALF_DECADES),
                   metavar="M", help="batch sizes m (default 10^2, 10^2.5, ..., 10^7)")
    p.add_argument("--lambda", dest="lambda_", nargs="+", type=positive_float,
                   default=list(pe.PANEL2_LAMBDAS),
                   help="fixed lambdas of panel 2 (tabular LSL / DP-LSL)")
    p.add_argument("--lambda-at", nargs="*", type=batch_size, default=list(pe.PANEL2_AT),
                   metavar="M", help="batch sizes of panel 2 (default 1e4 1e6; none: no panel 2)")
    p.add_argument("--lambda-c", type=positive_float, default=1.0,
                   help="c of the schedule lambda = max(c sqrt(m), 2 ||Phi||^2 ||rho||_inf)")
    p.add_argument("--fmax", type=positive_float, default=1.0,
                   help="public bound on a return (1: the chain's; 100 = R_max / (1 - gamma))")
    p.add_argument("--constants", choices=["nrs", "appendix"], default="nrs",
                   help="Lemma 1's constants (Algorithms 1 and 2) or the appendix's Lemma 14")
    _chain_options(p)
    p.add_argument("--runs", type=positive_int, default=20,
                   help="independent batches per point (the RMSE is their mean)")
    p.add_argument("--seed", type=int, default=0,
                   help="simulation seed (in-process: nothing is published; recorded)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="parallel processes (default: one per core)")
    p.add_argument("--out", default="results/policy-eval",
                   help="output directory (summary.json and the four panels)")
    p.add_argument("--force", action="store_true",
                   help="overwrite the results already in --out (refused otherwise)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_policy_eval)
    _register_round(sub, pe)


def _chain_options(p: argparse.ArgumentParser) -> None:
    """The chain world's parameters (known to the users)."""
    p.add_argument("--states", type=positive_int, default=40, help="N (the goal included)")
    p.add_argument("--stay", type=unit_interval, default=0.5, help="p, the stay probability")
    p.add_argument("--gamma", type=unit_interval, default=0.99, help="discount of the returns")
    p.add_argument("--start", choices=["uniform", "first"], default="uniform",
                   help="s_1 uniform over the non-goal states, or always 0")
    p.add_argument("--reward", choices=["goal", "entry"], default="goal",
                   help="reward 1 on the goal's step (reading b) or on entering it (a)")


def _register_round(sub: argparse._SubParsersAction, pe: Any) -> None:
    """Add `policy-eval-round`."""
    p = sub.add_parser("policy-eval-round",
                       help="one private policy-evaluation round over HTTP (server + users)")
    p.add_argument("--server", default=None,
                   help="a running server (needs PRIVRL_ADMIN_TOKEN); default: start one on"
                   " loopback with a temporary database")
    p.add_argument("--estimator", choices=pe.ALL_ESTIMATORS, default="dp-lsw",
                   help="the estimator the server releases")
    p.add_argument("--features", default="agg2", help="tabular, aggK or aggKn")
    p.add_argument("--trajectories", type=batch_size, default=10_000, metavar="M",
                   help="m, the public number of users of the round")
    p.add_argument("--epsilon", type=epsilon_value, default=0.1,
                   help="privacy budget of the release")
    p.add_argument("--delta", type=unit_interval, default=0.1,
                   help="delta of the smoothed-sensitivity release")
    p.add_argument("--fmax", type=positive_float, default=1.0,
                   help="public bound F_max on a first-visit return (returns are clipped)")
    p.add_argument("--lambda", dest="lam", type=positive_float, default=None,
                   help="DP-LSL's lambda (default: max(c sqrt(m), 2 ||Phi||^2))")
    p.add_argument("--lambda-c", type=positive_float, default=1.0,
                   help="c of DP-LSL's lambda = c sqrt(m)")
    p.add_argument("--constants", choices=["nrs", "appendix"], default="nrs",
                   help="alpha, beta of Lemma 1 (as printed) or the appendix's Lemma 14")
    p.add_argument("--noise", choices=list(NOISE_NAMES), default="numpy",
                   help="noise backend (numpy: seeded integers; opendp: CSPRNG, exact;"
                   f" float: {SIMULATION_ONLY})")
    _chain_options(p)
    p.add_argument("--concurrency", type=positive_int, default=16, help="users at a time")
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible simulation: the server's and the users' seeds are derived"
                   " from it, and the in-process theta of the same seeds is compared (default:"
                   " secret seeds from the OS CSPRNG, no comparison)")
    p.add_argument("--db-synchronous", choices=["FULL", "NORMAL"], default="FULL",
                   help="the started server's SQLite synchronous level")
    p.add_argument("--json-out", default=None,
                   help="write the measurements as JSON to this file (default: no file)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_round)
