"""Two privrl installs and rlberry-scool side by side: interleaved rounds, medians.

    python scripts/bench_before_after.py BEFORE_PYTHON AFTER_PYTHON [--episodes 600]
        [--rounds 3]

BEFORE_PYTHON and AFTER_PYTHON are interpreters of two virtual environments with privrl
installed (e.g. main and a branch); rlberry-scool is timed with AFTER_PYTHON. Every timed run is
its own process (a warm-up run first), one replica with K episodes and 20 replicas with K / 5;
prints ms per replica-episode and the ratio to rlberry-scool's agent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

VARIANTS = (("none", "laplace", "0"), ("jdp", "laplace", "0"), ("jdp", "gaussian", "1e-5"),
            ("ldp", "laplace", "0"))
ONE_RUN = """
import sys, time
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds.tabular import riverswim
privacy, mech, delta, k, r = sys.argv[1:]
k, r, mdp = int(k), int(r), riverswim(20)
def config(n):
    return RunConfig(n_states=6, n_actions=2, horizon=20, episodes=n, privacy=privacy,
                     epsilon=1.0, delta=float(delta), mechanism=mech, preset="practical")
run_in_process(config(3), mdp, list(range(r)))
start = time.perf_counter()
run_in_process(config(k), mdp, list(range(r)))
print(1e3 * (time.perf_counter() - start) / k / r)
"""
RLBERRY = "from privrl.lab.bench import time_rlberry; print(time_rlberry({k}, 20))"


def timed(python: str, *args: str) -> float:
    """The last line a child interpreter prints, as a float."""
    out = subprocess.run([python, *args], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    """Run the rounds and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    sides = {"before": args.before, "after": args.after}
    samples: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for replicas in (1, 20):
            episodes = args.episodes if replicas == 1 else max(100, args.episodes // 5)
            for variant in VARIANTS:
                for side, python in sides.items():
                    key = f"{side} {variant[0]}-{variant[1]} R={replicas}"
                    samples.setdefault(key, []).append(
                        timed(python, "-c", ONE_RUN, *variant, str(episodes), str(replicas)))
        samples.setdefault("rlberry-scool", []).append(
            timed(args.after, "-c", RLBERRY.format(k=args.episodes)))
        print(f"round done, load average {os.getloadavg()[0]:.1f}", flush=True)
    medians = {key: statistics.median(v) for key, v in samples.items()}
    for key, ms in medians.items():
        print(f"{key:<32} {ms:8.4f} ms/replica-episode  {medians['rlberry-scool'] / ms:6.1f}x"
              " rlberry-scool")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"samples": samples, "medians": medians}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
