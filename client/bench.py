"""`privrl bench`: per-episode cost of the in-process runner, measured side by side.

Reports milliseconds per episode (all seeds at once) and per replica-episode for the
non-private, JDP and LDP variants on RiverSwim, and, when the optional `rlberry-scool` package is
installed, its UCBVIAgent on the same chain for the same number of episodes.
"""

from __future__ import annotations

import argparse
import time

from shared.config import RunConfig
from shared.run import run_in_process
from shared.worlds.tabular import garnet, riverswim


def _time_config(config: RunConfig, mdp, seeds: list[int]) -> float:
    start = time.perf_counter()
    run_in_process(config, mdp, seeds)
    return time.perf_counter() - start


def rlberry_ms_per_episode(episodes: int, horizon: int) -> float | None:
    """rlberry-scool's UCBVIAgent (stage_dependent, no real-time DP) on a 6-state chain."""
    try:
        from rlberry_scool.agents import UCBVIAgent
        from rlberry_scool.envs import Chain
    except ImportError:
        return None
    env = Chain(L=6, fail_prob=0.1)
    agent = UCBVIAgent(env, horizon=horizon, stage_dependent=True, real_time_dp=False, seeder=0)
    start = time.perf_counter()
    agent.fit(budget=episodes)
    return 1e3 * (time.perf_counter() - start) / episodes


def cmd_bench(args: argparse.Namespace) -> int:
    """Measure and print the table."""
    seeds = list(range(args.seeds))
    if args.env == "garnet":
        mdp = garnet(args.states, args.actions, args.horizon, seed=0)
    else:
        mdp = riverswim(args.horizon)
    print(f"world {mdp!r}, K = {args.episodes}, {len(seeds)} seed(s) per run")
    print(f"{'variant':<26} {'ms/episode':>11} {'ms/replica-ep':>14} {'episodes/s':>11}")
    rows = [
        ("non-private UCBVI", "none", "laplace", 0.0),
        ("JDP laplace eps=1", "jdp", "laplace", 0.0),
        ("JDP gaussian eps=1", "jdp", "gaussian", 1e-5),
        ("LDP laplace eps=1", "ldp", "laplace", 0.0),
    ]
    for name, privacy, mech, delta in rows:
        cfg = RunConfig(
            n_states=mdp.S,
            n_actions=mdp.A,
            horizon=mdp.H,
            episodes=args.episodes,
            privacy=privacy,
            epsilon=1.0,
            delta=delta,
            mechanism=mech,
            preset="practical",
        )
        sec = _time_config(cfg, mdp, seeds)
        per_ep = 1e3 * sec / args.episodes
        print(
            f"{name:<26} {per_ep:>11.3f} {per_ep / len(seeds):>14.4f} "
            f"{args.episodes * len(seeds) / sec:>11.0f}"
        )
    if args.rlberry:
        ms = rlberry_ms_per_episode(args.episodes, args.horizon)
        if ms is None:
            print("rlberry-scool not installed: pip install rlberry-scool to compare")
        else:
            print(f"{'rlberry-scool UCBVIAgent':<26} {ms:>11.3f} {ms:>14.4f} {1e3 / ms:>11.0f}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `privrl bench`."""
    p = sub.add_parser("bench", help="per-episode cost of UCBVI, JDP and LDP")
    p.add_argument("--env", choices=["riverswim", "garnet"], default="riverswim")
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--horizon", type=int, default=20)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--states", type=int, default=50, help="garnet S")
    p.add_argument("--actions", type=int, default=5, help="garnet A")
    p.add_argument("--rlberry", action="store_true", help="also time rlberry-scool's UCBVIAgent")
    p.set_defaults(handler=cmd_bench)
