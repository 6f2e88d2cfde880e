"""Golden regret traces of DP-UCBVI: numbers must not move.

All cases were re-recorded once when the streams were laid out per role and block of episodes
(issue 29: a user's episode is a slot of its block's stream, tie-breaks are rows of theirs, and
ties pick a tied action by rank), float-noise cases and the default integer-noise cases alike.
jdp-laplace and jdp-laplace-integer were re-recorded when seeded tree nodes came to be drawn in
groups, one draw per group of a level (issue 29, part 5); the other cases' streams did not move.
The JDP practical cases keep the smoothed tree released every episode, as recorded; the
practical preset's own release path (geometric schedule; the matrix counter under Gaussian
integer noise) has its own cases, recorded when the presets took it.
The LDP cases were re-recorded when a user's local noise moved to its own stream, slotted by
the user's nonce instead of the episode index (issue 40); no other case moved.

`python tests/test_golden_trace.py --write` regenerates tests/data/golden_ucbvi.json; do that
only for a change that is meant to alter the numbers, and say so in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import riverswim

GOLDEN = Path(__file__).resolve().parent / "data" / "golden_ucbvi.json"
FLOAT_CASES = {  # the float backend (simulation only)
    "none": dict(privacy="none"),
    "jdp-laplace": dict(privacy="jdp", mechanism="laplace", epsilon=2.0, noise="float",
                        counter="smoothed", schedule="every"),
    "jdp-gaussian-faithful": dict(privacy="jdp", mechanism="gaussian", epsilon=1.0, delta=1e-5,
                                  preset="faithful", noise="float"),
    "ldp-gaussian": dict(privacy="ldp", mechanism="gaussian", epsilon=4.0, delta=1e-5,
                         noise="float"),
    "ldp-laplace-pooled": dict(privacy="ldp", mechanism="laplace", epsilon=4.0,
                               knobs={"pooled": True}, noise="float"),
}
INTEGER_CASES = {  # the default integer noise
    f"{name}-integer": {k: v for k, v in case.items() if k != "noise"}
    for name, case in FLOAT_CASES.items() if name != "none"
}
PRESET_CASES = {  # the practical preset's release path: no counter or schedule given
    "jdp-laplace-preset-integer": dict(privacy="jdp", mechanism="laplace", epsilon=2.0),
    "jdp-gaussian-preset-integer": dict(privacy="jdp", mechanism="gaussian", epsilon=1.0,
                                        delta=1e-5),
}
CASES = {**FLOAT_CASES, **INTEGER_CASES, **PRESET_CASES}
SEEDS = [3, 4]


def trace(case: str) -> dict[str, Any]:
    """Per-seed, per-episode exact regret and the ledger totals of one case."""
    mdp = riverswim(10)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=200,
                       **CASES[case])
    res = run_in_process(config, mdp, SEEDS)
    totals = res.ledger.totals(config.accounting_delta)
    return {
        "regret": res.regret.tolist(),
        "policy_versions": res.policy_versions,
        "epsilon": totals.epsilon,
        "rho": totals.rho,
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_regret_trace_is_unchanged(case: str) -> None:
    want = json.loads(GOLDEN.read_text())[case]
    got = trace(case)
    # to 1e-12: the numbers are not meant to be the same to the last bit on every CPU
    np.testing.assert_allclose(np.asarray(got["regret"]), np.asarray(want["regret"]), rtol=0,
                               atol=1e-12)
    assert got["policy_versions"] == want["policy_versions"]
    assert got["epsilon"] == pytest.approx(want["epsilon"], rel=1e-12)
    assert got["rho"] == pytest.approx(want["rho"], rel=1e-12)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit(__doc__)
    GOLDEN.write_text(json.dumps({case: trace(case) for case in sorted(CASES)}, indent=0))
    print(f"wrote {GOLDEN}")
