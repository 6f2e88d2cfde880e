"""Secure aggregation over HTTP beside LDP, measured in one run on one machine
(docs/explanation/secure-aggregation.md, "Over HTTP: measured").

One `python -m privrl.server` process on a free loopback port (INFO log to a file), then for
each mode a fresh run of pooled DP-UCBVI on RiverSwim (H = 20, Gaussian, the practical preset,
K = --episodes) played to its end by the swarm of `privrl users` (--processes P spawned
processes, --concurrency C users in all): an LDP run, then a `secagg` run with cohorts of B
for each --cohort B. Per run: episodes/s (K over the swarm's wall time), the server's and the
users' CPU, and at the end what the server counted (reported, finished) and released (ledger
entries `secagg:cohort`, cohorts released or aborted, from the server's log, with each
cohort's seconds from its first member's keys to its release and from round 0's close).

    python scripts/load/secagg_http.py --episodes 2000 --cohort 100 1000 --concurrency 1000 \\
        --processes 4 --json docs/results/secagg/http.json
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import statistics
import tempfile
from pathlib import Path
from typing import Any

from privrl.client.api import ServerAPI
from privrl.client.load.bench import process_cpu
from privrl.client.load.report import swarm_report
from privrl.client.load.swarm import run_swarm, shares
from privrl.client.procs import ServerProcess
from privrl.client.users import Backoff
from privrl.config import RunConfig
from privrl.worlds import riverswim
from results_table import save_table

COHORT_LINE = re.compile(r"run (\w+): cohort (\d+),? (released|refused|aborted|the run's last)"
                         r"(?: \((\d+) of (\d+) users)?(?: (\d+) episodes)?.*?\bin"
                         r" ([\d.]+) s(?: \(rounds ([\d.]+) s\))?")
PATIENCE = 600.0  # seconds a user waits for a claim (a cohort may hold every episode left)
COLUMNS = [("privacy", ""), ("B", "g"), ("K", "g"), ("users (processes)", ""),
           ("episodes/s", ".1f"), ("of LDP's", ".2f"), ("reported", "g"), ("finished", ""),
           ("counted in cohorts", "g"), ("cohorts released", "g"), ("aborted", "g"),
           ("s per cohort", ".1f"), ("its rounds, s", ".2f"), ("server CPU cores", ".2f")]


def config(privacy: str, episodes: int, cohort: int | None, epsilon: float) -> RunConfig:
    """Pooled DP-UCBVI on RiverSwim (H = 20), Gaussian, the practical preset (the bench's run)."""
    mdp = riverswim(20)
    extra = {} if cohort is None else {"schedule": f"batch:{cohort}"}
    return RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes,
                     privacy=privacy, epsilon=epsilon, delta=min(1e-5, 0.1 / episodes),
                     mechanism="gaussian", preset="practical", knobs={"pooled": True}, **extra)


def cohorts_of(log: str, run_id: str) -> list[dict[str, Any]]:
    """Every cohort of `run_id` the server's log says ended: outcome, the episodes it counted
    (its members; none when aborted) and seconds."""
    out = []
    for m in COHORT_LINE.finditer(log):
        if m.group(1) == run_id:
            last = m.group(3) == "the run's last"
            counted = int(m.group(6)) if last else int(m.group(5) or 0)
            out.append({"cohort": int(m.group(2)), "outcome": "closed" if last else m.group(3),
                        "survivors": None if m.group(4) is None else int(m.group(4)),
                        "counted": counted, "seconds": float(m.group(7)),
                        "rounds_seconds": None if m.group(8) is None else float(m.group(8))})
    return out


