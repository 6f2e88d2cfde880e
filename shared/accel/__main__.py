"""`python -m privrl.accel`: compile (or load) every kernel once, so that later processes load
them from numba's cache instead of each compiling them (CI runs it before the test workers)."""

from __future__ import annotations

import sys
import time

from privrl import accel
from privrl.config import RunConfig
from privrl.run import Run, run_in_process
from privrl.worlds.tabular import riverswim


def main() -> int:
    """Run the fused loop and the planner alone once per privacy mode; say how long it took."""
    if not accel.enabled():
        print("privrl.accel: compiled kernels are off (numba not installed or PRIVRL_NUMBA=0)")
        return 0
    start = time.perf_counter()
    mdp = riverswim(4)
    for privacy, mechanism, delta in (("none", "laplace", 0.0), ("jdp", "gaussian", 1e-5),
                                      ("ldp", "laplace", 0.0)):
        config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=2,
                           privacy=privacy, mechanism=mechanism, epsilon=1.0, delta=delta,
                           preset="practical")
        run_in_process(config, mdp, [0])  # the fused episode loop
        Run(config, [0]).message()  # the planner alone (a server's path)
    print(f"privrl.accel: kernels ready in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
