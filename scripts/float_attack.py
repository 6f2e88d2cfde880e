"""The floating-point attack (Mironov 2012) on every algorithm's first release, in process.

For each registered algorithm and private mode, with its default world and mechanism (eps = 1,
delta = 1e-5), one user reports; the outsider then tests every entry of every declared released
family (an algorithm's own one-shot release, policy evaluation's theta, is not a family and is
left to `privrl audit server`) with
`privrl.audit.float_leaks` (public scale, declared grid, the counts one user can contribute as
candidates) and counts the entries it proves exact and those off their declared grid. The same
run on `noise: float` is the positive control. A server publishes exactly these values (same
code, same seeds), so this is the attack on the billboard at t = 1 and on LDP report sums.

    python scripts/float_attack.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
from privrl import algorithms
from privrl.audit.float_leaks import LeakReport, float_leaks
from privrl.config import RunConfig
from privrl.run import Run
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.registry import make


def config_for(name: str, privacy: str, noise: str) -> tuple[RunConfig, object]:
    """The algorithm's default world and mechanism, eps = 1, one user per release."""
    algo = algorithms.get(name)
    world = make(algo.default_world)
    model = model_spec_of(world) if name not in ("dp-ucbvi",) else None
    kw = dict(algo=name, n_states=world.S, n_actions=getattr(world, "A", 1),
              horizon=getattr(world, "H", 1), episodes=1 if name.startswith("dp-ls") else 8,
              privacy=privacy, epsilon=1.0, mechanism=algo.default_mechanism,
              delta=1e-5 if algo.default_mechanism == "gaussian" else 0.0, noise=noise)
    if model is not None:
        kw["model"] = model
    return RunConfig(**kw), world


def declared_releases(run: Run) -> dict[str, np.ndarray]:
    """The released families as the privacy layer publishes them, before any post-processing
    (LSVI's billboard shows its Gram tree's release plus a public diagonal: the tree's own
    release is tested here)."""
    counter = getattr(run.privatizer, "counter", None)
    if counter is not None:
        return {"gram": counter.release() * (run.calibration.family("gram").grid
                                             if run.calibration.integer else 1.0)}
    return run.privatizer.release()


def attack(name: str, privacy: str, noise: str) -> LeakReport:
    """Every declared released entry after one report, tested against its family's grid; the
    counts one user contributes (0 or 1) are the candidates of count families."""
    config, world = config_for(name, privacy, noise)
    run = Run(config, [20261126])
    run.play_and_ingest(world, [7], 0)
    report = LeakReport()
    release = declared_releases(run)
    cal = run.calibration
    for fam in cal.families:
        if fam.name not in release:
            continue
        counts = fam.grid == 1.0 and not fam.rounded
        scale = fam.scale if math.isfinite(fam.scale) else 0.0
        report.add(float_leaks(np.asarray(release[fam.name]), scale, cal.mechanism_name,
                               [0.0, 1.0] if counts else [], fam.grid))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args()
    rows = []
    print(f"{'algorithm':<20} {'mode':<5} {'noise':<6} {'entries':>8} {'proven':>7}"
          f" {'off grid':>9}")
    for name in algorithms.names():
        for privacy in ("jdp", "ldp"):
            if privacy not in algorithms.get(name).boundaries():
                continue
            for noise in ("numpy", "float"):
                rep = attack(name, privacy, noise)
                rows.append({"algorithm": name, "privacy": privacy, "noise": noise,
                             **rep.to_dict()})
                print(f"{name:<20} {privacy:<5} {noise:<6} {rep.total:>8} {rep.proven:>7}"
                      f" {rep.off_grid:>9}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
