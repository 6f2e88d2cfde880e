"""What anonymous requests cost a real server process: an oversized /regret and made-up methods.

    python scripts/public_bounds.py [--horizon 100] [--methods 2000] [--parallel 8]

Starts `python -m privrl.server` on a loopback port with a fresh database, creates a RiverSwim
run (S=6, A=2) of the given horizon, then prints the server's resident memory (VmRSS) before
and after `GET /v1/runs/RUN/regret?world=gymnasium:Taxi-v4` with the answer's status and time,
the same for `--parallel` such requests at once, and the growth of /metrics after `--methods`
requests with made-up HTTP methods.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from privrl.client.procs import free_port

ADMIN = "public-bounds-admin-token"


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=100)
    parser.add_argument("--methods", type=int, default=2000)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = dict(os.environ, PRIVRL_ADMIN_TOKEN=ADMIN)
        proc = subprocess.Popen(
            [sys.executable, "-m", "privrl.server", "--host", "127.0.0.1", "--port", str(port),
             "--db", str(Path(tmp) / "privrl.db")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            with httpx.Client(base_url=url, timeout=120.0) as http:
                for _ in range(300):
                    try:
                        if http.get("/readyz").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.1)
                resp = http.post(
                    "/v1/runs",
                    json=dict(n_states=6, n_actions=2, horizon=args.horizon, episodes=10,
                              privacy="jdp"),
                    headers={"Authorization": f"Bearer {ADMIN}"},
                )
                resp.raise_for_status()
                run_id = resp.json()["id"]
                before = rss_mb(proc.pid)
                start = time.perf_counter()
                resp = http.get(f"/v1/runs/{run_id}/regret",
                                params={"world": "gymnasium:Taxi-v4"})
                took = time.perf_counter() - start
                after = rss_mb(proc.pid)
                print(f"regret Taxi-v4 on H={args.horizon}: {resp.status_code} in {took:.3f} s;"
                      f" RSS {before:.1f} MB -> {after:.1f} MB (+{after - before:.1f} MB)")
                print(f"  {resp.json().get('detail', '')[:160]}")
                before = rss_mb(proc.pid)
                start = time.perf_counter()
                with ThreadPoolExecutor(args.parallel) as pool:
                    codes = list(pool.map(
                        lambda _: httpx.get(f"{url}/v1/runs/{run_id}/regret", timeout=120.0,
                                            params={"world": "gymnasium:Taxi-v4"}).status_code,
                        range(args.parallel)))
                took = time.perf_counter() - start
                after = rss_mb(proc.pid)
                print(f"{args.parallel} at once: {codes} in {took:.3f} s; RSS {before:.1f} MB ->"
                      f" {after:.1f} MB (+{after - before:.1f} MB)")
                size0 = len(http.get("/metrics").content)
                for i in range(args.methods):
                    http.request(f"MADEUP{i}", "/v1/runs")
                start = time.perf_counter()
                size1 = len(http.get("/metrics").content)
                scrape = time.perf_counter() - start
                print(f"/metrics after {args.methods} made-up methods: {size0} -> {size1} bytes"
                      f" (+{size1 - size0}); a scrape took {scrape * 1e3:.1f} ms")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