def play(server: ServerProcess, api: ServerAPI, cfg: RunConfig, concurrency: int,
         processes: int, log: Path) -> dict[str, Any]:
    """One run played to its end by the swarm; what the users and the server saw."""
    run_id = api.create_run(cfg).id
    pid = server.proc.pid if server.proc else None
    cpu0 = process_cpu(pid)
    parts = shares(server.url, run_id, None, concurrency, processes, concurrency, None,
                   riverswim(20), Backoff(patience=PATIENCE), None)
    results = run_swarm(parts, f"{cfg.privacy} x {concurrency}", cfg.episodes, progress=False)
    row = swarm_report(results, {"processes": len(parts), "concurrency": concurrency})
    cpu1 = process_cpu(pid)
    info, ledger = api.get_run(run_id), api.ledger(run_id)
    cohorts = cohorts_of(log.read_text(), run_id)
    released = [c for c in cohorts if c["outcome"] == "released"]
    seconds = row["seconds"]
    return {
        "privacy": cfg.privacy, "cohort": cfg.schedule if cfg.privacy == "secagg" else None,
        "episodes": cfg.episodes, "concurrency": concurrency, "processes": len(parts),
        "seconds": seconds, "episodes_per_second": cfg.episodes / seconds,
        "acknowledged": row["acknowledged"], "refused": row["refused"],
        "user_errors": row["user_errors"][:5], "latency_ms": row["latency_ms"],
        "user_latency_ms": row["user_latency_ms"],
        "server_cpu_cores": (cpu1 - cpu0) / seconds if cpu0 is not None and cpu1 else None,
        "users_cpu_cores": row["generator_cpu_seconds"] / seconds,
        "reported": info.status.reported, "finished": info.status.finished,
        "ledger_cohorts": sum(c["mechanism"] == "secagg:cohort" for c in ledger.charges),
        "cohorts": cohorts, "cohorts_released": len(released),
        "counted_in_cohorts": sum(c["counted"] for c in cohorts),
        "cohorts_aborted": sum(c["outcome"] == "aborted" for c in cohorts),
        "seconds_per_cohort": (statistics.median(c["seconds"] for c in released)
                               if released else None),
        "rounds_seconds_per_cohort": (statistics.median(c["rounds_seconds"] for c in released)
                                      if released else None),
    }


def table_row(run: dict[str, Any], ldp_rate: float | None) -> list[Any]:
    b = int(run["cohort"].split(":")[1]) if run["cohort"] else None
    secagg = run["privacy"] == "secagg"
    return [run["privacy"], b, run["episodes"], f"{run['concurrency']} ({run['processes']})",
            run["episodes_per_second"],
            run["episodes_per_second"] / ldp_rate if ldp_rate else None,
            run["reported"], run["finished"],
            run["counted_in_cohorts"] if secagg else None,
            run["cohorts_released"] if secagg else None,
            run["cohorts_aborted"] if secagg else None,
            run["seconds_per_cohort"], run["rounds_seconds_per_cohort"],
            run["server_cpu_cores"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000, help="K of every run")
    parser.add_argument("--cohort", type=int, nargs="+", default=[100], help="B of secagg runs")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[200],
                        help="users in flight (one per --cohort, or one for all)")
    parser.add_argument("--processes", type=int, default=2, help="user processes")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--no-ldp", action="store_true", help="secagg runs only")
    parser.add_argument("--claim-timeout", type=float, default=120.0,
                        help="the server's claim timeout (s): an LDP user's claim to report"
                             " and a secagg user's claim to keys, under this machine's load")
    parser.add_argument("--json", type=Path, required=True, help="where the table goes")
    args = parser.parse_args()
    conc = args.concurrency * len(args.cohort) if len(args.concurrency) == 1 else args.concurrency
    with tempfile.TemporaryDirectory(prefix="privrl-secagg-") as tmp:
        token = secrets.token_hex(16)
        most = str(max(max(conc), 1024))
        log = Path(tmp) / "server.log"
        server = ServerProcess(Path(tmp) / "s.db", token, log_path=log,
                               claim_timeout=args.claim_timeout,
                               env={"PRIVRL_MAX_CLAIMS_PER_ADDRESS": most,
                                    "PRIVRL_MAX_OUTSTANDING": most})
        server.start(timeout=60)
        load = os.getloadavg()
        runs = []
        try:
            with ServerAPI(server.url, token=token) as api:
                if not args.no_ldp:
                    runs.append(play(server, api, config("ldp", args.episodes, None,
                                                         args.epsilon), conc[0],
                                     args.processes, log))
                    print(f"ldp: {runs[-1]['episodes_per_second']:.1f} episodes/s", flush=True)
                for b, c in zip(args.cohort, conc, strict=True):
                    runs.append(play(server, api, config("secagg", args.episodes, b,
                                                         args.epsilon), c, args.processes, log))
                    print(f"secagg B={b}: {runs[-1]['episodes_per_second']:.1f} episodes/s,"
                          f" {runs[-1]['seconds_per_cohort']} s per cohort", flush=True)
        finally:
            server.stop()
    ldp = [r for r in runs if r["privacy"] == "ldp"]
    rate = ldp[0]["episodes_per_second"] if ldp else None
    save_table(args.json, COLUMNS, [table_row(r, rate) for r in runs], runs=runs,
               claim_timeout=args.claim_timeout,
               machine={"cpus": os.cpu_count(), "load_average_at_start": load,
                        "load_average_at_end": os.getloadavg()})


if __name__ == "__main__":
    main()
