"""CPU seconds of one `privrl frontier` run at an older revision and at this checkout, interleaved.

    nice -n 10 python scripts/bench_frontier_run.py BASE_REV --case ucrl-vtr-ldp
        --preset practical --epsilon 52 --episodes 2000 [--seeds 5] [--rounds 3]

BASE_REV's `shared/` (git archive, kept under the temporary directory per commit) is imported
as `privrl` ahead of this checkout's editable install; this checkout's code is the other side.
Every timed run is its own process: the study's configuration (`Planner.config`), its seeds as
replicas, through `run_task` (the study's entry point), after a 3-episode warm-up that loads the
numba kernels. Prints each run's CPU seconds (`time.process_time`) and a digest of its regret
traces and ledger, then the medians and minima: the same digest on both sides means the same
numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_RUN = """
import hashlib, json, sys, time
import privrl
from privrl.lab.executors import Task, run_task
from privrl.studies.frontier import Planner, StudySpec
from privrl.studies.cases import case_named
case, preset, epsilon, k, seeds = sys.argv[1:]
def task(episodes):
    config, world = Planner(StudySpec(episodes=episodes)).config(
        case_named(case), preset, float(epsilon))
    return Task((0, 0), config, world, tuple(range(int(seeds))))
run_task(task(3))
timed = task(int(k))
start = time.process_time()
res = run_task(timed)
cpu = time.process_time() - start
digest = hashlib.sha256(res.regret.tobytes() + json.dumps(res.ledger, sort_keys=True).encode())
print(json.dumps({"cpu": cpu, "wall": res.seconds, "digest": digest.hexdigest()[:16],
                  "privrl": privrl.__file__}))
"""


def base_tree(rev: str) -> Path:
    """A directory holding `privrl` = `rev`'s shared/ (for PYTHONPATH), kept in the temporary
    directory per commit so that numba's cache next to its kernels serves the next call."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True,
                         text=True, check=True).stdout.strip()
    into = Path(tempfile.gettempdir()) / f"privrl-bench-{sha[:12]}"
    if (into / "privrl").is_dir():
        return into
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "shared"],
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(into, filter="data")
    (into / "shared").rename(into / "privrl")
    return into


def one_run(env: dict[str, str], args: argparse.Namespace) -> dict:
    """One timed run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN, args.case, args.preset, str(args.epsilon),
         str(args.episodes), str(args.seeds)],
        capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    """Run the rounds (base, then this checkout, each round) and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the revision to compare with (e.g. HEAD~1, main)")
    parser.add_argument("--case", default="ucrl-vtr-ldp")
    parser.add_argument("--preset", default="practical", choices=("faithful", "practical"))
    parser.add_argument("--epsilon", type=float, default=52.0)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sides = {"base": {**os.environ, "PYTHONPATH": str(base_tree(args.base))},
             "new": {**os.environ}}
    samples: dict[str, list[dict]] = {side: [] for side in sides}
    for i in range(args.rounds):
        for side, env in sides.items():
            res = one_run(env, args)
            samples[side].append(res)
            print(f"round {i + 1} {side}: {res['cpu']:.2f} s CPU, {res['wall']:.2f} s wall,"
                  f" digest {res['digest']} ({res['privrl']}), load {os.getloadavg()[0]:.1f}",
                  flush=True)
    cpu = {side: [r["cpu"] for r in runs] for side, runs in samples.items()}
    digests = {side: {r["digest"] for r in runs} for side, runs in samples.items()}
    same = len(digests["base"] | digests["new"]) == 1
    for stat in (statistics.median, min):  # other load on the machine only adds CPU time
        base, new = stat(cpu["base"]), stat(cpu["new"])
        print(f"{args.case} {args.preset} eps={args.epsilon:g} K={args.episodes} R={args.seeds}:"
              f" {stat.__name__} CPU base {base:.2f} s, new {new:.2f} s ({new / base:.2f}x)")
    print(f"numbers {'identical' if same else 'DIFFER'} (digests {digests})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
