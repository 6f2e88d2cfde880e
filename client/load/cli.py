"""The load-testing options of `privrl users` (--processes, --connections, --duration,
--report, --plot) and the swarm path they select."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privrl import trust
from privrl.client.api import ApiError, ServerAPI
from privrl.client.cli_common import CliError, positive_float, positive_int

if TYPE_CHECKING:
    from privrl.client.users import Backoff

CONNECTIONS = 16  # default connection slots per process and kind (claims, reports)


def add_swarm_options(p: argparse.ArgumentParser) -> None:
    """Options of a swarm from several processes with a bounded pool each."""
    p.add_argument("--processes", type=positive_int, default=1,
                   help="user processes: --users and --concurrency are split over them")
    p.add_argument("--connections", type=positive_int, default=CONNECTIONS,
                   help="keep-alive connection slots per process for claims, and as many for"
                   " reports: users wait for a slot, so the pool never scans a long queue")
    p.add_argument("--duration", type=positive_float, default=None,
                   help="seconds after which no user starts another episode (default: none,"
                   " play --users episodes or until the run is finished)")
    p.add_argument("--report", default=None, metavar="FILE",
                   help="write the swarm's report as JSON: acknowledged, episodes/s, p50/p95/p99"
                   " per endpoint, errors by kind, a per-second timeline (default: none)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="draw throughput and latency over time to this PNG (default: none)")


def _remaining(server: str, run_id: str) -> tuple[int, bool]:
    """(episodes not yet reported, finished) of a run, from its public status."""
    with ServerAPI(server) as api:
        status = api.get_run(run_id).status
    return max(0, status.episodes - status.reported), status.finished


def swarm_command(args: argparse.Namespace, server: str, run_id: str, seed: int | None,
                  mdp: Any, backoff: Backoff, credentials: Sequence[str] = ()) -> int:
    """`privrl users` over several processes: live progress, one-line summary, JSON, PNG."""
    from privrl.client.load.report import one_line, plot_report, swarm_report
    from privrl.client.load.swarm import run_swarm, shares
    from privrl.client.users import UserError

    remaining, finished = _remaining(server, run_id)
    if finished:
        raise CliError(f"run {run_id} has already finished (every episode is reported): nothing"
                       " to play; create a new run with `privrl runs create`")
    parts = shares(server, run_id, args.users, args.concurrency, args.processes,
                   args.connections, seed, mdp, backoff, args.duration,
                   credentials=tuple(credentials))
    total = remaining if args.users is None else min(args.users, remaining)
    try:
        results = run_swarm(parts, f"users {run_id}", total, progress=not args.quiet,
                            progress_every=args.progress_every)
    except (UserError, ApiError) as exc:
        raise CliError(str(exc)) from None
    report = swarm_report(results, {
        "processes": len(parts), "concurrency": sum(p.concurrency for p in parts),
        "connections_per_process": args.connections, "users_requested": args.users,
        "duration": args.duration,
    })
    for path in filter(None, (args.report, args.json_out)):
        Path(path).write_text(json.dumps(report, indent=1))
    if args.plot:
        plot_report(report, Path(args.plot))
    print(one_line(report))
    if report["refused"] and not report["acknowledged"]:
        raise CliError(f"the server refused all {report['refused']} reports of run {run_id}: "
                       f"{report['user_errors'][0] if report['user_errors'] else 'no reason'}")
    if report["refused"]:
        print(f"privrl: {report['refused']} report(s) refused: {report['user_errors'][0]}",
              file=sys.stderr)
    return 0


def cmd_locustfile(args: argparse.Namespace) -> int:
    """privrl locustfile: print the path of the shipped locustfile."""
    print(Path(__file__).with_name("locustfile.py"))
    return 0


def cmd_bench_http(args: argparse.Namespace) -> int:
    """privrl bench http: the /healthz ceiling and real JDP/LDP episodes at each concurrency."""
    from privrl.client.load.bench import bench_http, plot_bench
    from privrl.client.users import UserError

    if args.server is None and args.users and max(args.users) > 5000:
        raise CliError("--users above 5000 on one machine: pass --server URL of a bigger host")
    try:
        out = bench_http(args.server, args.users, args.seconds, args.processes,
                         args.connections, args.privacy, args.epsilon, args.generator,
                         args.repeat, say=lambda line: print(line, flush=True))
    except (UserError, ApiError) as exc:
        raise CliError(str(exc)) from None
    except RuntimeError as exc:  # the embedded server did not start, Locust missing or failed
        raise CliError(str(exc)) from None
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json}")
    if args.plot:
        print(f"wrote {plot_bench(out, Path(args.plot))}")
    return 0


def add_bench_http(modes: argparse._SubParsersAction) -> None:
    """`privrl bench http`: a mode of `privrl bench`."""
    p = modes.add_parser(
        "http", help="requests/s of /healthz (the ceiling) beside real JDP and LDP episodes over"
        " HTTP, at each concurrency, measured side by side",
        description="Starts its own server (unless --server), then for each --users C: C"
        " workers GET /healthz for --seconds (the ceiling), and C simulated users play a fresh"
        " DP-UCBVI run on RiverSwim in each --privacy mode for --seconds. Both are driven by the"
        " same --generator: Locust FastHttpUser users in --processes worker processes, or the"
        " multi-process swarm of `privrl users`. Each episode phase follows its own ceiling"
        " phase at the same C; ratio = episode-path requests/s / that ceiling's requests/s.")
    p.add_argument("--server", default=None,
                   help="measure this server (runs are created with $PRIVRL_ADMIN_TOKEN; default:"
                   " start an embedded one on a free loopback port)")
    p.add_argument("--users", type=positive_int, nargs="+", default=[1, 64, 1000],
                   help="concurrent users (and /healthz workers) of each phase")
    p.add_argument("--seconds", type=positive_float, default=10.0,
                   help="length of each phase (users finish the episode they started)")
    p.add_argument("--repeat", type=positive_int, default=1,
                   help="repetitions of every phase, interleaved; the JSON keeps each phase's"
                   " median repetition and every repetition's rates")
    p.add_argument("--privacy", nargs="+", choices=trust.names(),
                   default=[b.name for b in (trust.central_boundary(), trust.local_boundary())
                            if b is not None],
                   help="the runs' trust boundaries (default: the central and the local one)")
    p.add_argument("--epsilon", type=positive_float, default=10.0,
                   help="budget per user of the private runs (Gaussian, delta 1e-5, pooled)")
    p.add_argument("--generator", choices=["locust", "swarm"], default="locust",
                   help="what drives both halves: locust (FastHttpUser, needs privrl[load]) or"
                   " swarm (the processes of `privrl users`, asyncio + httpx)")
    p.add_argument("--processes", type=positive_int, default=2,
                   help="generator processes (never more than a phase's users)")
    p.add_argument("--connections", type=positive_int, default=CONNECTIONS,
                   help="connection slots per generator process and kind (claims, the rest)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="write every phase's figures and the ratios as JSON (default: none)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="draw requests/s of the ceiling and the runs per concurrency to this"
                   " PNG (default: none)")
    p.set_defaults(handler=cmd_bench_http)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `locustfile`."""
    p = sub.add_parser("locustfile", help="print the path of the locustfile whose users play"
                       " real episodes: locust -f \"$(privrl locustfile)\" --privrl-run ID ..."
                       " (needs privrl[load])")
    p.set_defaults(handler=cmd_locustfile)
