"""Can an anonymous client take a run over? Honest users' episodes/s alone and beside an attack:
`python scripts/load/takeover.py [--attack hoard reads] [--credentials]`.

For each attack: one `python -m privrl.server` on a free loopback port, one run of the demo's
world (RiverSwim, H = 20, DP-UCBVI, Gaussian, eps = 10, pooled; K large enough never to finish)
and `privrl users --concurrency 16` (the honest users, from 127.0.0.1) in another process. After
a warm-up, the honest rate is measured `--phase` seconds alone, then `--phase` seconds beside the
attack (in a third process), then `--recovery` seconds after it stopped (on a shared machine
the rate drifts: the ratio to the mean of the windows before and after is printed too). The
rate is the run's counted reports over the window (the attacker never reports anything), read
from the public status before and after.

Attacks:
- `hoard`: a client holding claims it never reports: `--hoarders` (200) connections from
  127.0.0.2 (another source address), each claiming with `?wait=0` and, when refused, waiting
  the answer's Retry-After (1 s without one) before claiming again. With `--credentials` the run
  requires user credentials: the honest users get 16, the hoarder 1 of its own.
- `reads`: `--readers` (8) loops of the public GETs (/policies, /billboard, /regret, /ledger,
  round robin), each as fast as answers come.

Prints one JSON line: per attack the rates (episodes/s) alone, under attack and after, their
ratio, the claims refused by reason (from /metrics) and what the attacker got.
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

sys.path.insert(0, str(Path(__file__).parent))
from measure import TOKEN, Server, metric_sum, rate, run_spec  # noqa: E402

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
PUBLIC = ("/policies", "/billboard", "/regret?world=riverswim", "/ledger")


async def hoard(url: str, run_id: str, connections: int, seconds: float,
                credential: str | None) -> dict:
    """Claim and never report from 127.0.0.2, honouring Retry-After; what it got."""
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    got = {"claims": 0, "refused": {}, "errors": 0}
    stop_at = time.time() + seconds
    async with httpx.AsyncClient(base_url=url, transport=transport, limits=limits,
                                 timeout=60) as http:
        async def loop() -> None:
            while time.time() < stop_at:
                try:
                    resp = await http.post(f"/v1/runs/{run_id}/claims?wait=0", headers=headers)
                except httpx.HTTPError:
                    got["errors"] += 1
                    await asyncio.sleep(1.0)
                    continue
                if resp.status_code == 200:
                    got["claims"] += 1
                    continue
                code = str(resp.status_code)
                got["refused"][code] = got["refused"].get(code, 0) + 1
                wait = float(resp.headers.get("Retry-After", "1"))
                await asyncio.sleep(min(wait, max(0.0, stop_at - time.time())))

        await asyncio.gather(*(loop() for _ in range(connections)))
    return got


async def read(url: str, run_id: str, loops: int, seconds: float) -> dict:
    """`loops` loops of the public GETs; how many answers of each status."""
    got: dict[str, int] = {}
    stop_at = time.time() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        async def loop(offset: int) -> None:
            i = offset
            while time.time() < stop_at:
                try:
                    resp = await http.get(f"/v1/runs/{run_id}{PUBLIC[i % len(PUBLIC)]}")
                    code = str(resp.status_code)
                except httpx.HTTPError:
                    code = "error"
                got[code] = got.get(code, 0) + 1
                i += 1

        await asyncio.gather(*(loop(i) for i in range(loops)))
    return got


def attack(args: argparse.Namespace, which: str) -> dict:
    """One server, honest users alone, beside the attack, after it."""
    tmp = Path(tempfile.mkdtemp(prefix="privrl-takeover-"))
    server = Server(args.python, tmp, {})
    honest = None
    try:
        query = "?credentials=true" if args.credentials else ""
        resp = httpx.post(f"{server.url}/v1/runs{query}", json=run_spec("jdp", 10_000_000, True),
                          headers=ADMIN, timeout=60)
        resp.raise_for_status()
        run_id = resp.json()["id"]
        users = [str(Path(args.python).with_name("privrl")), "users", "--server", server.url,
                 "--run", run_id, "--concurrency", str(args.honest), "--quiet", "--seed", "7",
                 "--env", "riverswim", "--horizon", "20"]
        attacker_credential = None
        if args.credentials:
            keys = tmp / "credentials"
            for count, out in ((args.honest, keys), (1, tmp / "hoarder")):
                resp = httpx.post(f"{server.url}/v1/runs/{run_id}/credentials?count={count}",
                                  headers=ADMIN, timeout=60)
                resp.raise_for_status()
                out.write_text("\n".join(resp.json()["credentials"]) + "\n")
            users += ["--credentials", str(keys)]
            attacker_credential = (tmp / "hoarder").read_text().strip()
        honest = subprocess.Popen(users, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(args.warmup)
        alone = rate(server.url, run_id, args.phase)
        cmd = [args.python, __file__, "_" + which, server.url, run_id, str(args.phase),
               str(args.hoarders if which == "hoard" else args.readers),
               attacker_credential or ""]
        attacker = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the attacker's process is up
        beside = rate(server.url, run_id, args.phase - 1.0)
        got = json.loads(attacker.communicate(timeout=args.phase + 120)[0] or "{}")
        after = rate(server.url, run_id, args.recovery)
        metrics = httpx.get(f"{server.url}/metrics", timeout=60).text
        return {
            "attack": which, "credentials": args.credentials, "honest_users": args.honest,
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
            honest.kill()
            honest.wait()
        server.stop()


def main() -> None:
    """Parse and measure (or be the attacker's process)."""
    if len(sys.argv) > 1 and sys.argv[1] in ("_hoard", "_reads"):
        url, run_id, seconds, n, credential = sys.argv[2:7]
        if sys.argv[1] == "_hoard":
            got = asyncio.run(hoard(url, run_id, int(n), float(seconds), credential or None))
        else:
            got = asyncio.run(read(url, run_id, int(n), float(seconds)))
        print(json.dumps(got))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable, help="interpreter of the version")
    p.add_argument("--attack", nargs="+", default=["hoard", "reads"], choices=["hoard", "reads"])
    p.add_argument("--credentials", action="store_true", help="the run requires credentials")
    p.add_argument("--honest", type=int, default=16, help="honest users at a time")
    p.add_argument("--hoarders", type=int, default=200, help="the hoarder's connections")
    p.add_argument("--readers", type=int, default=8, help="loops of public GETs")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds before measuring")
    p.add_argument("--phase", type=float, default=25.0, help="seconds alone, then beside")
    p.add_argument("--recovery", type=float, default=25.0, help="seconds after the attack")
    args = p.parse_args()
    print(json.dumps({"runs": [attack(args, which) for which in args.attack]}))


if __name__ == "__main__":
    main()
