"""`privrl serve | runs | ledger | users | evaluate | compare | demo`: the client-server half of
the command line.

Each handler turns server and user failures into one clear line (`CliError`, exit code 2).
The client never imports the server package: `privrl serve` executes `python -m privrl.server`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from privrl.client.api import ApiError, ServerAPI, admin_token, check_url
from privrl.client.cli_common import (
    CliError,
    add_learning_options,
    add_world_options,
    config_from_args,
    mechanisms_from_args,
    non_negative_int,
    output_file,
    positive_float,
    positive_int,
    run_id_arg,
    run_world,
    world_from_args,
)
from privrl.client.load.cli import add_swarm_options
from privrl.client.procs import child_env, module_cmd, server_args
from privrl.privacy.continual import COUNTERS
from privrl.protocol import LedgerView, RunInfo
from privrl.trust.secagg.spec import DEFAULT_COLLUSION, DEFAULT_DROPOUT

if TYPE_CHECKING:
    from privrl.client.users import SwarmResult
    from privrl.worlds.tabular import TabularMDP

SERVER_ENV = "PRIVRL_SERVER"
SERVER_SEED_ENV = "PRIVRL_SEED"  # `runs create`: the server's noise seed
CLIENT_SEED_ENV = "PRIVRL_CLIENT_SEED"  # `users`: the users' own seed
# The demo's budget and JDP counter: the smallest epsilon of {1, 2, 3, 5} at which this JDP run
# learns at K = 3,000, on average and in single runs (what a demo shows): scripts/demo_budget.py
# measures it (docs/results/demo/budget.json)
DEMO_EPSILON = 3.0
DEMO_COUNTER, DEMO_SCHEDULE = "matrix", "batch:200"
# The demo's secure-aggregation cohorts: at most 10 users, so that a cohort's users are in flight
# together in one user process and its rounds take a fraction of a second over loopback
DEMO_COHORT = 10


def _server(args: argparse.Namespace) -> str:
    """--server, else $PRIVRL_SERVER (a clear error when neither is given)."""
    server = args.server or os.environ.get(SERVER_ENV, "")
    if not server:
        raise CliError(f"no server given: pass --server URL or set {SERVER_ENV}")
    return server


def _api(args: argparse.Namespace, admin: bool = False) -> ServerAPI:
    token = admin_token() if admin else os.environ.get("PRIVRL_ADMIN_TOKEN") or None
    return ServerAPI(_server(args), token=token)


def _seed(value: int | None, env: str) -> int | None:
    """--seed, else $ENV when set and not blank, else None (the seed is then drawn from the
    OS CSPRNG by its owner: the server for its noise, the users for theirs)."""
    if value is not None:
        return value
    text = os.environ.get(env, "").strip()
    if not text:
        return None
    try:
        seed = int(text)
    except ValueError:
        raise CliError(f"${env} must be a whole number >= 0, got {text!r}") from None
    if seed < 0:
        raise CliError(f"${env} must be a whole number >= 0, got {seed}")
    return seed






def cmd_serve(args: argparse.Namespace) -> int:
    """privrl serve: replace this process with `python -m privrl.server` and the same flags,
    in the same working directory (the database path is made absolute all the same)."""
    from privrl import accel

    db = Path(args.db).expanduser().resolve()
    accel.load()  # compiled here, with progress, on a cold cache: the server then loads them
    flags = server_args(args.host, args.port, db, args.claim_timeout, args.sequential,
                        args.access_log, args.log_level)
    cmd = module_cmd("privrl.server", *flags)
    os.execve(cmd[0], cmd, child_env())
    return 0  # pragma: no cover (execve does not return)


def cmd_runs_create(args: argparse.Namespace) -> int:
    """privrl runs create: POST a RunConfig (the world options only give S and A)."""
    mdp = world_from_args(args).build()
    mechanism = mechanisms_from_args(args, args.privacy)[0]
    config = config_from_args(args, args.privacy, args.epsilon, mechanism, mdp)
    seed = _seed(args.seed, SERVER_SEED_ENV)
    with _api(args, admin=True) as api:
        info = api.create_run(config, seed=seed, credentials=args.credentials)
    if args.write_id:
        Path(args.write_id).write_text(info.id + "\n")
    cfg = info.config
    eps, mech = noise_columns(info)
    print(f"created run for {cfg.algo}, {cfg.privacy} eps={eps} {mech}, "
          f"S={cfg.n_states} A={cfg.n_actions} H={cfg.horizon} K={cfg.episodes}",
          file=sys.stderr)
    if info.credentials:
        print(f"claims need a user credential: issue them with `privrl runs credentials"
              f" {info.id} --count N --out FILE`", file=sys.stderr)
    else:
        print(ANONYMOUS_RUN, file=sys.stderr)
    print(info.id)
    return 0


ANONYMOUS_RUN = ("warning: this run takes claims from anyone; its claim limit is per client"
                 " address, so one client with many addresses can take its whole window: fine"
                 " for a local simulation, for a deployment create runs with --credentials")


def cmd_runs_credentials(args: argparse.Namespace) -> int:
    """privrl runs credentials: issue user credentials of a run (admin), one per line."""
    with _api(args, admin=True) as api:
        tokens = api.credentials(args.run, args.count)
    text = "".join(t + "\n" for t in tokens)
    if args.out:
        with open(args.out, "a") as out:  # several runs' credentials may share one file
            out.write(text)
        print(f"{len(tokens)} credential(s) of run {args.run} appended to {args.out}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def read_credentials(path: str | None, wait: float) -> list[str]:
    """User credentials from a file, one per line (waiting up to `wait` s for it to appear)."""
    if path is None:
        return []
    file = Path(path)
    deadline = time.monotonic() + wait
    while not file.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if not file.exists():
        raise CliError(f"--credentials {file} does not exist (`privrl runs credentials RUN"
                       " --out FILE` writes it)")
    return [line.strip() for line in file.read_text().splitlines() if line.strip()]


def cmd_runs_list(args: argparse.Namespace) -> int:
    """privrl runs list: one line per run."""
    with _api(args) as api:
        runs = api.list_runs().runs
    print(f"{'id':<26} {'privacy':<8} {'eps':>6} {'mech':<9} {'K':>8} {'reported':>9} {'done':>5}")
    for r in runs:
        print(runs_list_row(r))
    return 0


def noise_columns(info: RunInfo) -> tuple[str, str]:
    """A run's epsilon and mechanism as listed: '-' for both when it is not private."""
    c = info.config
    return ("-", "-") if not c.boundary.private else (f"{c.epsilon:g}", c.mechanism)


