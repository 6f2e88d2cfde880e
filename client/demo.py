"""`privrl demo`: a real server and real user processes on loopback, non-private vs JDP vs LDP.

Starts `python -m privrl.server` on a free loopback port (temporary database, random admin token
passed through the environment), creates one run per privacy mode on RiverSwim (practical
preset), lets swarms of `python -m privrl.client users` processes play every episode, evaluates
the exact regret from the public policy log, prints a table (regret, epsilon spent, episodes/s,
latencies, report size) and writes a plot. Every child process is stopped on success, error
and Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from privrl.client.api import ApiError, ServerAPI
from privrl.client.cli_common import CliError, pydantic_message, refuse_overwrite
from privrl.client.evaluator import evaluate
from privrl.client.procs import ServerProcess, module_cmd, spawn, stop_process
from privrl.client.users import percentile
from privrl.config import RunConfig
from privrl.lab.experiments import label as config_label
from privrl.lab.experiments import regret_summary
from privrl.lab.plots import plot_cumulative
from privrl.seeding import derived_seed, secret_seed
from privrl.worlds import riverswim
from privrl.worlds.tabular import TabularMDP
from pydantic import ValidationError

DEMO_OUTPUTS = ("summary.json", "regret.png")  # what the demo writes to --out
DEMO_TAIL = 100  # the table's "last-100/ep" column
USERS_TIMEOUT = 900.0  # seconds one run's user processes may take before the demo gives up


def demo_configs(args: argparse.Namespace, mdp: TabularMDP) -> list[RunConfig]:
    """Non-private, JDP and LDP DP-UCBVI on the demo world (practical preset)."""
    common = dict(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=args.episodes,
                  preset="practical")
    delta = args.delta if args.mechanism == "gaussian" else 0.0
    try:
        return [RunConfig(privacy="none", **common)] + [
            RunConfig(privacy=mode, epsilon=args.epsilon, delta=delta, mechanism=args.mechanism,
                      **common)
            for mode in ("jdp", "ldp")
        ]
    except ValidationError as exc:
        raise CliError(f"demo configuration: {pydantic_message(exc)}") from None


def demo_seeds(seed: int | None, run: str) -> tuple[int, int]:
    """(server seed, users' seed) of one demo run: independent, from the CSPRNG unless --seed
    asks for a reproducible simulation (then both are derived from it along different paths)."""
    if seed is None:
        return secret_seed(), secret_seed()
    return derived_seed(seed, "demo", run, "server"), derived_seed(seed, "demo", run, "users")


def _tail(path: Path, lines: int = 8) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def play_run(
    api: ServerAPI, url: str, config: RunConfig, args: argparse.Namespace, tmp: Path,
    children: list[subprocess.Popen],
) -> dict[str, Any]:
    """Create one run, swarm it with user processes, and collect their timings."""
    server_seed, users_seed = demo_seeds(args.seed, config.privacy)
    info = api.create_run(config, seed=server_seed)
    procs_n = min(args.users_processes, config.episodes)
    split = [config.episodes // procs_n + (i < config.episodes % procs_n) for i in range(procs_n)]
    outputs, logs, procs = [], [], []
    start = time.time()
    for i, n in enumerate(split):
        outputs.append(tmp / f"users-{info.id}-{i}.json")
        logs.append(tmp / f"users-{info.id}-{i}.log")
        cmd = module_cmd(
            "client", "users", "--server", url, "--run", info.id, "--users", str(n),
            "--concurrency", str(args.concurrency),
            "--horizon", str(config.horizon), "--quiet", "--json-out", str(outputs[-1]),
        )
        # the users' seed goes through the environment, not the (world-readable) command line
        seed_env = {"PRIVRL_CLIENT_SEED": str(derived_seed(users_seed, i))}
        procs.append(spawn(cmd, env=seed_env, log_path=logs[-1]))
        children.append(procs[-1])
    for proc, log in zip(procs, logs, strict=True):
        try:
            code = proc.wait(timeout=USERS_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise CliError(f"user processes of run {info.id} did not finish within "
                           f"{USERS_TIMEOUT:g}s") from None
        if code != 0:
            raise CliError(f"a user process of run {info.id} exited with code {code}: "
                           f"{_tail(log, 3)}")
    wall = time.time() - start
    swarms = [json.loads(p.read_text()) for p in outputs]
    return {"run_id": info.id, "swarms": swarms, "wall_seconds": wall}


def collect(config: RunConfig, played: dict[str, Any], api: ServerAPI, url: str,
            mdp: TabularMDP) -> dict[str, Any]:
    """One result record (the shape client.plots expects, plus an 'http' section)."""
    run_id, swarms = played["run_id"], played["swarms"]
    ev = evaluate(url, run_id, mdp, api=api)
    led = api.ledger(run_id)
    reported = sum(s["reported"] for s in swarms)
    seconds = max(s["ended_at"] for s in swarms) - min(s["started_at"] for s in swarms)
    claims = [x for s in swarms for x in s["claim_seconds"]]
    reports = [x for s in swarms for x in s["report_seconds"]]
    sizes = [x for s in swarms for x in s["report_bytes"]]
    return {
        "label": config_label(config),
        "config": config.model_dump(mode="json"),
        "run_id": run_id,
        "regret": regret_summary(ev.regret[None, :], mdp, tail=DEMO_TAIL),
        "ledger": led.model_dump(mode="json", exclude={"charges"}),
        "policy_versions": len(ev.policies),
        "http": {
            "episodes": reported,
            "seconds": seconds,
            "wall_seconds_with_startup": played["wall_seconds"],
            "episodes_per_second": reported / seconds if seconds > 0 else math.nan,
            "claim_ms_p50": 1e3 * percentile(claims, 50),
            "claim_ms_p99": 1e3 * percentile(claims, 99),
            "report_ms_p50": 1e3 * percentile(reports, 50),
            "report_ms_p99": 1e3 * percentile(reports, 99),
            "report_bytes": int(np.median(sizes)) if sizes else 0,
            "report_bytes_range": [min(sizes, default=0), max(sizes, default=0)],
        },
    }


def print_table(results: list[dict[str, Any]]) -> None:
    """The demo's table: regret (also as % of a uniformly random policy's), privacy spent and
    the HTTP figures per configuration."""
    print(f"{'configuration':<24} {'cum.regret':>10} {'last-100/ep':>11} {'%random':>7} "
          f"{'eps spent':>9} "
          f"{'ep/s':>7} {'claim p50/p99 ms':>17} {'report p50/p99 ms':>18} {'report B':>9}")
    for r in results:
        reg, http, led = r["regret"], r["http"], r["ledger"]
        eps = "no DP" if r["config"]["privacy"] == "none" else led["epsilon"]
        eps_txt = eps if isinstance(eps, str) else f"{eps:.4g}"
        pct = 100 * reg["tail_per_episode_mean"] / reg["random_policy_per_episode"]
        print(f"{r['label']:<24} {reg['final_cumulative_mean']:>10.1f} "
              f"{reg['tail_per_episode_mean']:>11.4f} {pct:>6.1f}% {eps_txt:>9} "
              f"{http['episodes_per_second']:>7.0f} "
              f"{http['claim_ms_p50']:>8.2f}/{http['claim_ms_p99']:<8.2f} "
              f"{http['report_ms_p50']:>9.2f}/{http['report_ms_p99']:<8.2f} "
              f"{http['report_bytes']:>9}")


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo end to end; every child process is stopped whatever happens."""
    out = Path(args.out)
    refuse_overwrite(out, DEMO_OUTPUTS, args.force)
    out.mkdir(parents=True, exist_ok=True)
    mdp = riverswim(args.horizon)
    configs = demo_configs(args, mdp)
    token = secrets.token_urlsafe(32)
    results: list[dict[str, Any]] = []
    children: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="privrl-demo-") as tmp_name:
        tmp = Path(tmp_name)
        server = ServerProcess(tmp / "demo.db", token, log_path=tmp / "server.log",
                               sequential=args.sequential)
        try:
            try:
                server.start()
            except RuntimeError as exc:
                raise CliError(f"{exc}: {server.log_tail(3)}") from None
            print(f"server at {server.url} (pid {server.proc.pid if server.proc else '?'}); "
                  f"{mdp!r}, K = {args.episodes}, {args.users_processes} user process(es) x "
                  f"{args.concurrency} concurrent users", file=sys.stderr)
            with ServerAPI(server.url, token=token) as api:
                for i, config in enumerate(configs, 1):
                    print(f"[{i}/{len(configs)}] {config_label(config)} ...", file=sys.stderr)
                    played = play_run(api, server.url, config, args, tmp, children)
                    results.append(collect(config, played, api, server.url, mdp))
        except ApiError as exc:
            raise CliError(f"{exc}; server log: {server.log_tail(3)}") from None
        finally:
            for proc in children:
                stop_process(proc)
            server.stop()
    (out / "summary.json").write_text(json.dumps({"results": results}))
    plot = plot_cumulative(results, out / "regret.png",
                           title=f"RiverSwim over HTTP, K = {args.episodes} (exact regret)")
    print_table(results)
    print(f"plot: {plot}")
    print(f"results: {out / 'summary.json'}")
    print("note: at a strong budget (eps ~ 1) the private learners need far more episodes than a"
          " demo plays; see docs/results/README.md for the privacy-utility frontier at K = 50,000.")
    return 0
