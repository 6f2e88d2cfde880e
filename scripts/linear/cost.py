"""Per-episode cost of UCRL-VTR and LinOpt-VI at d in {4, 8, 16}, H in {5, 20}, in-process and
over HTTP: `python scripts/linear/cost.py [--episodes 200] [--http-episodes 100] [--json OUT]`.

World: lm-mix (S = 5, A = 3) for UCRL-VTR, zhou-mix (S = 6, A = 3, d2 = 4) for LinOpt-VI, with
the given d and H; JDP, Gaussian, epsilon = 1, practical preset. In-process: one replica (the
server's own shape), milliseconds per episode after one warm-up episode. Over HTTP: a real
sequential server process and users in this process (one at a time, loopback), after a warm-up
run: wall time per episode from the first claim to the last report, and the median claim +
report latency.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from pathlib import Path

from privrl.client.api import ServerAPI
from privrl.client.procs import ServerProcess
from privrl.client.users import run_users
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

CASES = (("ucrl-vtr", "lm-mix"), ("linopt-vi", "zhou-mix"))
COLUMNS = (("algorithm", ""), ("d", ""), ("H", ""), ("in-process ms/episode", ".2f"),
           ("HTTP ms/episode (wall)", ".2f"), ("HTTP p50 claim + report ms", ".2f"))


def config_for(algo: str, mdp, episodes: int) -> RunConfig:
    """A JDP run of `algo` on `mdp` (practical preset, Gaussian, eps = 1)."""
    return RunConfig(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                     model=model_spec_of(mdp), episodes=episodes, privacy="jdp", epsilon=1.0,
                     delta=1e-5, mechanism="gaussian")


def in_process_ms(config: RunConfig, mdp) -> float:
    """Milliseconds per episode of one replica (after a warm-up run)."""
    run_in_process(config.model_copy(update={"episodes": 2}), mdp, [0])
    start = time.perf_counter()
    run_in_process(config, mdp, [0])
    return 1e3 * (time.perf_counter() - start) / config.episodes


def http_ms(config: RunConfig, mdp, server: ServerProcess, token: str) -> tuple[float, float]:
    """(wall milliseconds per episode, median claim + report latency) through the server, one
    user at a time, after a 5-episode warm-up run of the same configuration."""
    with ServerAPI(server.url, token=token) as api:
        warm = api.create_run(config.model_copy(update={"episodes": 5}), seed=1).id
        run_id = api.create_run(config, seed=1).id
    asyncio.run(run_users(server.url, warm, None, 1, 2, mdp, progress=False))
    start = time.perf_counter()
    result = asyncio.run(run_users(server.url, run_id, None, 1, 2, mdp, progress=False))
    assert result.reported == config.episodes
    wall = 1e3 * (time.perf_counter() - start) / config.episodes
    summary = result.summary()
    return wall, summary["claim_ms_p50"] + summary["report_ms_p50"]


def main() -> None:
    """Print the table (and with --json save it)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--http-episodes", type=int, default=100)
    parser.add_argument("--json", help="also save the table here (for the docs)")
    args = parser.parse_args()
    rows = []
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "privrl.db", token, sequential=True).start()
        try:
            print(f"{'algorithm':<10} {'d':>3} {'H':>3} {'in-process ms/ep':>17} "
                  f"{'HTTP ms/ep':>11} {'HTTP p50 claim+report ms':>25}")
            for algo, world in CASES:
                for d in (4, 8, 16):
                    for horizon in (5, 20):
                        mdp = make(world, horizon, d=d)
                        local = in_process_ms(config_for(algo, mdp, args.episodes), mdp)
                        wall, p50 = http_ms(config_for(algo, mdp, args.http_episodes), mdp,
                                            server, token)
                        rows.append([algo, d, horizon, local, wall, p50])
                        print(f"{algo:<10} {d:>3} {horizon:>3} {local:>17.2f} {wall:>11.2f} "
                              f"{p50:>25.2f}", flush=True)
        finally:
            server.stop()
    if args.json:
        save_table(args.json, COLUMNS, rows, episodes=args.episodes,
                   http_episodes=args.http_episodes)


if __name__ == "__main__":
    main()