def runs_list_row(info: RunInfo) -> str:
    """One line of `privrl runs list`."""
    c, s = info.config, info.status
    eps, mech = noise_columns(info)
    return (f"{info.id:<26} {c.privacy:<8} {eps:>6} {mech:<9} {c.episodes:>8} "
            f"{s.reported:>9} {'yes' if s.finished else 'no':>5}")


def _number(x: float | str) -> float:
    """A ledger number (the string 'inf' for an unbounded spend) as a float."""
    return float(x)


def _when(timestamp: float, now: float) -> str:
    """A Unix time as a UTC date and how long ago it was."""
    stamp = datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    ago = max(0.0, now - timestamp)
    if ago < 120:
        span = f"{ago:.0f} s"
    elif ago < 7200:
        span = f"{ago / 60:.0f} min"
    elif ago < 172_800:
        span = f"{ago / 3600:.0f} h"
    else:
        span = f"{ago / 86_400:.0f} days"
    return f"{stamp} ({span} ago)"


def budget_text(info: RunInfo) -> str:
    """The configured privacy of a run in words: mode, mechanism, (epsilon, delta) per user."""
    c = info.config
    boundary = c.boundary
    if not boundary.private:
        return f"{c.privacy} ({boundary.label}: nothing is noised, nothing is spent)"
    mode = f"{boundary.label} ({boundary.summary})"
    return f"{mode}, {c.mechanism}, budget eps = {c.epsilon:g}, delta = {c.delta:g} per user"


def print_run(info: RunInfo, led: LedgerView, now: float) -> None:
    """A run's public configuration, progress and privacy spent, one fact per line."""
    c, st = info.config, info.status
    knobs = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted((c.knobs or {}).items()))
    state = "finished" if st.finished else "running"
    rows = [
        ("algorithm", f"{c.algo}, {c.preset} preset" + (f"; knobs {knobs}" if knobs else "")),
        ("privacy", budget_text(info)),
        ("spent", "nothing (non-private run)" if not c.boundary.private else led.spent_text()),
        *([("guarantee", led.guarantee_text().removeprefix("guarantee: "))]
          if c.boundary.private else []),
        ("model", f"S = {c.n_states} states, A = {c.n_actions} actions, H = {c.horizon} steps"),
        ("episodes", f"{st.reported} of K = {st.episodes} reported, {st.outstanding} claim(s)"
                     f" outstanding; {state}"),
        ("policy", f"version {st.policy_version}"),
        ("claims", "sequential (one episode at a time)" if info.sequential
                   else "concurrent"),
        ("noise", f"{c.noise} backend"),
        ("created", _when(info.created_at, now)),
    ]
    print(f"run {info.id}")
    for name, text in rows:
        print(f"  {name:<10} {text}")


def _run_and_ledger(args: argparse.Namespace) -> tuple[RunInfo, LedgerView]:
    """The public run info and ledger of `args.run` (one line on an API error)."""
    with _api(args) as api:
        return api.get_run(args.run), api.ledger(args.run)


