"""`python -m privrl.accel`: compile (or load) every kernel once, so that later processes load
them from numba's cache instead of each compiling them (CI runs it before the test workers; a
process that finds them uncompiled starts it in the background). It then marks them ready."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from privrl import accel
from privrl.config import RunConfig
from privrl.run import Run, run_in_process
from privrl.worlds.tabular import riverswim


def main(argv: list[str]) -> int:
    """Run the fused loop and the planner alone once per privacy mode, mark the kernels ready;
    say how long it took. `--lock FILE`: the background warm-up's lock, removed at the end."""
    lock = Path(argv[argv.index("--lock") + 1]) if "--lock" in argv else None
    try:
        return _warm_up()
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


def _warm_up() -> int:
    """Compile (or load) every kernel in this process, then write the ready marker."""
    if not accel.available():
        print("privrl.accel: compiled kernels are off (numba not installed or PRIVRL_NUMBA=0)")
        return 0
    os.environ[accel.ENV_SWITCH] = "1"  # compile here, whatever the marker says
    start = time.perf_counter()
    mdp = riverswim(4)
    for privacy, mechanism, delta in (("none", "laplace", 0.0), ("jdp", "gaussian", 1e-5),
                                      ("ldp", "laplace", 0.0)):
        config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=2,
                           privacy=privacy, mechanism=mechanism, epsilon=1.0, delta=delta,
                           preset="practical")
        run_in_process(config, mdp, [0])  # the fused episode loop
        Run(config, [0]).message()  # the planner alone (a server's path)
    accel.mark_ready()
    print(f"privrl.accel: kernels ready in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
