"""One `privrl bench http` phase against a running server, with the server's CPU per request.

    PRIVRL_ADMIN_TOKEN=... python scripts/load/phase.py URL SERVER_PID healthz|episodes \
        USERS SECONDS [jdp|ldp]

Runs one Locust phase (the bench's own `locust_phase`: 2 generator processes; for `episodes` on
a fresh DP-UCBVI run) and prints one JSON line: requests/s, episodes/s, the server's and the
generator's CPU cores and CPU milliseconds per request (server from /proc/PID/stat), p99s.
"""

from __future__ import annotations

import json
import os
import sys

from privrl.client.api import ServerAPI
from privrl.client.load.bench import bench_config, phase
from privrl.seeding import secret_seed


def main() -> None:
    """Parse the positional arguments, run the phase, print the figures."""
    url, pid, mode, users, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        int(sys.argv[4]), float(sys.argv[5])
    privacy = sys.argv[6] if len(sys.argv) > 6 else "jdp"
    run_id = ""
    if mode == "episodes":
        with ServerAPI(url, token=os.environ["PRIVRL_ADMIN_TOKEN"]) as api:
            run_id = api.create_run(bench_config(privacy, 10.0)).id
    row = phase("locust", url, run_id, users, seconds, 2, 0, secret_seed(), mode, pid)
    assert row["server_cpu_cores"] is not None, f"no process {pid}"
    print(json.dumps({
        "mode": mode, "privacy": privacy if mode == "episodes" else None, "users": users,
        "rps": round(row["requests_per_second"], 1), "eps": round(row["episodes_per_second"], 1),
        "server_cores": round(row["server_cpu_cores"], 2),
        "server_ms_per_req": round(row["server_cpu_ms_per_request"], 3),
        "gen_cores": round(row["generator_cpu_cores"], 2),
        "gen_ms_per_req": round(1000 * row["generator_cpu_cores"] * row["seconds"]
                                / row["requests"], 3),
        "errors": row["errors"], "load": os.getloadavg()[0],
        "p99": {k: v["p99_ms"] for k, v in row["latency_ms"].items()},
    }))


if __name__ == "__main__":
    main()