def cmd_runs_show(args: argparse.Namespace) -> int:
    """privrl runs show: the run's configuration, progress and privacy spent (or its JSON)."""
    info, led = _run_and_ledger(args)
    if args.json:
        print(info.model_dump_json(indent=2))
    else:
        print_run(info, led, time.time())
    return 0


def ledger_rows(led: LedgerView) -> list[dict[str, object]]:
    """The charges in order, each with the server's total epsilon after it (`epsilon_after`)."""
    after = led.epsilon_after or [math.nan] * len(led.charges)
    return [{**charge, "index": i, "epsilon_so_far": _number(eps)}
            for i, (charge, eps) in enumerate(zip(led.charges, after, strict=True), 1)]


def cmd_ledger(args: argparse.Namespace) -> int:
    """privrl ledger: every privacy charge of a run, with the running total."""
    info, led = _run_and_ledger(args)
    if args.json:
        print(led.model_dump_json(indent=2))
        return 0
    print(f"ledger of run {info.id}: {budget_text(info)}")
    if not led.charges:
        print("no charges: nothing has been released yet" if info.config.boundary.private
              else "no charges: a non-private run spends nothing")
        return 0
    print(f"spent so far: {led.spent_text()}; noise drawn by {', '.join(led.noise) or '-'}")
    print(led.guarantee_text())
    print(f"{'#':>4} {'episode':>8} {'mechanism':<12} {'eps':>9} {'rho':>10} "
          f"{'eps so far':>10} {'sensitivity':>11} {'scale':>10}  note")
    for row in ledger_rows(led):
        at = "-" if row.get("at") is None else str(row["at"])
        print(f"{row['index']:>4} {at:>8} {row['mechanism']:<12} "
              f"{_number(row.get('epsilon', 0)):>9.4g} {_number(row.get('rho', 0)):>10.4g} "
              f"{row['epsilon_so_far']:>10.4g} {_number(row['sensitivity']):>11.4g} "
              f"{_number(row['scale']):>10.4g}  {row.get('note', '')}")
    print(f"eps so far: the total at delta = {led.delta:g} after each charge (pure epsilons add,"
          " zCDP rhos add and convert once); episode: reports counted when it was charged")
    return 0


def cmd_runs_delete(args: argparse.Namespace) -> int:
    """privrl runs delete (admin)."""
    with _api(args, admin=True) as api:
        api.delete_run(args.run)
    print(f"deleted run {args.run}")
    return 0


def cmd_runs_recover(args: argparse.Namespace) -> int:
    """privrl runs continue|stop (admin): a run held because the server's store went back."""
    action = args.runs_command
    with _api(args, admin=True) as api:
        info = api.recover_run(args.run, action)
    if info is None:
        print(f"run {args.run} forgotten: the server's store had lost it")
    elif action == "stop":
        print(f"run {args.run} stopped at {info.status.reported} reports (read-only)")
    else:
        print(f"run {args.run} continues at {info.status.reported} reports under fresh noise")
    return 0


def _run_ids(args: argparse.Namespace) -> list[str]:
    """--run ID, or every id in --run-file, one per line (waiting up to --wait-for-file seconds
    for the file to appear: compose starts the users beside the step that creates the runs)."""
    if args.run:
        return [args.run]
    path = Path(args.run_file)
    deadline = time.monotonic() + args.wait_for_file
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if not path.exists():
        raise CliError(f"--run-file {path} does not exist (did `privrl runs create --write-id` or"
                       " `privrl compare --create` run?)")
    ids = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if not ids:
        raise CliError(f"--run-file {path} is empty")
    return ids


def _run_worlds(args: argparse.Namespace, run_ids: list[str]) -> list[TabularMDP]:
    """Each run's users' world: --env and its options, else the run's own (its public config)."""
    with _api(args) as api:
        configs = [api.get_run(run_id).config for run_id in run_ids]
    return [run_world(args, config) for config in configs]


def _report_swarm(result: SwarmResult) -> None:
    """One line per swarm: counts, throughput, what users waited (retries included), body
    size."""
    summary = result.summary()
    print(f"run {result.run_id}: {result.reported} episodes reported "
          f"({result.duplicates} duplicates, {result.refused} refused) in {result.seconds:.2f}s, "
          f"{summary['episodes_per_second']:.1f} episodes/s; users waited p50/p99: claim "
          f"{summary['claim_ms_p50']:.2f}/{summary['claim_ms_p99']:.2f} ms, report "
          f"{summary['report_ms_p50']:.2f}/{summary['report_ms_p99']:.2f} ms"
          f" ({result.retries} retries); report "
          f"{summary['report_bytes_max']} bytes" + (", run finished" if result.finished else "")
          + (f"; the run ended early: {result.ended}" if result.ended else ""))


