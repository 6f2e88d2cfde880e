"""`privrl audit randomizer` audits every registered algorithm with a local (LDP) boundary, on
its own world where it is not a plain tabular one (issue 43 part 7); small samples here, the
statistical power is tests/test_audit_randomizer.py's."""

from __future__ import annotations

import json

import pytest
from privrl import algorithms, trust
from privrl.audit.lower_bound import local_algorithms
from privrl.client.cli import main

SAMPLES = 2_000


def test_the_local_boundary_and_its_algorithms_come_from_the_registries() -> None:
    boundary = trust.local_boundary()
    assert boundary is not None
    assert boundary.local_noise and boundary.private and boundary.cohort_size == 1
    every = set(algorithms.names())
    assert set(local_algorithms()) == {n for n in every
                                       if algorithms.get(n).refuses(boundary) is None}
    assert set(local_algorithms()) < every  # some algorithms have no local boundary


@pytest.mark.parametrize("algo", local_algorithms())
def test_every_local_randomizer_is_audited_within_its_declaration(
        algo: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "randomizer", "--algo", algo, "--samples", str(SAMPLES),
                 "--seed", "7", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["algo"] == algo and out["release"] == "local randomizer"
    assert out["mechanism"] == algorithms.get(algo).mechanism_for(trust.local_boundary())
    assert out["differing_entries"] > 0
    # the worst pair found is within what the calibration declares, and so is the bound
    assert 0.0 < out["pair_epsilon"] <= 1.0 + 1e-9
    assert 0.0 <= out["lower_bound"] <= 1.0
    assert out["float_proven"] == 0 and out["off_grid"] == 0


def test_an_algorithm_without_a_local_boundary_is_refused_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    boundary = trust.local_boundary()
    assert boundary is not None
    local = boundary.name
    others = [n for n in algorithms.names() if n not in local_algorithms()]
    assert others
    code = main(["audit", "randomizer", "--algo", others[0], "--samples", "100"])
    err = capsys.readouterr().err
    assert code == 2 and f"{others[0]} has no local release to audit" in err
    assert local not in err.split("runs across")[1]

