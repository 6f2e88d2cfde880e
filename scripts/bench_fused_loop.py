"""DP-UCBVI's fused in-process loop against the generic loop, side by side in one process.

    python scripts/bench_fused_loop.py [--episodes 20000] [--json docs/results/fused-loop.json]

Runs the practical preset on RiverSwim (two replicas) for each boundary the default run and the
demo use, first as `privrl run` would (the fused loop where it applies), then with DP-UCBVI's
simulator declined (the generic loop), and prints the seconds and their ratio.
"""

from __future__ import annotations

import argparse
import time

from privrl.algorithms.ucbvi import DPUCBVIAlgorithm
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec
from privrl.provenance import save_measured
from privrl.run import Run, run_in_process
from privrl.worlds.model_spec import model_spec_of

CASES = (("none", "laplace"), ("ldp", "gaussian"), ("jdp", "gaussian"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    mdp = WorldSpec("riverswim", None, {}).build()
    rows = []
    offer = DPUCBVIAlgorithm.simulator
    for privacy, mechanism in CASES:
        config = RunConfig(algo="dp-ucbvi", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                           model=model_spec_of(mdp), episodes=args.episodes, privacy=privacy,
                           epsilon=1.0, delta=1e-5 if mechanism == "gaussian" else 0.0,
                           mechanism=mechanism, preset="practical")
        fused = Run(config, [0, 1]).algorithm.simulator(Run(config, [0, 1]), mdp) is not None
        seconds = []
        for declined in (False, True):
            DPUCBVIAlgorithm.simulator = (  # type: ignore[method-assign]
                (lambda self, run, world: None) if declined else offer)
            start = time.perf_counter()
            run_in_process(config, mdp, [0, 1])
            seconds.append(time.perf_counter() - start)
        DPUCBVIAlgorithm.simulator = offer  # type: ignore[method-assign]
        rows.append({"privacy": privacy, "mechanism": mechanism, "fused_loop": fused,
                     "default_seconds": round(seconds[0], 2),
                     "generic_seconds": round(seconds[1], 2),
                     "ratio": round(seconds[1] / seconds[0], 2)})
        print(rows[-1], flush=True)
    if args.json:
        save_measured(args.json, {"episodes": args.episodes, "rows": rows})


if __name__ == "__main__":
    main()