def cmd_users(args: argparse.Namespace) -> int:
    """privrl users: swarms of simulated users, one per run, side by side."""
    from privrl.client.users import Backoff, UserError, run_users
    from privrl.seeding import derived_seed

    for flag in ("report", "plot", "json_out"):  # before the test, not after it
        output_file(getattr(args, flag), "--" + flag.replace("_", "-"))
    server, run_ids = _server(args), _run_ids(args)
    mdps = _run_worlds(args, run_ids)
    credentials = read_credentials(args.credentials, args.wait_for_file)
    backoff = Backoff(attempts=args.attempts, patience=args.patience)
    seed = _seed(args.seed, CLIENT_SEED_ENV)
    if len(run_ids) > 1 and seed is not None:  # never one seed's rollouts in two runs
        seeds: list[int | None] = [derived_seed(seed, "run", run_id) for run_id in run_ids]
    else:  # one run, or no seed: each swarm draws its own
        seeds = [seed] * len(run_ids)

    if args.processes > 1 or args.report or args.plot or args.duration:
        from privrl.client.load.cli import swarm_command

        if len(run_ids) > 1:
            raise CliError("--processes, --report, --plot and --duration play one run: pass"
                           " --run ID (or a --run-file with one id)")
        return swarm_command(args, server, run_ids[0], seed, mdps[0], backoff, credentials)

    async def swarms() -> list[SwarmResult]:
        from privrl.client.load.meter import BoundedTransport

        return list(await asyncio.gather(*(
            run_users(server, run_id, args.users, args.concurrency, run_seed, mdp,
                      backoff=backoff, progress=not args.quiet and len(run_ids) == 1,
                      progress_every=args.progress_every, credentials=credentials,
                      transport=BoundedTransport(min(args.connections, args.concurrency),
                                                 polls=args.concurrency))
            for run_id, run_seed, mdp in zip(run_ids, seeds, mdps, strict=True))))

    try:
        results = asyncio.run(swarms())
    except (UserError, ApiError) as exc:
        raise CliError(str(exc)) from None
    finished = [r.run_id for r in results if r.already_finished]
    if len(finished) == len(results):
        which = f"run {finished[0]} has" if len(finished) == 1 else "every run has"
        why = next((f"; run {r.run_id} ended early: {r.ended}" for r in results if r.ended),
                   " (every episode is reported)")
        raise CliError(f"{which} already finished{why}: nothing to play; create a new run with"
                       " `privrl runs create`")
    if args.json_out:
        summaries = [r.summary() for r in results]
        body = summaries[0] if len(summaries) == 1 else {"runs": summaries}
        Path(args.json_out).write_text(json.dumps(body))
    for result in results:
        if result.already_finished:
            why = f" (it ended early: {result.ended})" if result.ended else ""
            print(f"run {result.run_id}: already finished before the users started{why}")
        else:
            _report_swarm(result)
    for result in results:
        if result.refused and not result.reported:
            raise CliError(f"the server refused all {result.refused} reports of run "
                           f"{result.run_id}: "
                           f"{result.errors[0] if result.errors else 'no reason'}")
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """privrl wait: return once a server's /readyz answers 200 (after `privrl serve ... &`)."""
    from privrl.client.procs import wait_ready

    server = check_url(_server(args)).rstrip("/")
    try:
        wait_ready(f"{server}/readyz", None, args.timeout)
    except RuntimeError as exc:
        raise CliError(f"{exc}: is `privrl serve` running there (its output says why it is not"
                       " up)? A server that holds a run whose store went back also answers 503"
                       " until an admin continues or stops it (`privrl runs continue`)") from None
    print(f"server at {server} is ready")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """privrl evaluate: exact regret from the public policy log and the true world, beside the
    optimal policy's (0) and the uniformly random policy's."""
    from privrl.client.evaluator import evaluate
    from privrl.worlds import optimal_return, uniform_random_return

    mdp = _run_worlds(args, [args.run])[0]
    ev = evaluate(_server(args), args.run, mdp)
    if ev.regret.size == 0:
        raise CliError(f"run {ev.run_id} has no reported episode yet: nothing to evaluate; play"
                       f" some first with `privrl users --run {ev.run_id}`")
    optimal, uniform = optimal_return(mdp), uniform_random_return(mdp)
    random_regret = optimal - uniform
    n, tail = ev.regret.size, min(args.tail, ev.regret.size)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "run_id": ev.run_id, "regret": ev.regret.tolist(), "versions": ev.versions.tolist(),
            "optimal_return": optimal, "uniform_random_return": uniform,
        }))
    print(f"run {ev.run_id}: {n} episodes served, {len(ev.policies)} policy versions; exact"
          f" regret in {mdp.name} (H = {mdp.H})")
    print(f"{'policy':<24} {f'regret/ep, last {tail}':>20} {f'cumulative ({n} ep)':>18} "
          f"{'return/ep':>10}")
    rows = [("this run", ev.tail_mean(tail), ev.cumulative, optimal - ev.tail_mean(tail)),
            ("optimal policy", 0.0, 0.0, optimal),
            ("uniformly random policy", random_regret, n * random_regret, uniform)]
    for name, per, cum, ret in rows:
        print(f"{name:<24} {per:>20.4f} {cum:>18.1f} {ret:>10.4f}")
    if random_regret > 0:
        pct = 100 * ev.tail_mean(tail) / random_regret
        print(f"the last {tail} episodes are at {pct:.1f}% of random (0% = optimal, 100% = no"
              " better than a uniformly random policy)")
    return 0


