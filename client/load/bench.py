"""`privrl bench http`: how close the real episode path comes to the server's trivial-endpoint
ceiling, measured side by side in one run on one machine.

Both halves are driven by the same generator, Locust FastHttpUser users in P worker processes
(default) or the multi-process swarm of `privrl users`: (a) the ceiling, GET /healthz in a loop
from C concurrent users, and (b) real DP-UCBVI runs on RiverSwim in JDP and LDP mode played by C
concurrent users (claim, roll out, randomize in LDP, report, with privrl's own user code), each
phase for the same number of seconds and on a fresh run, each (b) phase right after an (a) phase
at the same C. `ratio` = (b) requests/s / (a) requests/s of such a pair (the median over
--repeat). The server's and the generator's CPU use say which one saturated; `cpu_ratio` = the
server's CPU per (a) request / its CPU per (b) request in the same pair, what `ratio` would be
with the server alone on its core (the two share this machine's cores).
"""

from __future__ import annotations

import os
import secrets
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privrl.client.api import ServerAPI
from privrl.client.load.locust_run import (
    EPISODES_FILE,
    HEALTHZ_FILE,
    require_locust,
    run_locust,
)
from privrl.client.load.report import swarm_report
from privrl.client.load.swarm import run_swarm, shares
from privrl.client.procs import ServerProcess
from privrl.client.users import Backoff
from privrl.config import RunConfig
from privrl.worlds import riverswim

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SEED_ENV = "PRIVRL_CLIENT_SEED"  # the locustfile's users' seed (environment, never argv)
BENCH_EPISODES = 10_000_000  # K of a bench run: never finished within a phase


def process_cpu(pid: int | None) -> float | None:
    """CPU seconds (user + system) a process on this machine has used so far (Linux /proc)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def bench_config(privacy: str, epsilon: float) -> RunConfig:
    """DP-UCBVI on RiverSwim (H = 20), Gaussian noise, pooled: the demo's private runs."""
    mdp = riverswim(20)
    return RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=BENCH_EPISODES,
                     privacy=privacy, epsilon=epsilon, delta=1e-5, mechanism="gaussian",
                     preset="practical", knobs={"pooled": True})


def swarm_phase(url: str, run_id: str, users: int, seconds: float, processes: int,
                connections: int, seed: int | None, mode: str) -> dict[str, Any]:
    """One phase driven by the swarm of `privrl users`: `users` workers for `seconds`."""
    parts = shares(url, run_id, None, users, processes, connections, seed, riverswim(20),
                   Backoff(), seconds, mode)
    results = run_swarm(parts, f"{mode} x {users}", None, progress=False)
    row = swarm_report(results, {"processes": len(parts), "concurrency": users})
    for key in ("timeline", "user_errors", "run_id"):
        row.pop(key)
    return row


def locust_phase(url: str, run_id: str, users: int, seconds: float, processes: int,
                 seed: int | None, mode: str) -> dict[str, Any]:
    """One phase driven by Locust FastHttpUser users (independent headless processes)."""
    if mode == "healthz":
        out = run_locust(HEALTHZ_FILE, url, users, seconds, processes)
    else:
        out = run_locust(EPISODES_FILE, url, users, seconds, processes,
                         extra=["--privrl-run", run_id],
                         env={} if seed is None else {SEED_ENV: str(seed)})
    lat, rates, errors = out["latency_ms"], out["requests_per_second"], out["errors_by_kind"]
    failed = sum(v for k, v in errors.items() if k.startswith("report "))
    reports = int(lat.get("report", {}).get("count", 0))
    acked = reports - failed
    return {
        "processes": out["processes"], "concurrency": users, "seconds": seconds,
        "acknowledged": acked,
        "episodes_per_second": rates.get("report", 0.0),  # answered reports only
        "requests": int(sum(v["count"] for v in lat.values())),
        "requests_per_second": rates.get("all", 0.0), "latency_ms": lat,
        "errors": sum(errors.values()), "errors_by_kind": errors,
        "generator_cpu_seconds": out["cpu_seconds"],
    }


def phase(generator: str, url: str, run_id: str, users: int, seconds: float, processes: int,
          connections: int, seed: int | None, mode: str, server_pid: int | None) -> dict[str, Any]:
    """One measured phase with either generator, plus the CPU cores each side used."""
    cpu0 = process_cpu(server_pid)
    if generator == "locust":
        row = locust_phase(url, run_id, users, seconds, processes, seed, mode)
    else:
        row = swarm_phase(url, run_id, users, seconds, processes, connections, seed, mode)
    cpu1 = process_cpu(server_pid)
    wall = row["seconds"]
    row["generator_cpu_cores"] = row.pop("generator_cpu_seconds") / wall
    used = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    row["server_cpu_cores"] = used / wall if used is not None else None
    row["server_cpu_ms_per_request"] = (
        1000 * used / row["requests"] if used is not None and row["requests"] else None
    )
    return row


