"""Two server versions side by side under the same Locust generator, interleaved.

    python scripts/load/ab_servers.py BEFORE_PYTHONPATH [--rounds 6] [--seconds 6] \
        [--users 64] [--after-noise float] [--json FILE]

BEFORE_PYTHONPATH holds another copy of the package (for example `git archive` of an older
commit with shared/ renamed privrl/ and server/, client/ moved inside it). Both servers run at
once on temporary databases; every round measures, for each server in turn (the order flips
each round), a /healthz phase then a JDP and an LDP episode phase (the bench's own
`locust_phase`, 2 generator processes), each phase driven by the server's own version of the
client (a child process on the same PYTHONPATH): the wire format changes between versions.
The VM's speed drifts by tens of percent within minutes, so only rows measured close together
are compared: per round, each server's episode requests/s over its own /healthz requests/s, and
its server CPU per episode request over its CPU per /healthz request. Prints one JSON line per
phase, then the medians. --after-noise sets this checkout's runs' noise backend (e.g. 'float',
the float noise an older version drew), to compare the servers at equal noise.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from privrl.client.api import ServerAPI
from privrl.client.load.bench import bench_config, phase
from privrl.client.procs import free_port, module_cmd, stop_process, wait_ready
from privrl.seeding import secret_seed

MODES = (("healthz", None), ("episodes", "jdp"), ("episodes", "ldp"))
NOISE_ENV = "PRIVRL_AB_NOISE"  # the child's run noise backend (unset: the default)




def version_env(pythonpath: str | None, token: str) -> dict[str, str]:
    """The environment of a version's processes: the package on `pythonpath` (None: the
    installed one, this checkout) and the admin token."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return dict(env, PRIVRL_ADMIN_TOKEN=token)


def start(tmp: Path, name: str, pythonpath: str | None, token: str
          ) -> tuple[str, subprocess.Popen[bytes]]:
    """A server of the package on `pythonpath`, on a free port and a temporary database."""
    port = free_port()
    env = version_env(pythonpath, token)
    log = (tmp / f"{name}.log").open("wb")
    proc = subprocess.Popen(
        module_cmd("privrl.server", "--host", "127.0.0.1", "--port", str(port), "--db",
                   str(tmp / f"{name}.db")),
        env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url + "/readyz", proc, 60)
    return url, proc


def measure_with(pythonpath: str | None, url: str, pid: int, token: str, mode: str,
                 privacy: str | None, users: int, seconds: float, noise: str | None = None
                 ) -> dict[str, Any]:
    """`measure` in a child process of the version on `pythonpath` (its own client), its runs
    on the `noise` backend (None: the version's default)."""
    args = [url, str(pid), token, mode, privacy or "", str(users), str(seconds)]
    env = version_env(pythonpath, token)
    if noise:
        env[NOISE_ENV] = noise
    done = subprocess.run([sys.executable, __file__, "--phase", *args], check=True,
                          env=env, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(url: str, pid: int, token: str, mode: str, privacy: str | None, users: int,
            seconds: float) -> dict[str, Any]:
    """One phase (the bench's own `phase`, Locust, 2 processes): requests/s and the server's
    CPU milliseconds per request."""
    run_id = ""
    if mode == "episodes":
        assert privacy is not None
        with ServerAPI(url, token=token) as api:
            config = bench_config(privacy, 10.0)
            if os.environ.get(NOISE_ENV):
                config = config.model_copy(update={"noise": os.environ[NOISE_ENV]})
            run_id = api.create_run(config).id
    row = phase("locust", url, run_id, users, seconds, 2, 0, secret_seed(), mode, pid)
    return {"rps": row["requests_per_second"], "errors": row["errors"],
            "server_ms": row["server_cpu_ms_per_request"],
            "server_cores": row["server_cpu_cores"]}


def medians(rows: list[dict[str, Any]], rounds: int) -> dict[str, dict[str, float]]:
    """Per server and privacy mode, the medians over rounds of the episode phase against the
    same round's /healthz phase of the same server."""
    summary = {}
    for name in ("before", "after"):
        for privacy in ("jdp", "ldp"):
            pairs = [tuple(next(x for x in rows if (x["server"], x["round"], x["mode"])
                                == (name, r, mode)) for mode in ("healthz", privacy))
                     for r in range(rounds)]
            summary[f"{name} {privacy}"] = {
                "requests_ratio": statistics.median(e["rps"] / h["rps"] for h, e in pairs),
                "cpu_ratio": statistics.median(h["server_ms"] / e["server_ms"] for h, e in pairs),
                "server_ms_per_episode_request": statistics.median(e["server_ms"]
                                                                   for _, e in pairs),
                "server_ms_per_healthz": statistics.median(h["server_ms"] for h, _ in pairs),
            }
    return summary


def main() -> None:
    """Parse the arguments, alternate the phases, print the rows and the medians."""
    if sys.argv[1:2] == ["--phase"]:  # a child: one phase with this version's client
        url, pid, token, mode, privacy, users, seconds = sys.argv[2:9]
        print(json.dumps(measure(url, int(pid), token, mode, privacy or None, int(users),
                                 float(seconds))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="PYTHONPATH of the other version")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--after-noise", help="this checkout's runs' noise backend")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    token = secrets.token_hex(16)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="privrl-ab-") as tmp:
        paths = {"before": args.before, "after": None}
        servers = {name: start(Path(tmp), name, path, token) for name, path in paths.items()}
        try:
            for r in range(args.rounds):
                for name in (list(servers) if r % 2 == 0 else list(reversed(servers))):
                    url, proc = servers[name]
                    for mode, privacy in MODES:
                        row = {"server": name, "round": r, "mode": privacy or mode,
                               **measure_with(paths[name], url, proc.pid, token, mode,
                                              privacy, args.users, args.seconds,
                                              args.after_noise if name == "after" else None)}
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        finally:
            for _, proc in servers.values():
                stop_process(proc)
    summary = medians(rows, args.rounds)
    for key, values in summary.items():
        print(f"{key}: " + ", ".join(f"{k} {v:.3f}" for k, v in values.items()))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "medians": summary}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
