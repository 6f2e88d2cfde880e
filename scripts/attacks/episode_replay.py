"""The episode-replay attack of issue 40 over real HTTP between real processes.

`python scripts/attacks/episode_replay.py --json OUT`

The chain: user processes -> `privrl audit proxy` (records and compares every report) ->
`privrl audit replay-proxy --episode 7` (the attacker: every claim is handed episode 7) -> a
`python -m privrl.server` process. Per algorithm (dp-ucbvi LDP and ucrl-vtr LDP):

* `privrl`: `--users` separate `privrl users --users 1` processes, each with a seed of its own
  from the OS CSPRNG (the real deployment): the audit proxy's pairwise noise-reuse test (share of
  report-difference entries in {-1, 0, 1} grid steps against what the declared noise gives,
  flagged pairs, trajectories reconstructed) and the same test on the billboard increments by
  the server audit (`privrl.client.audit.server_attack.ServerAudit`, the code of `privrl audit
  server`, its billboard read after every user so that each increment is one report);
* `shared-seed`: the same number of processes sharing one `PRIVRL_CLIENT_SEED` and one
  `$PRIVRL_STATE_DIR`: how many play and how many refuse with "already played";
* `vulnerable` (the control, with `--control`): the deliberately vulnerable user of
  tests/support/replay_attack.py, run in this process through the same chain.

The restore drill (users -> audit proxy -> server, no rewriting): seeded users (one seed, one
state dir) play `--before` episodes of a dp-ucbvi LDP run, the server stops cleanly and its
database is copied (the backup); they play `--lost` more; the server stops and the backup is
restored (the database alone, the live mark files kept, as docs/explanation/server.md says), the
server starts with the run held, `privrl runs continue` resumes it; then `--lost` processes of the
seeded users (each re-issued an episode it played before the restore), `--lost` fresh
CSPRNG-seeded users and `--before` more seeded users: refusals, plays, and the audit proxy's
noise-reuse test over every report of the run, before and after the restore.

Prints one JSON document (and writes it with --json, with the command and commit).
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from privrl.algorithms import get
from privrl.client.api import ServerAPI
from privrl.client.audit.proxy import REPORT_PATH
from privrl.client.audit.server_attack import ServerAudit
from privrl.client.procs import (
    ServerProcess,
    child_env,
    free_port,
    module_cmd,
    spawn,
    stop_process,
    wait_ready,
)
from privrl.config import RunConfig
from privrl.provenance import save_measured
from privrl.seeding import generator
from privrl.worlds import make, riverswim
from privrl.worlds.model_spec import model_spec_of

ALGOS = ("dp-ucbvi", "ucrl-vtr")
EPISODE = 7  # the index the attacker hands every claim
CLAIM_TIMEOUT = 600.0  # no refused claim lapses while the script runs (lapses narrow a source)
USER_TIMEOUT = 120.0  # seconds one `privrl users` process may take
REFUSED = "already played"


def run_config(algo: str, episodes: int) -> RunConfig:
    """The run of `algo` in LDP mode (the worlds and budgets of tests/test_audit_noise_reuse)."""
    if algo == "dp-ucbvi":
        return RunConfig(n_states=4, n_actions=2, horizon=5, episodes=episodes, privacy="ldp")
    world = make(get(algo).default_world)
    return RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                     model=model_spec_of(world), episodes=episodes, privacy="ldp",
                     epsilon=10.0, delta=1e-5, mechanism="gaussian")


def world_of(cfg: RunConfig) -> Any:
    """The users' world of a run made by `run_config`."""
    if cfg.algo == "dp-ucbvi":
        return riverswim(horizon=cfg.horizon, n_states=cfg.n_states)
    return make(get(cfg.algo).default_world)


@contextmanager
def privrl_child(log: Path, ready: str, *args: str) -> Iterator[str]:
    """`python -m privrl.client ARGS --listen PORT` as a child until the block ends; its URL
    (ready when GET `ready` answers 200)."""
    port = free_port()
    proc = spawn(module_cmd("privrl.client", *args, "--listen", str(port)), log_path=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + ready, proc, timeout=60)
        yield url
    finally:
        stop_process(proc)


def users(url: str, run_id: str, count: int, env: dict[str, str]) -> tuple[int, str]:
    """One `privrl users --users COUNT` process (sequential users); its exit code and stderr."""
    cmd = module_cmd("privrl.client", "users", "--server", url, "--run", run_id, "--users",
                     str(count), "--concurrency", "1", "--quiet", "--patience", "60")
    done = subprocess.run(cmd, env=child_env(env), capture_output=True, text=True,
                          timeout=USER_TIMEOUT, check=False)
    return done.returncode, done.stderr


