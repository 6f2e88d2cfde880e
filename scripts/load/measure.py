"""Load figures of a real server and `privrl users`: `python scripts/load/measure.py load ...`
and `python scripts/load/measure.py memory ...` (see docs/results/index.md).

`load`: one `python -m privrl.server` process on a free loopback port, one run of the demo's
world (RiverSwim, H = 20, DP-UCBVI, Gaussian, eps = 10), and `privrl users --concurrency C` in
another process until the run finishes (or `--timeout`). Meanwhile /healthz is polled every
100 ms from a thread of this process. Printed as one JSON line: episodes/s, claim and report
p50/p99 (from the users' --json-out), reports refused by reason and claims refused by reason
(from /metrics), answers by status (from /metrics: the access log is off), /healthz
p50/p99/max, the server's peak RSS, bytes per report and database bytes per episode.
`--processes P` splits the users over P `privrl users` processes (one httpx pool each: one
process with 1,000 connections spends its time scanning its own pool, see
docs/results/index.md).

`memory`: the server's RSS with no run, with one run and with 100 runs hosted at once.
`--python` picks the interpreter (a venv of another checkout measures that version).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
from privrl.client.procs import rss_bytes

TOKEN = "measure-" + secrets.token_hex(8)


def free_port() -> int:
    """A free loopback TCP port."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_spec(privacy: str, episodes: int, pooled: bool) -> dict:
    """The demo's run: RiverSwim (S = 6, A = 2, H = 20), Gaussian eps = 10, delta = 1e-5."""
    spec = {"n_states": 6, "n_actions": 2, "horizon": 20, "episodes": episodes,
            "privacy": privacy, "epsilon": 10.0, "delta": 1e-5, "mechanism": "gaussian"}
    if pooled:
        spec["knobs"] = {"pooled": True}
    return spec


class Server:
    """A server process with its log in a file."""

    def __init__(self, python: str, tmp: Path, env: dict[str, str]) -> None:
        self.port, self.tmp = free_port(), tmp
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = tmp / "load.db"
        self.log = tmp / "server.log"
        full = {**os.environ, "PRIVRL_ADMIN_TOKEN": TOKEN, **env}
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [python, "-m", "privrl.server", "--host", "127.0.0.1", "--port", str(self.port),
                 "--db", str(self.db)], env=full, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("server not ready")

    def create(self, spec: dict) -> str:
        """A new run's id."""
        resp = httpx.post(f"{self.url}/v1/runs", json=spec, timeout=60,
                          headers={"Authorization": f"Bearer {TOKEN}"})
        resp.raise_for_status()
        return resp.json()["id"]

    def db_bytes(self) -> int:
        """Database file plus its WAL."""
        return sum(p.stat().st_size for p in self.tmp.glob("load.db*"))

    def stop(self) -> None:
        """SIGTERM and wait."""
        self.proc.terminate()
        self.proc.wait(timeout=30)


def poll_health(url: str, stop: threading.Event, out: list[float]) -> None:
    """GET /healthz every 100 ms; latencies in ms (a failure counts as 10 s)."""
    with httpx.Client(timeout=10) as http:
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                http.get(f"{url}/healthz").raise_for_status()
                out.append(1e3 * (time.perf_counter() - t0))
            except httpx.HTTPError:
                out.append(1e4)
            stop.wait(0.1)


def reported(url: str, run_id: str) -> tuple[float, int]:
    """(time, reports counted) of a run, from its public status."""
    status = httpx.get(f"{url}/v1/runs/{run_id}", timeout=60).json()["status"]
    return time.time(), int(status["reported"])


def rate(url: str, run_id: str, seconds: float) -> float:
    """Counted reports per second over the next `seconds`."""
    t0, n0 = reported(url, run_id)
    time.sleep(seconds)
    t1, n1 = reported(url, run_id)
    return (n1 - n0) / (t1 - t0)