def cpu_ratio(ceiling: dict[str, Any], row: dict[str, Any]) -> float | None:
    """The server's CPU per /healthz request over its CPU per episode request, measured in the
    same repetition: what the ratio would be if the server had its core to itself for the whole
    phase (None when the server is not ours)."""
    top, own = ceiling["server_cpu_ms_per_request"], row["server_cpu_ms_per_request"]
    return top / own if top and own else None


GENERATORS = {
    "locust": "Locust FastHttpUser (geventhttpclient): P independent `locust --headless`"
              " processes, the shipped locustfile's EpisodeUser for runs, HealthzUser for the"
              " ceiling",
    "swarm": "the swarm of `privrl users`: P spawned processes, asyncio users over bounded httpx"
             " pools",
}


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The repetition with the median requests/s (the lower one of an even count), with every
    repetition's requests/s and episodes/s beside it."""
    ranked = sorted(rows, key=lambda r: r["requests_per_second"])
    row = dict(ranked[(len(ranked) - 1) // 2])
    row["requests_per_second_runs"] = [r["requests_per_second"] for r in rows]
    row["episodes_per_second_runs"] = [r["episodes_per_second"] for r in rows]
    return row


def measure_once(generator: str, url: str, api: ServerAPI, users: list[int], seconds: float,
                 processes: int, connections: int, privacies: list[str], epsilon: float,
                 seed: int | None, pid: int | None, say: Callable[[str], None]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One repetition: each privacy mode at each C on a fresh run, each right after its own
    ceiling phase at the same C (this VM's speed drifts by tens of percent within minutes, so
    a ratio compares phases measured seconds apart)."""
    ceiling, episodes = [], []
    for privacy in privacies:
        for n in users:
            top = phase(generator, url, "", n, seconds, processes, connections, seed, "healthz",
                        pid)
            ceiling.append(top)
            say(f"ceiling /healthz x {n}: {top['requests_per_second']:.0f} requests/s, p99 "
                f"{top['latency_ms']['healthz']['p99_ms']:.1f} ms, {top['errors']} errors"
                f"{cpu_text(top)}")
            run_id = api.create_run(bench_config(privacy, epsilon)).id
            row = phase(generator, url, run_id, n, seconds, processes, connections, seed,
                        "episodes", pid)
            row["privacy"] = privacy
            row["server_reported"] = api.get_run(run_id).status.reported
            row["ceiling_requests_per_second"] = top["requests_per_second"]
            row["ceiling_server_cpu_ms_per_request"] = top["server_cpu_ms_per_request"]
            row["ratio"] = row["requests_per_second"] / top["requests_per_second"]
            row["cpu_ratio"] = cpu_ratio(top, row)
            episodes.append(row)
            say(episode_text(row))
    return ceiling, episodes


def embedded_settings(users: int) -> dict[str, str]:
    """The embedded server's environment: every user comes from this machine's one address, so
    its per-address claim cap (256 by default) and a run's window of outstanding claims (1024)
    are raised to the users, or the bench would measure refusals (429), not the episode path
    (docs/how-to/load-test.md, the claim caps)."""
    return {"PRIVRL_MAX_CLAIMS_PER_ADDRESS": str(max(256, users)),
            "PRIVRL_MAX_OUTSTANDING": str(max(1024, users))}


def bench_http(server: str | None, users: list[int], seconds: float, processes: int,
               connections: int, privacies: list[str], epsilon: float, generator: str = "locust",
               repeat: int = 1, say: Callable[[str], None] = print) -> dict[str, Any]:
    """`repeat` repetitions of every phase, interleaved (machine load drifts over all phases
    alike); per phase the median repetition; `ratio` = the median over the repetitions of an
    episode phase's requests/s over the ceiling phase just before it. The JSON."""
    if generator == "locust":
        require_locust()
    with tempfile.TemporaryDirectory(prefix="privrl-bench-") as tmp:
        token = os.environ.get("PRIVRL_ADMIN_TOKEN") if server else secrets.token_hex(16)
        settings = embedded_settings(max(users))
        embedded = None if server else ServerProcess(Path(tmp) / "bench.db", token or "",
                                                     env=settings)
        if embedded is not None:
            embedded.start(timeout=60)
        try:
            url = server or embedded.url  # type: ignore[union-attr]
            pid = embedded.proc.pid if embedded is not None and embedded.proc else None
            load = os.getloadavg()
            with ServerAPI(url, token=token) as api:
                reps = []
                for r in range(repeat):
                    tag = f"[{r + 1}/{repeat}] " if repeat > 1 else ""
                    reps.append(measure_once(generator, url, api, users, seconds, processes,
                                             connections, privacies, epsilon, None,
                                             pid, lambda line, tag=tag: say(tag + line)))
        finally:
            if embedded is not None:
                embedded.stop()
    ceiling = [median_row([top for rep in reps for top in rep[0] if top["concurrency"] == n])
               for n in users]
    episodes = [median_row([rep[1][j] for rep in reps]) for j in range(len(reps[0][1]))]
    for j, row in enumerate(episodes):  # each ratio within its pair of phases, then the median
        for name in ("ratio", "cpu_ratio"):
            paired = [rep[1][j][name] for rep in reps]
            row[f"{name}_runs"] = paired
            row[name] = statistics.median(paired) if None not in paired else None
    every = [row for rep in reps for row in rep[1]]
    return {
        "generator": generator, "generator_detail": GENERATORS[generator],
        "processes": processes, "connections_per_process": connections,
        "server": server or "embedded (python -m privrl.server, temporary database)",
        "server_settings": {} if server else settings,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": load,
                    "load_average_at_end": os.getloadavg()},
        "seconds_per_phase": seconds, "repeat": repeat,
        "acknowledged_total": sum(r["acknowledged"] for r in every),
        "server_reported_total": sum(r["server_reported"] for r in every),
        "ceiling": ceiling, "episodes": episodes,
    }


def cpu_text(row: dict[str, Any]) -> str:
    """'; CPU: server 0.93, generator 0.71 cores' (the server's when it is ours)."""
    server = row["server_cpu_cores"]
    server_text = "?" if server is None else f"{server:.2f}"
    return f"; CPU cores: server {server_text}, generator {row['generator_cpu_cores']:.2f}"


def episode_text(row: dict[str, Any]) -> str:
    """One line of an episode phase."""
    lat = row["latency_ms"]
    p99 = ", ".join(f"{name} p99 {lat[name]['p99_ms']:.0f} ms" for name in ("claim", "report")
                    if name in lat)
    cpu = "" if row.get("cpu_ratio") is None else \
        f" (server CPU per request: {row['cpu_ratio']:.0%} of the ceiling's)"
    kinds = ", ".join(f"{k}: {v}" for k, v in sorted(row["errors_by_kind"].items(),
                                                     key=lambda kv: -kv[1])[:3])
    return (f"{row['privacy']} x {row['concurrency']}: {row['episodes_per_second']:.1f} "
            f"episodes/s, {row['requests_per_second']:.0f} answered requests/s ="
            f" {row['ratio']:.0%} of the ceiling{cpu}; {p99}; {row['acknowledged']} acknowledged,"
            f" server counted {row['server_reported']}; {row['errors']} errors (refused or"
            f" failed, not counted as throughput){f': {kinds}' if kinds else ''}"
            f"{cpu_text(row)}")


def plot_bench(out: dict[str, Any], path: Path) -> Path:
    """Left: answered requests/s of the ceiling and of each privacy mode; right: episodes
    acknowledged per second of each mode, with the refused or failed requests of each phase
    written on its bar (they are errors, never throughput); both grouped by concurrency."""
    import numpy as np
    from matplotlib.figure import Figure

    users = [row["concurrency"] for row in out["ceiling"]]
    privacies = list(dict.fromkeys(row["privacy"] for row in out["episodes"]))
    by_mode = {p: [row for row in out["episodes"] if row["privacy"] == p] for p in privacies}
    fig = Figure(figsize=(11, 4.2))
    left, right = fig.subplots(1, 2)
    x = np.arange(len(users))
    hatches = ("", "//", "..", "xx")
    requests = [("/healthz ceiling", [r["requests_per_second"] for r in out["ceiling"]])]
    requests += [(f"{p.upper()} episodes", [r["requests_per_second"] for r in by_mode[p]])
                 for p in privacies]
    width = 0.8 / len(requests)
    for i, (name, values) in enumerate(requests):
        bars = left.bar(x + (i - (len(requests) - 1) / 2) * width, values, width, label=name,
                        color=f"C{i}", hatch=hatches[i % len(hatches)], edgecolor="black", lw=0.5)
        left.bar_label(bars, fmt="%.0f", fontsize=7)
    left.set_xticks(x, [f"{n} users" for n in users])
    left.set(ylabel="answered requests / s", title="requests answered (refused ones excluded)")
    left.legend(fontsize=8)
    width = 0.8 / max(1, len(privacies))
    for i, p in enumerate(privacies):
        rows = by_mode[p]
        bars = right.bar(x + (i - (len(privacies) - 1) / 2) * width,
                         [r["episodes_per_second"] for r in rows], width,
                         label=f"{p.upper()} episodes", color=f"C{i + 1}",
                         hatch=hatches[(i + 1) % len(hatches)], edgecolor="black", lw=0.5)
        right.bar_label(bars, labels=[f"{r['episodes_per_second']:.0f}\n{r['errors']} err"
                                      for r in rows], fontsize=7)
    right.set_xticks(x, [f"{n} users" for n in users])
    right.set(ylabel="episodes acknowledged / s", title="episodes / s (errors: refused or"
              " failed requests)")
    right.legend(fontsize=8, loc="upper right")
    for ax in (left, right):  # room above the bars for their labels
        ax.set_ylim(top=ax.get_ylim()[1] * 1.3)
    fig.suptitle("privrl bench http: the episode path vs the /healthz ceiling (same server,"
                 " same generator)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