def swarm(url: str, run_id: str, n: int, env: dict[str, str],
          after_each: Any = None) -> dict[str, Any]:
    """`n` processes of one user each: how many played, refused an episode they had already
    played, or failed otherwise (`after_each` is called after every process)."""
    played, refused, failed = 0, 0, []
    for _ in range(n):
        code, err = users(url, run_id, 1, env)
        if code == 0:
            played += 1
        elif REFUSED in err:
            refused += 1
        else:
            failed.append(err.strip().splitlines()[-1] if err.strip() else f"exit {code}")
        if after_each is not None:
            after_each()
    return {"processes": n, "played": played, "refused_already_played": refused,
            "failed": failed}


def reuse_of(report: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A run's noise-reuse verdict in an audit report (JSON): the figures and the line."""
    for item in report["findings"] + report["checks"]:
        if item["run_id"] == run_id and item["check"] == "noise-reuse":
            ev = item.get("evidence", {})
            keys = ("reports", "pairs", "entries", "small_fraction", "expected_fraction",
                    "spread", "flagged", "reconstructed", "groups")
            return {"found": item in report["findings"], "ran": item.get("ran", True),
                    **{k: ev[k] for k in keys if ev.get(k) is not None},
                    "line": item["message"]}
    return {"ran": False, "line": "no noise-reuse check for this run"}


def vulnerable_users(url: str, run_id: str, cfg: RunConfig, n: int,
                     after_each: Any) -> dict[str, Any]:
    """The control: `n` users whose noise is keyed by the episode index the server sends
    (tests/support/replay_attack.py), through the chain from this process."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from support.replay_attack import vulnerable_report

    world, seed, played = world_of(cfg), secrets.randbits(63), 0
    with httpx.Client(base_url=url, timeout=60) as http:
        for i in range(n):
            ticket = http.post(f"/v1/runs/{run_id}/claims")
            ticket.raise_for_status()
            body, _truth = vulnerable_report(ticket.json(), cfg, world, seed, nonce=i)
            http.post(f"/v1/runs/{run_id}/reports", json=body).raise_for_status()
            played += 1
            after_each()
    return {"processes": 0, "played": played, "in_process": True}


def attack(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Every group of users of every algorithm behind the rewriting proxy (module docstring)."""
    groups = ["privrl", "shared-seed"] + (["vulnerable"] if args.control else [])
    token = secrets.token_urlsafe(16)
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        server = stack.enter_context(ServerProcess(work / "attack.db", token,
                                                   claim_timeout=CLAIM_TIMEOUT,
                                                   log_path=work / "server.log"))
        replay = stack.enter_context(privrl_child(
            work / "replay.log", "/readyz", "audit", "replay-proxy", "--upstream", server.url,
            "--episode", str(EPISODE)))
        proxy = stack.enter_context(privrl_child(
            work / "proxy.log", REPORT_PATH, "audit", "proxy", "--upstream", replay))
        api = stack.enter_context(ServerAPI(server.url, token))
        runs = {(algo, group): api.create_run(run_config(algo, args.users * 3)).id
                for algo in args.algos for group in groups}
        audit = ServerAudit(stack.enter_context(ServerAPI(server.url)), list(runs.values()),
                            seed_budget=10.0,
                            rng=generator(secrets.randbits(63), "audit", "server"))
        audit.collect()
        audit.poll_once()
        shared = {"PRIVRL_CLIENT_SEED": str(secrets.randbits(63)),
                  "PRIVRL_STATE_DIR": str(work / "shared-state")}
        fresh = {"PRIVRL_STATE_DIR": str(work / "fresh-state")}
        for (algo, group), run_id in runs.items():
            print(f"{algo} {group}: run {run_id}", file=sys.stderr, flush=True)
            if group == "vulnerable":
                played = vulnerable_users(proxy, run_id, run_config(algo, args.users * 3),
                                          args.users, audit.poll_once)
            else:
                played = swarm(proxy, run_id, args.users, shared if group == "shared-seed"
                               else fresh, audit.poll_once)
            out.setdefault(algo, {})[group] = {"run": run_id, "users": played}
        audit.finish_polls()
        server_report = audit.check().to_dict()
        proxy_report = httpx.get(proxy + REPORT_PATH, timeout=60).json()
    for (algo, group), run_id in runs.items():
        out[algo][group]["audit_proxy"] = reuse_of(proxy_report, run_id)
        out[algo][group]["audit_server"] = reuse_of(server_report, run_id)
    out["findings"] = {"audit_proxy": [f["message"] for f in proxy_report["findings"]],
                       "audit_server": [f["message"] for f in server_report["findings"]]}
    return out


def held(url: str, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """/readyz of a restarted server once it has rebuilt its runs: 503 naming `run_id` when
    the run is held."""
    deadline = time.monotonic() + timeout
    while True:
        resp = httpx.get(f"{url}/readyz", timeout=10)
        detail = resp.json().get("detail", "") if resp.status_code != 200 else ""
        if resp.status_code == 200 or run_id in detail or time.monotonic() > deadline:
            return {"status": resp.status_code, "detail": detail}
        time.sleep(0.2)


def outcome(code_err: tuple[int, str], episodes: int) -> dict[str, Any]:
    """What one `privrl users --users N` process did."""
    code, err = code_err
    return {"episodes": episodes, "exit": code,
            **({"error": err.strip().splitlines()[-1]} if code and err.strip() else {})}


def restore(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The backup-restore drill (module docstring) on a dp-ucbvi LDP run."""
    token, db = secrets.token_urlsafe(16), work / "restore.db"
    seeded = {"PRIVRL_CLIENT_SEED": str(secrets.randbits(63)),
              "PRIVRL_STATE_DIR": str(work / "restore-state")}
    fresh = {"PRIVRL_STATE_DIR": str(work / "restore-fresh")}
    port = free_port()

    def server(ready: bool = True) -> ServerProcess:
        return ServerProcess(db, token, port=port, claim_timeout=CLAIM_TIMEOUT,
                             log_path=work / "restore-server.log").start(ready=ready)

    out: dict[str, Any] = {"before": args.before, "lost": args.lost}
    srv = server()
    try:
        with privrl_child(work / "restore-proxy.log", REPORT_PATH, "audit", "proxy",
                          "--upstream", srv.url) as proxy:
            with ServerAPI(srv.url, token) as api:
                run_id = api.create_run(run_config("dp-ucbvi", 4 * (args.before + args.lost))).id
            out["run"] = run_id
            out["seeded_before_backup"] = outcome(users(proxy, run_id, args.before, seeded),
                                                  args.before)
            srv.stop()  # a clean stop checkpoints the WAL into the database file
            shutil.copy2(db, work / "backup.db")
            srv = server()
            out["seeded_lost_by_restore"] = outcome(users(proxy, run_id, args.lost, seeded),
                                                    args.lost)
            srv.stop()
            shutil.copy2(work / "backup.db", db)  # the database alone: the live marks stay
            for suffix in ("-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            srv = server(ready=False)
            out["held_after_restore"] = held(srv.url, run_id)
            cont = subprocess.run(
                module_cmd("privrl.client", "runs", "continue", run_id, "--server", srv.url),
                env=child_env({"PRIVRL_ADMIN_TOKEN": token}), capture_output=True, text=True,
                timeout=USER_TIMEOUT, check=False)
            out["continue"] = {"exit": cont.returncode,
                               "output": (cont.stdout or cont.stderr).strip()}
            out["seeded_after_restore"] = swarm(proxy, run_id, args.lost, seeded)
            out["fresh_after_restore"] = outcome(users(proxy, run_id, args.lost, fresh),
                                                 args.lost)
            out["seeded_new_episodes"] = outcome(users(proxy, run_id, args.before, seeded),
                                                 args.before)
            with ServerAPI(srv.url) as api:
                out["reported"] = api.get_run(run_id).status.reported
            out["audit_proxy"] = reuse_of(httpx.get(proxy + REPORT_PATH, timeout=60).json(),
                                          run_id)
    finally:
        srv.stop()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Run the attack and the restore drill; print (and save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20, help="users per run (default 20)")
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    parser.add_argument("--control", action="store_true",
                        help="also the vulnerable user of tests/support (the attack working)")
    parser.add_argument("--before", type=int, default=10,
                        help="restore drill: episodes in the backup (default 10)")
    parser.add_argument("--lost", type=int, default=20,
                        help="restore drill: episodes played after the backup (default 20)")
    parser.add_argument("--no-restore", action="store_true", help="skip the restore drill")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="privrl-replay-") as tmp:
        work = Path(tmp)
        result: dict[str, Any] = {"episode": EPISODE, "users": args.users,
                                  "attack": attack(args, work)}
        if not args.no_restore:
            result["restore"] = restore(args, work)
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result, indent=1))
    if args.json:
        save_measured(args.json, result)


if __name__ == "__main__":
    main()
