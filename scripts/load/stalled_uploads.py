"""Stalled uploads against a real server: `python scripts/load/stalled_uploads.py [--before REF]`.

One `python -m privrl.server` on a free loopback port (`privrl.client.procs.ServerProcess`) and
one JDP run of the demo's world. `--connections` (1,200) raw asyncio sockets on 127.0.0.1
(`privrl.client.load.stalled`) each POST a report whose Content-Length is `--body-bytes`
(2,000,000), send `--fraction` (half) of it, then stall: they never send the rest, and close
once the server has or `--hold` seconds (60) after their last byte. Meanwhile the server's RSS
is sampled from /proc/PID/status and /healthz is polled (`measure.poll_health`, from a process of
its own), every 100 ms.

Printed, one JSON line per server: RSS before, peak growth, growth 3 s after the clients have
closed, after a full `gc.collect()` in the server, then after `malloc_trim(0)` (SIGUSR1 and
SIGUSR2 handlers that a `sitecustomize.py` installs in the server process only: they tell
memory held by cyclic garbage from memory glibc keeps after free() from live objects); how many
connections the server closed, by answer (408, 413, 503; "none": still open after `--hold`),
and the latest close (seconds after the attack started); /healthz p50/p99/max in ms.

`--target runs` posts to /v1/runs (an admin route: the body is read before the token is
checked, so only the global cap applies) instead of a report of the run (which its run caps).

`--before REF` first runs the same against the code of commit REF (`git archive`, laid out as
the installed packages and put first on PYTHONPATH), then against this checkout: the two
summaries side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from privrl.client.load.stalled import stall_many
from privrl.client.procs import ServerProcess, rss_bytes

sys.path.insert(0, str(Path(__file__).parent))
from measure import TOKEN, poll_health, run_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024

# Installed in the server process only (its PYTHONPATH): SIGUSR1 runs a full pass of the cycle
# collector, SIGUSR2 returns the heap glibc keeps after free() to the OS.
PROBE_HOOK = """\
import ctypes, gc, signal
signal.signal(signal.SIGUSR1, lambda *_: gc.collect())
signal.signal(signal.SIGUSR2, lambda *_: ctypes.CDLL("libc.so.6").malloc_trim(0))
"""


def raise_nofile(needed: int) -> None:
    """Raise the soft open-file limit to `needed` (within the hard limit), or fail clearly."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(f"need {needed} open files, the hard limit is {hard} (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def checkout_packages(ref: str, into: Path) -> Path:
    """The privrl packages of commit `ref`, laid out as installed (privrl, .server, .client)."""
    src = into / "src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "shared", "server",
                              "client"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = into / "pkg"
    shutil.copytree(src / "shared", pkg / "privrl")
    shutil.copytree(src / "server", pkg / "privrl" / "server")
    shutil.copytree(src / "client", pkg / "privrl" / "client")
    return pkg


def probe_health(url: str, stop: Any, out: Any) -> None:
    """`poll_health` in a process of its own; its latencies (ms) put on `out` at the end."""
    health: list[float] = []
    poll_health(url, stop, health)
    out.put(health)


def measure_server(label: str, tmp: Path, args: argparse.Namespace,
                   pythonpath: list[Path]) -> dict:
    """One server, one attack: the summary."""
    hook = tmp / f"hook-{label}"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PROBE_HOOK)
    env = {"PYTHONPATH": ":".join(str(p) for p in [*pythonpath, hook])}
    server = ServerProcess(tmp / f"{label}.db", TOKEN, env=env, log_path=tmp / f"{label}.log")
    with server:
        pid = server.proc.pid
        created = httpx.post(f"{server.url}/v1/runs", json=run_spec("jdp", 10**6, False),
                             headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        created.raise_for_status()
        path = (f"/v1/runs/{created.json()['id']}/reports" if args.target == "report"
                else "/v1/runs")
        httpx.get(f"{server.url}/healthz", timeout=10)
        time.sleep(1.0)
        base = rss_bytes(pid)
        rss: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                rss.append(rss_bytes(pid))
                stop.wait(0.1)

        sampler = threading.Thread(target=sample)
        # /healthz from a process of its own: a thread here would share the interpreter (and
        # its lock) with the 1,200 connections' event loop and time that, not the server
        spawn = mp.get_context("spawn")
        probe_stop, probe_out = spawn.Event(), spawn.Queue()
        probe = spawn.Process(target=probe_health, args=(server.url, probe_stop, probe_out))
        probe.start()
        sampler.start()
        try:
            outcomes = asyncio.run(stall_many(
                "127.0.0.1", server.port, path, args.connections, args.body_bytes,
                int(args.body_bytes * args.fraction), args.hold))
        finally:
            time.sleep(3.0)  # the clients have closed: what the server still holds
            stop.set()
            probe_stop.set()
            health = probe_out.get(timeout=30)
            probe.join()
            sampler.join()
        after_close = rss_bytes(pid)
        server.proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        after_gc = rss_bytes(pid)
        server.proc.send_signal(signal.SIGUSR2)
        time.sleep(1.0)
        after_trim = rss_bytes(pid)
    closed = [o.after for o in outcomes if o.after is not None]
    lat = np.array(health)
    return {
        "connections": args.connections,
        "rss_before_mb": round(base / MB, 1),
        "rss_peak_growth_mb": round((max(rss, default=base) - base) / MB, 1),
        "rss_growth_after_close_mb": round((after_close - base) / MB, 1),
        "rss_growth_after_gc_mb": round((after_gc - base) / MB, 1),
        "rss_growth_after_trim_mb": round((after_trim - base) / MB, 1),
        "closed_by_server": len(closed),
        "answers": dict(Counter(o.status for o in outcomes)),
        "closed_within_s": round(max(closed), 1) if closed else None,
        "healthz_p50_ms": round(float(np.percentile(lat, 50)), 1) if lat.size else None,
        "healthz_p99_ms": round(float(np.percentile(lat, 99)), 1) if lat.size else None,
        "healthz_max_ms": round(float(lat.max()), 1) if lat.size else None,
        "healthz_samples": int(lat.size),
    }


def main() -> None:
    """Parse flags, run the attack on each server, print one JSON line each."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=1200)
    p.add_argument("--body-bytes", type=int, default=2_000_000)
    p.add_argument("--fraction", type=float, default=0.5, help="share of the body sent")
    p.add_argument("--hold", type=float, default=60.0,
                   help="seconds a connection waits for the server to close it")
    p.add_argument("--target", choices=["report", "runs"], default="report",
                   help="POST a report of the run (default) or to /v1/runs")
    p.add_argument("--before", metavar="REF", help="first measure the code of this commit")
    args = p.parse_args()
    raise_nofile(2 * args.connections + 256)
    with tempfile.TemporaryDirectory(prefix="stalled-") as name:
        tmp = Path(name)
        if args.before:
            before = tmp / "before"
            before.mkdir()
            pkg = checkout_packages(args.before, before)
            print(json.dumps({"code": args.before, **measure_server("before", tmp, args, [pkg])}),
                  flush=True)
        print(json.dumps({"code": "this checkout", **measure_server("after", tmp, args, [])}),
              flush=True)


if __name__ == "__main__":
    main()