def watch_runs(api: ServerAPI, ids: list[str], every: float, timeout: float) -> dict[str, float]:
    """Poll the runs' public status until every one has finished, printing their progress every
    `every` seconds; each run's episodes per second while it ran (observed by polling)."""
    from privrl.lab.experiments import label as config_label

    start = last = time.monotonic()
    first: dict[str, tuple[float, int]] = {}
    done: dict[str, float] = {}
    episodes: dict[str, int] = {}
    while True:
        infos = [api.get_run(run_id) for run_id in ids]
        now = time.monotonic()
        for info in infos:
            st = info.status
            episodes[info.id] = st.episodes
            if st.reported > 0 and info.id not in first:
                first[info.id] = (now, st.reported)
            if st.finished and info.id not in done:
                done[info.id] = now
        if len(done) == len(ids):
            break
        if now - start > timeout:
            raise CliError(f"the runs did not finish within {timeout:g} s: are users playing them?"
                           " (`privrl users --run-file FILE`)")
        if now - last >= every:
            last = now
            print(f"[{now - start:5.0f} s] " + ", ".join(
                f"{config_label(i.config)} {i.status.reported}/{i.status.episodes}"
                for i in infos), file=sys.stderr, flush=True)
        time.sleep(min(1.0, every))
    rates = {}
    for run_id in ids:
        t0, n0 = first.get(run_id, (math.nan, 0))
        span = done[run_id] - t0
        rates[run_id] = (episodes[run_id] - n0) / span if span > 0 else math.nan
    return rates


