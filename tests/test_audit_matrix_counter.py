"""`privrl audit randomizer --central --counter matrix`: the matrix-factorization counter's
empirical epsilon lower bound stays below the declared epsilon, and a counter that draws half
its noise is caught."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from privrl.audit.matrix_counter import audit_matrix_counter
from privrl.client.cli import main
from privrl.config import RunConfig
from privrl.privacy.matrix_counter import MatrixCounter
from privrl.seeding import generator


def counted(episodes: int) -> RunConfig:
    """A Gaussian JDP run of `episodes` users at (1, 1e-5)."""
    return RunConfig(n_states=2, n_actions=2, horizon=1, episodes=episodes, privacy="jdp",
                     epsilon=1.0, delta=1e-5, mechanism="gaussian")


class HalfNoiseCounter(MatrixCounter):
    """A broken counter: the library's, drawing half of its encoder noise."""

    def __init__(self, shape, noise, seeds, family, max_items, bands=None) -> None:
        super().__init__(shape, dataclasses.replace(noise, sigma=noise.sigma / 2), seeds, family,
                         max_items, bands)


@pytest.mark.slow  # a long statistical test
def test_the_matrix_counter_is_sound_and_a_halved_one_is_caught() -> None:
    honest = audit_matrix_counter(counted(8), generator(4, "audit"), samples=100_000)
    broken = audit_matrix_counter(counted(8), generator(4, "audit"), samples=100_000,
                                  counter=HalfNoiseCounter)
    assert honest.noisy_copies == 8 and honest.pair_epsilon <= 1.0
    assert 0.2 < honest.lower_bound < 1.0 and not honest.exceeded, honest
    assert honest.off_grid == 0 and honest.float_entries == 8 * 200
    assert broken.exceeded, broken


@pytest.mark.slow  # a long statistical test, through the CLI
def test_cli_audits_the_matrix_counter(capsys) -> None:
    args = ["audit", "randomizer", "--central", "--counter", "matrix", "--mechanism", "gaussian",
            "--episodes", "4", "--samples", "20000", "--seed", "3"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["release"] == "matrix-factorization counter over 4 release(s)"
    assert 0.0 < out["lower_bound"] < 1.0 and not out["exceeded"] and not out["leaks"]
    assert main(args) == 0
    assert "matrix-factorization counter over 4 release(s)" in capsys.readouterr().out
    assert main(["audit", "randomizer", "--counter", "matrix"]) == 2
    assert "add --central" in capsys.readouterr().err
    assert main(["audit", "randomizer", "--central", "--counter", "matrix",
                 "--mechanism", "laplace"]) == 2
    assert "--mechanism gaussian" in capsys.readouterr().err
    assert np.isfinite(out["pair_epsilon"])
    assert main([*args[:-2], "--bands", "2", "--seed", "3", "--json"]) == 0
    banded = json.loads(capsys.readouterr().out)
    assert banded["release"].startswith("2-banded") and not banded["exceeded"]
    assert main(["audit", "randomizer", "--central", "--bands", "2"]) == 2
    assert "--counter matrix" in capsys.readouterr().err
