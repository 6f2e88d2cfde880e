"""Can one client with many addresses, or one that never reports, take a run from honest users?
`python scripts/load/sybil.py [--attack sybil stall] [--phase 30]`.

For each attack: one `python -m privrl.server` on a free loopback port (`privrl.client.procs`),
one run of the demo's world (RiverSwim, H = 20, DP-UCBVI, Gaussian, eps = 10, pooled; K large
enough never to finish) and `privrl users` (the honest users, from 127.0.0.1) in another
process. After `--warmup` seconds the honest rate is measured `--phase` seconds alone, then
`--phase` seconds beside the attacker (a third process, stopped after its phase), then `--phase`
seconds after it (on a shared machine the rate drifts: the ratio to the mean of the windows
before and after is printed too). The rate is the run's counted reports over the window, read
from its public status (the attacker never reports anything).

Attacks:
- `sybil`: the run requires user credentials; the honest users hold `--honest` credentials
  (`--concurrency --honest`), the attacker one, presented from `--addresses` (256) source
  addresses (127.1.x.y, one connection each), each claiming with `?wait=0`, never reporting,
  and waiting the answer's Retry-After when refused.
- `stall`: a sequential run without credentials (server `--claim-timeout --stall-timeout`, 2 s);
  `--honest-sequential` (4) honest users, and one attacker address (127.0.0.2) that claims with
  `?wait=60` (queueing for the slot like everyone else), never reports, and honours
  Retry-After when refused.

Prints one JSON line: per attack the honest rates (episodes/s) alone, beside the attack and
after it, their ratios, what the attacker got and the claims refused by reason (from
/metrics). Loopback only; each attack ends within warm-up + 3 phases + about 20 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from privrl.client.procs import ServerProcess, module_cmd, spawn, stop_process

sys.path.insert(0, str(Path(__file__).parent))
from measure import TOKEN, metric_sum, rate, run_spec  # noqa: E402

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
WORLD = ["--env", "riverswim", "--horizon", "20"]


def address(i: int) -> str:
    """The i-th attacker address (127.1.0.1 ..., 250 per /24)."""
    return f"127.1.{i // 250}.{i % 250 + 1}"


async def attack(url: str, run_id: str, addresses: list[str], wait: float, seconds: float,
                 credential: str | None) -> dict:
    """One connection per address: claim, never report, honour Retry-After; what it got.
    Prints "ready" once its clients are built (building them costs CPU the server shares)."""
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    got: dict = {"claims": 0, "refused": {}, "errors": 0}
    clients = [httpx.AsyncClient(base_url=url, timeout=wait + 30, transport=httpx.
                                 AsyncHTTPTransport(local_address=host)) for host in addresses]
    print("ready", flush=True)
    stop_at = time.time() + seconds

    async def loop(http: httpx.AsyncClient) -> None:
        async with http:
            while time.time() < stop_at:
                try:
                    resp = await http.post(f"/v1/runs/{run_id}/claims?wait={wait:g}",
                                           headers=headers)
                except httpx.HTTPError:
                    got["errors"] += 1
                    await asyncio.sleep(1.0)
                    continue
                if resp.status_code == 200:
                    got["claims"] += 1
                    continue
                code = str(resp.status_code)
                got["refused"][code] = got["refused"].get(code, 0) + 1
                delay = float(resp.headers.get("Retry-After", "1"))
                await asyncio.sleep(min(delay, max(0.0, stop_at - time.time())))

    await asyncio.gather(*(loop(http) for http in clients))
    return got


def issue(url: str, run_id: str, count: int, out: Path) -> list[str]:
    """`count` credentials of the run (admin), also written to `out`."""
    resp = httpx.post(f"{url}/v1/runs/{run_id}/credentials?count={count}", headers=ADMIN,
                      timeout=60)
    resp.raise_for_status()
    tokens = resp.json()["credentials"]
    out.write_text("".join(f"{t}\n" for t in tokens))
    return tokens


def measure(args: argparse.Namespace, which: str) -> dict:
    """One server: honest users alone, then beside the attacker."""
    tmp = Path(tempfile.mkdtemp(prefix=f"privrl-{which}-"))
    sybil = which == "sybil"
    timeout = None if sybil else args.stall_timeout
    server = ServerProcess(tmp / "sybil.db", TOKEN, claim_timeout=timeout,
                           log_path=tmp / "server.log").start()
    honest = None
    try:
        query = "?credentials=true" if sybil else "?sequential=true"
        resp = httpx.post(f"{server.url}/v1/runs{query}", json=run_spec("jdp", 10_000_000, True),
                          headers=ADMIN, timeout=60)
        resp.raise_for_status()
        run_id = resp.json()["id"]
        users = ["users", "--server", server.url, "--run", run_id, "--quiet", "--seed", "7",
                 "--concurrency", str(args.honest if sybil else args.honest_sequential), *WORLD]
        credential = ""
        if sybil:
            issue(server.url, run_id, args.honest, tmp / "honest")
            [credential] = issue(server.url, run_id, 1, tmp / "attacker")
            users += ["--credentials", str(tmp / "honest")]
        honest = spawn(module_cmd("privrl.client", *users), log_path=tmp / "users.log")
        time.sleep(args.warmup)
        alone = rate(server.url, run_id, args.phase)
        hosts = [address(i) for i in range(args.addresses)] if sybil else ["127.0.0.2"]
        cmd = [sys.executable, __file__, "_attack", server.url, run_id,
               json.dumps(hosts), "0" if sybil else "60", str(args.phase), credential]
        attacker = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert attacker.stdout is not None and attacker.stdout.readline().strip() == "ready"
        beside = rate(server.url, run_id, args.phase - 1.0)
        got = json.loads(attacker.communicate(timeout=args.phase + 90)[0] or "{}")
        after = rate(server.url, run_id, args.phase)
        metrics = httpx.get(f"{server.url}/metrics", timeout=60).text
        return {
            "attack": which, "credentials": sybil, "sequential": not sybil,
            "claim_timeout": timeout or 30.0, "attacker_addresses": len(hosts),
            "honest_users": args.honest if sybil else args.honest_sequential,
            "alone_eps": round(alone, 1), "beside_eps": round(beside, 1),
            "after_eps": round(after, 1), "ratio": round(beside / alone, 3) if alone else None,
            "ratio_to_mean_of_alone_and_after": round(2 * beside / (alone + after), 3)
            if alone + after else None,
            "attacker": got,
            "claims_refused": metric_sum(metrics, "privrl_claims_refused_total"),
            "load_average": os.getloadavg(),
        }
    finally:
        if honest is not None:
            stop_process(honest)
        server.stop()


def parser() -> argparse.ArgumentParser:
    """The script's options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--attack", nargs="+", default=["sybil", "stall"], choices=["sybil", "stall"])
    p.add_argument("--honest", type=int, default=16, help="honest users (and credentials), sybil")
    p.add_argument("--honest-sequential", type=int, default=4, help="honest users, stall")
    p.add_argument("--addresses", type=int, default=256, help="the sybil's source addresses")
    p.add_argument("--stall-timeout", type=float, default=2.0,
                   help="the server's claim timeout in the stall attack (seconds)")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring")
    p.add_argument("--phase", type=float, default=30.0,
                   help="seconds alone, then beside, then after")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the result here")
    return p


def main(argv: list[str] | None = None) -> dict | None:
    """Parse and measure (or be the attacker's process)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_attack":
        url, run_id, hosts, wait, seconds, credential = argv[1:7]
        got = asyncio.run(attack(url, run_id, json.loads(hosts), float(wait), float(seconds),
                                 credential or None))
        print(json.dumps(got))
        return None
    args = parser().parse_args(argv)
    result = {"runs": [measure(args, which) for which in args.attack]}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