def cmd_compare(args: argparse.Namespace) -> int:
    """privrl compare: create the demo's runs side by side (or read their ids), wait until they
    have finished, and print them side by side: exact regret, % of random, eps and delta spent,
    episodes per second."""
    from privrl.client.demo import demo_configs, demo_label, print_comparison, run_record, story
    from privrl.client.evaluator import evaluate
    from privrl.lab.experiments import regret_summary
    from privrl.verdict import verdict_tail

    if args.results:
        if args.run_file or args.create:
            raise CliError("compare either saved RESULTS files or the runs of --run-file on a"
                           " server, not both")
        from privrl.client.compare_results import compare_results

        out = compare_results(args.results, args.test, args.alpha)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(out))
        return 0
    if not args.run_file:
        raise CliError("compare what? give saved RESULTS files (privrl compare A/summary.json"
                       " B/summary.json) or --run-file FILE of runs on a server")
    mdp = world_from_args(args).build()
    path = Path(args.run_file)
    try:
        if args.create:
            configs = demo_configs(args, mdp)
            need = args.credentials is not None
            with _api(args, admin=True) as api:
                ids = [api.create_run(c, credentials=need).id for c in configs]
                tokens = [t for i in ids for t in api.credentials(i, args.credentials_count)
                          ] if need else []
            if need:  # before the run file: the users find both once they find it
                keys = Path(args.credentials)
                part = keys.with_name(keys.name + ".tmp")
                part.write_text("".join(f"{t}\n" for t in tokens))
                os.replace(part, keys)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("".join(f"{i}\n" for i in ids))
            os.replace(tmp, path)  # the users see the whole file or none of it
            print("created side by side: " + ", ".join(
                f"{demo_label(c)} = {i}" for c, i in zip(configs, ids, strict=True)),
                file=sys.stderr, flush=True)
        else:
            args.run, args.wait_for_file = None, 0.0
            ids = _run_ids(args)
        with _api(args) as api:
            rates = watch_runs(api, ids, args.every, args.timeout)
            results = []
            for run_id in ids:
                info = api.get_run(run_id)
                ev = evaluate(_server(args), run_id, mdp, api=api)
                results.append({
                    **run_record(api, info.config, run_id),
                    "regret": regret_summary(ev.regret[None, :], mdp,
                                             tail=verdict_tail(ev.regret.size)),
                    "http": {"episodes": int(ev.regret.size),
                             "episodes_per_second": rates[run_id]},
                })
    except ApiError as exc:
        raise CliError(str(exc)) from None
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"results": results}))
    print_comparison(results)
    text = story(results)
    if text:
        print(text)
    if args.dashboard:
        print(f"open {args.dashboard} : the dashboard of these runs (the server keeps running)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """privrl demo: server + user processes, non-private / JDP / LDP, table and plot."""
    from privrl.client.demo import run_demo

    return run_demo(args)


def add_demo_run_options(p: argparse.ArgumentParser, when: str = "") -> None:
    """The demo's runs (`privrl demo`, `privrl compare --create`), one per trust boundary: one
    budget for every private run, one preset and pooling for all, the JDP run's counter and
    schedule, the secure-aggregation run's cohorts and assumptions."""
    p.add_argument("--epsilon", type=positive_float, default=DEMO_EPSILON,
                   help="privacy budget per user of every private run (JDP, secure aggregation,"
                   " LDP: the same for all; their ledgers never exceed it). At K = 3000 the"
                   " default JDP run learns from"
                   f" {DEMO_EPSILON:g} (docs/results/demo/budget.json), pooled LDP not even at"
                   f" 20{when}")
    p.add_argument("--delta", type=float, default=1e-5,
                   help=f"delta of the Gaussian mechanism (ignored with laplace){when}")
    p.add_argument("--mechanism", choices=["laplace", "gaussian"], default="gaussian",
                   help="noise of every private run: gaussian (zCDP) or laplace (pure epsilon;"
                   " with --counter tree or smoothed; secure aggregation releases gaussian only"
                   f" and sits out){when}")
    p.add_argument("--pooled", action=argparse.BooleanOptionalAction, default=True,
                   help="pool the statistics over h (RiverSwim is time-homogeneous); --no-pooled:"
                   f" per-step statistics as in the paper{when}")
    p.add_argument("--preset", choices=["faithful", "practical"], default="practical",
                   help=f"the knob preset of every run{when}")
    p.add_argument("--counter", choices=list(COUNTERS), default=DEMO_COUNTER,
                   help="the JDP run's continual counter: tree (the papers'), smoothed"
                   " (Honaker's upward pass) or matrix (square-root factorization; needs"
                   f" --mechanism gaussian){when}")
    p.add_argument("--schedule", default=DEMO_SCHEDULE, metavar="every|batch:B|geometric:r",
                   help="when the JDP run's billboard is refreshed: after every episode, every B"
                   " episodes or after episodes ceil(r^j); it must release within --episodes"
                   f" (the LDP run releases every report){when}")
    p.add_argument("--cohort", type=positive_int, default=DEMO_COHORT, metavar="B",
                   help="users per cohort of the secure-aggregation run, at most (it releases"
                   " one noisy sum per cohort): the largest divisor of --episodes up to B, so"
                   f" that every cohort is full (default {DEMO_COHORT}){when}")
    p.add_argument("--dropout", type=float, default=DEFAULT_DROPOUT,
                   help="the fraction of a cohort that may drop out, which the secure-"
                   f"aggregation run's noise is calibrated for (default {DEFAULT_DROPOUT:g})"
                   f"{when}")
    p.add_argument("--collusion", type=float, default=DEFAULT_COLLUSION,
                   help="the fraction of a cohort that may collude with the server (default"
                   f" {DEFAULT_COLLUSION:g}){when}")


def _server_option(p: argparse.ArgumentParser) -> None:
    """--server URL (default: $PRIVRL_SERVER)."""
    p.add_argument("--server", default=None,
                   help=f"server base URL, e.g. http://127.0.0.1:8000 (default ${SERVER_ENV})")


def register(sub: argparse._SubParsersAction) -> None:
    """Add serve, runs, ledger, users, evaluate and demo to the `privrl` parser."""
    p = sub.add_parser(
        "serve", help="start the billboard server (python -m privrl.server)",
        description="Start the billboard server: it hosts runs, hands out claims, takes the users'"
        " reports and publishes the privatized statistics, the dashboard (/), the API docs"
        " (/docs) and metrics (/metrics) until Ctrl-C. Creating, deleting or recovering a run"
        " needs the admin token: set PRIVRL_ADMIN_TOKEN in the server's environment (never a"
        " flag: it would show in `ps`) and the same value for `privrl runs create`; without it"
        " the admin routes answer 503.")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=positive_int, default=8000, help="TCP port")
    p.add_argument("--db", default="privrl.db", help="SQLite file holding the runs")
    p.add_argument("--claim-timeout", type=positive_float, default=None,
                   help="seconds before an unreported claim lapses (default: $PRIVRL_CLAIM_TIMEOUT,"
                   " else 30)")
    p.add_argument("--sequential", action="store_true",
                   help="hand out one episode at a time (the paper's protocol)")
    p.add_argument("--access-log", action="store_true",
                   help="log one line per HTTP request (default: $PRIVRL_ACCESS_LOG, else off)")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"],
                   help="the server's log level")
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser("wait", help="wait until a server is ready (its /readyz answers), e.g."
                       " after `privrl serve ... &`; exit 2 if it is not within --timeout")
    _server_option(p)
    p.add_argument("--timeout", type=positive_float, default=300.0,
                   help="seconds to wait (a first start on a cold cache compiles the kernels"
                   " before the server listens: about 30 s on 2 idle cores, more on busy ones)")
    p.set_defaults(handler=cmd_wait)

    runs = sub.add_parser(
        "runs", help="create, list, show, delete, continue and stop runs on a server")
    rsub = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    p = rsub.add_parser("create", help="create a run (needs PRIVRL_ADMIN_TOKEN); prints its id")
    _server_option(p)
    add_world_options(p)
    add_learning_options(p, many=False)
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="the server's secret noise seed, for reproducible experiments only"
                   f" (default ${SERVER_SEED_ENV}, else the server draws one from its CSPRNG);"
                   " no route ever returns it")
    p.add_argument("--write-id", default=None, metavar="FILE",
                   help="also write the id to FILE (default: only print it)")
    p.add_argument("--credentials", action="store_true",
                   help="claims need a user credential (issue them with `privrl runs"
                   " credentials`), each with its own limit of outstanding claims: use it for"
                   " any deployment; default: anyone may claim and the limit applies per client"
                   " address, which one client with many addresses gets around (local"
                   " simulation only)")
    p.set_defaults(handler=cmd_runs_create)
    p = rsub.add_parser("credentials", help="issue user credentials of a run that requires them"
                        " (admin); one per line")
    _server_option(p)
    p.add_argument("run", type=run_id_arg, help="run id")
    p.add_argument("--count", type=positive_int, default=1, help="how many to issue")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="append them to FILE (default: print them)")
    p.set_defaults(handler=cmd_runs_credentials)
    p = rsub.add_parser("list", help="list runs")
    _server_option(p)
    p.set_defaults(handler=cmd_runs_list)
    p = rsub.add_parser("show", help="a run's configuration, progress and privacy spent")
    _server_option(p)
    p.add_argument("run", type=run_id_arg, help="run id")
    p.add_argument("--json", action="store_true", help="print the public run info as JSON")
    p.set_defaults(handler=cmd_runs_show)
    for name, handler, text in (
        ("delete", cmd_runs_delete, "delete a run (admin)"),
        ("continue", cmd_runs_recover, "go on with a run held because the server's store went"
         " back, under a new noise epoch (admin; charged as a fresh counter, refused beyond the"
         " budget)"),
        ("stop", cmd_runs_recover, "stop a run held because the server's store went back: no"
         " more claims or reports, its releases stay served (admin)"),
    ):
        p = rsub.add_parser(name, help=text)
        _server_option(p)
        p.add_argument("run", type=run_id_arg, help="run id")
        p.set_defaults(handler=handler)

    p = sub.add_parser("ledger", help="every privacy charge of a run, with the running total")
    _server_option(p)
    p.add_argument("run", type=run_id_arg, help="run id")
    p.add_argument("--json", action="store_true", help="print the ledger view as JSON")
    p.set_defaults(handler=cmd_ledger)

    p = sub.add_parser("users", help="simulate users (one episode each) against a run")
    _server_option(p)
    ident = p.add_mutually_exclusive_group(required=True)
    ident.add_argument("--run", type=run_id_arg, help="run id")
    ident.add_argument("--run-file",
                       help="file with run ids, one per line: every run is played side by side"
                       " (each with its own users' seed)")
    p.add_argument("--wait-for-file", type=float, default=0.0,
                   help="seconds to wait for --run-file (and --credentials) to appear")
    p.add_argument("--credentials", default=None, metavar="FILE",
                   help="user credentials, one per line (`privrl runs credentials --out FILE`):"
                   " needed for runs that require them; each run uses its own (default: none)")
    p.add_argument("--progress-every", type=positive_float, default=None,
                   help="print a progress line every this many seconds (for logs; default:"
                   " none, the progress bar unless --quiet)")
    p.add_argument("--users", type=positive_int, default=None,
                   help="number of users (episodes); default: until the run is finished")
    p.add_argument("--concurrency", type=positive_int, default=8,
                   help="users at a time (all --processes together)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="the users' secret seed: user k plays from (seed, 'user', k) and"
                   " randomizes at its own nonces, kept in $PRIVRL_STATE_DIR (default"
                   f" ${CLIENT_SEED_ENV}, else each process draws its own from the OS CSPRNG);"
                   " fixed seeds are for reproducible simulation only")
    p.add_argument("--attempts", type=positive_int, default=8,
                   help="attempts per request on transient failures")
    p.add_argument("--patience", type=positive_float, default=120.0,
                   help="seconds to keep waiting while every episode is claimed (HTTP 409)")
    p.add_argument("--json-out", default=None,
                   help="write counts and latencies as JSON to this file (default: none)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_swarm_options(p)
    add_world_options(p, of_run=True)
    p.set_defaults(handler=cmd_users)

    p = sub.add_parser("evaluate", help="exact regret of a run from its public policy log")
    _server_option(p)
    p.add_argument("--run", required=True, type=run_id_arg, help="run id")
    p.add_argument("--tail", type=positive_int, default=100,
                   help="the last episodes averaged for the per-episode regret")
    p.add_argument("--json-out", default=None,
                   help="write per-episode regret as JSON to this file (default: none)")
    add_world_options(p, of_run=True)
    p.set_defaults(handler=cmd_evaluate)

    p = sub.add_parser("compare", help="saved results with a stated test (privrl compare"
                       " A/summary.json B/summary.json), or the demo's runs on a server: create"
                       " them side by side (or take their ids), wait until they finish, compare"
                       " them",
                       description="With RESULTS (summary.json files of `privrl run` or `privrl"
                       " demo`, or their directories): each configuration's seeds give one"
                       " sample (every seed's mean regret over its last 10% of episodes); one"
                       " file's configurations are compared pairwise, several files' same"
                       " configurations across them, with --test and Holm's adjustment, the"
                       " test named in the output. With --run-file: with --create, create the"
                       " demo's runs (non-private, JDP, secure aggregation and LDP at one budget)"
                       " on --server"
                       " and write their ids to --run-file; then wait until users have played"
                       " every run to the end (`privrl users --run-file FILE`) and print them"
                       " side by side. This is what the compose setup runs.")
    p.add_argument("results", nargs="*", metavar="RESULTS",
                   help="saved results to compare (summary.json or its directory)")
    p.add_argument("--test", choices=["welch", "permutation"], default="welch",
                   help="with RESULTS: Welch's t-test (default) or a permutation test of the"
                   " difference of means")
    p.add_argument("--alpha", type=positive_float, default=0.05,
                   help="with RESULTS: the family-wise level of the decisions")
    _server_option(p)
    p.add_argument("--run-file", default=None,
                   help="the runs' ids, one per line (written there with --create; default:"
                   " none, compare saved RESULTS instead)")
    p.add_argument("--credentials", default=None, metavar="FILE",
                   help="with --create: the runs require user credentials; issue"
                   " --credentials-count of each and write them to FILE (for `privrl users"
                   " --credentials FILE`; default: none, the runs are open)")
    p.add_argument("--credentials-count", type=positive_int, default=64,
                   help="credentials issued per run (--credentials)")
    p.add_argument("--create", action="store_true",
                   help="create the runs first (needs PRIVRL_ADMIN_TOKEN)")
    p.add_argument("--episodes", type=positive_int, default=3000, help="K per run (--create)")
    add_demo_run_options(p, " (--create)")
    p.add_argument("--every", type=positive_float, default=10.0,
                   help="seconds between progress lines while waiting")
    p.add_argument("--timeout", type=positive_float, default=3600.0,
                   help="seconds to wait for every run to finish")
    p.add_argument("--dashboard", default=None,
                   help="URL of the dashboard to print at the end (default: none)")
    p.add_argument("--json-out", default=None,
                   help="write the compared results as JSON to this file (default: none)")
    add_world_options(p)
    p.set_defaults(handler=cmd_compare)

    p = sub.add_parser("demo", help="server + user processes: non-private, JDP, secure"
                       " aggregation and LDP",
                       description="A real server and user processes on loopback play RiverSwim"
                       " once per trust boundary, side by side: non-private, JDP, secure"
                       " aggregation (cohorts of --cohort users) and LDP at the same epsilon"
                       " and delta; prints what each learned (over its last 10% of episodes) and"
                       " spent, writes regret.png and summary.json to --out. The dashboard's URL"
                       " is printed at the start: open it to watch the runs live.")
    p.add_argument("--episodes", type=positive_int, default=3000,
                   help="K per run (about 2 minutes per seed for three runs on 2 cores, before"
                   " the secure-aggregation run joined)")
    p.add_argument("--seeds", type=positive_int, default=3,
                   help="runs of each configuration, side by side, each with its own seeds: the"
                   " demo prints every run's verdict and a 95%% interval over them (1: one run"
                   " each, no interval)")
    p.add_argument("--users-processes", type=positive_int, default=2,
                   help="user processes per run (one with --sequential)")
    p.add_argument("--concurrency", type=positive_int, default=4,
                   help="users at a time in each process")
    p.add_argument("--horizon", type=positive_int, default=20, help="H of RiverSwim")
    add_demo_run_options(p)
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="reproducible simulation: the server's and the users' seeds are derived"
                   " from it independently (default: each drawn from the OS CSPRNG)")
    p.add_argument("--sequential", action="store_true",
                   help="strictly sequential server (one episode in flight)")
    p.add_argument("--out", default="results/demo", help="output directory")
    p.add_argument("--force", action="store_true",
                   help="overwrite the results already in --out (refused otherwise)")
    p.add_argument("--keep-serving", action="store_true",
                   help="after the tables, keep the server and its dashboard up until Ctrl-C")
    p.set_defaults(handler=cmd_demo)