def metric_sum(text: str, name: str) -> dict[str, float]:
    """Label set -> value of a Prometheus counter."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, value = line.rsplit(" ", 1)
            out[key[len(name):]] = float(value)
    return out


def cmd_load(args: argparse.Namespace) -> dict:
    """One load run; the figures as a dict."""
    tmp = Path(tempfile.mkdtemp(prefix="privrl-load-"))
    env = dict(kv.split("=", 1) for kv in args.env)
    server = Server(args.python, tmp, env)
    try:
        run_id = server.create(run_spec(args.privacy, args.episodes, args.pooled))
        stop, health = threading.Event(), []
        poller = threading.Thread(target=poll_health, args=(server.url, stop, health))
        poller.start()
        peak = [0]

        def watch_rss() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], rss_bytes(server.proc.pid))
                stop.wait(0.5)

        watcher = threading.Thread(target=watch_rss)
        watcher.start()
        privrl = str(Path(args.python).with_name("privrl"))
        outs = [tmp / f"users{i}.json" for i in range(args.processes)]
        each = args.concurrency // args.processes
        world = ["--env", "riverswim", "--horizon", "20"]
        if args.swarm:  # one command: P spawned processes with bounded pools (`--report`)
            outs = []
            cmds = [[privrl, "users", "--server", server.url, "--run", run_id, "--processes",
                     str(args.processes), "--concurrency", str(args.concurrency), "--users",
                     str(args.episodes), "--quiet", "--seed", "7", "--report",
                     str(tmp / "swarm.json"), *world]]
        else:
            cmds = [[privrl, "users", "--server", server.url, "--run", run_id, "--concurrency",
                     str(each), "--quiet", "--json-out", str(out), *world, "--seed", str(i)]
                    for i, out in enumerate(outs)]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for cmd in cmds]
        load_start = os.getloadavg()
        t0 = time.time()
        codes, tail = [], ""
        for proc in procs:
            try:
                text, _ = proc.communicate(timeout=max(1.0, args.timeout - (time.time() - t0)))
                codes.append(proc.returncode)
                tail = text[-300:]
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                codes.append("timeout")
        code = codes[0] if len(set(map(str, codes))) == 1 else codes
        wall = time.time() - t0
        stop.set()
        poller.join()
        watcher.join()
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
        status = httpx.get(f"{server.url}/v1/runs/{run_id}", timeout=30).json()["status"]
        parts = [json.loads(out.read_text()) for out in outs if out.exists()]
        swarm = {}
        if parts:
            ms = {k: [v * 1e3 for p in parts for v in p[f"{k}_seconds"]]
                  for k in ("claim", "report")}
            swarm = {f"{k}_ms_p{q}": float(np.percentile(v, q)) if v else None
                     for k, v in ms.items() for q in (50, 99)}
            swarm["refused"] = sum(p["refused"] for p in parts)
            swarm["reported"] = sum(p["reported"] for p in parts)
        elif (tmp / "swarm.json").exists():  # the users' latencies, retries included
            rep = json.loads((tmp / "swarm.json").read_text())
            swarm = {f"{k}_ms_p{q}": rep["user_latency_ms"][k][f"p{q}_ms"]
                     for k in ("claim", "report") for q in (50, 99)}
            swarm["refused"], swarm["reported"] = rep["refused"], rep["acknowledged"]
            swarm["errors"] = rep["errors_by_kind"]
        statuses: dict[str, float] = {}
        for labels, n in metric_sum(metrics, "privrl_responses_total").items():
            answer = re.search(r'status="(\d+)"', labels).group(1)
            statuses[answer] = statuses.get(answer, 0) + n
        accepted = sum(metric_sum(metrics, "privrl_reports_accepted_total").values())
        body = sum(metric_sum(metrics, "privrl_report_bytes_total").values())
        server.stop()
        db = server.db_bytes()
        return {
            "privacy": args.privacy, "pooled": args.pooled, "concurrency": args.concurrency,
            "processes": args.processes,
            "episodes": args.episodes, "users_exit": code, "users_tail": tail,
            "reported": status["reported"], "finished": status["finished"], "wall_s": wall,
            "episodes_per_s": status["reported"] / wall,
            "claim_ms_p50": swarm.get("claim_ms_p50"), "claim_ms_p99": swarm.get("claim_ms_p99"),
            "report_ms_p50": swarm.get("report_ms_p50"),
            "report_ms_p99": swarm.get("report_ms_p99"),
            "users_refused": swarm.get("refused"), "users_acked": swarm.get("reported"),
            "users_errors": swarm.get("errors"),
            "load_average_at_start": load_start, "load_average_at_end": os.getloadavg(),
            "reports_refused": metric_sum(metrics, "privrl_reports_refused_total"),
            "claims_refused": metric_sum(metrics, "privrl_claims_refused_total"),
            "status_counts": {s: int(statuses[s]) for s in sorted(statuses)},
            "healthz_ms_p50": float(np.percentile(health, 50)),
            "healthz_ms_p99": float(np.percentile(health, 99)),
            "healthz_ms_max": float(max(health)),
            "server_rss_peak_mb": peak[0] / 2**20,
            "bytes_per_report": body / accepted if accepted else None,
            "db_bytes_per_episode": db / status["reported"] if status["reported"] else None,
        }
    finally:
        if server.proc.poll() is None:
            server.stop()


def cmd_memory(args: argparse.Namespace) -> dict:
    """RSS with 0, 1 and `--runs` hosted runs."""
    tmp = Path(tempfile.mkdtemp(prefix="privrl-mem-"))
    server = Server(args.python, tmp, {})
    try:
        spec = run_spec(args.privacy, args.episodes, args.pooled)
        time.sleep(1)
        empty = rss_bytes(server.proc.pid)
        server.create(spec)
        one = rss_bytes(server.proc.pid)
        for _ in range(args.runs - 1):
            server.create(spec)
        many = rss_bytes(server.proc.pid)
        return {"privacy": args.privacy, "pooled": args.pooled, "episodes": args.episodes,
                "rss_empty_mb": empty / 2**20, "rss_one_run_mb": one / 2**20,
                f"rss_{args.runs}_runs_mb": many / 2**20,
                "mb_per_run": (many - one) / (args.runs - 1) / 2**20}
    finally:
        server.stop()


def main() -> None:
    """Parse and measure."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    for name in ("load", "memory"):
        s = sub.add_parser(name)
        s.add_argument("--python", default=sys.executable, help="interpreter of the version")
        s.add_argument("--privacy", default="jdp", choices=["none", "jdp", "ldp"])
        s.add_argument("--pooled", action="store_true", help="statistics pooled over h (demo)")
        s.add_argument("--episodes", type=int, default=3000, help="K")
    load = sub.choices["load"]
    load.add_argument("--concurrency", type=int, default=64, help="users at a time, in all")
    load.add_argument("--processes", type=int, default=1,
                      help="`privrl users` processes sharing the concurrency")
    load.add_argument("--timeout", type=float, default=180.0, help="seconds before giving up")
    load.add_argument("--swarm", action="store_true",
                      help="one `privrl users --processes P --concurrency C --users K` command"
                      " (the multi-process swarm) instead of P separate `privrl users`")
    load.add_argument("--env", nargs="*", default=[], help="server settings NAME=VALUE")
    sub.choices["memory"].add_argument("--runs", type=int, default=100, help="runs hosted")
    args = p.parse_args()
    result = cmd_load(args) if args.what == "load" else cmd_memory(args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
