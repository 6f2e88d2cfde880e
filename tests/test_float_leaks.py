"""The floating-point leak tests (`privrl.audit.float_leaks`) in process: the model of numpy's
Laplace is bit-exact, float-noised counts are proven (and never wrongly), grid-noised ones
never are, and the randomizer audit counts what the float backend leaks.

"""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.audit.float_leaks import (
    count_candidates,
    float_leaks,
    in_additive_image,
    in_laplace_image,
    numpy_laplace,
)
from privrl.audit.lower_bound import audit_central_release, audit_local_randomizer
from privrl.config import RunConfig
from privrl.seeding import generator

FLOAT = "float"  # the float backend (simulation only)
INTEGER_DEFAULT = "numpy"  # the default backend: integer noise


def test_the_model_is_numpys_laplace_bit_for_bit() -> None:
    draws = np.random.Generator(np.random.PCG64(12)).laplace(0.0, 1.0, 10_000)
    words = np.random.Generator(np.random.PCG64(12)).integers(0, 2**64, 10_000, dtype=np.uint64)
    model = [numpy_laplace(int(w >> np.uint64(11))) for w in words]  # numpy's next_double
    assert np.array_equal(draws, np.asarray(model))


@pytest.mark.parametrize("scale", [0.5, 4.0, 20.0, 133.7])
def test_float_laplace_counts_are_proven_and_never_wrongly(scale: float) -> None:
    rng = np.random.default_rng(7)
    clean = rng.integers(0, 2, 3000).astype(float)
    released = clean + rng.laplace(0.0, 1.0, clean.size) * scale  # FloatNoise, then the add
    found = float_leaks(released, scale, "laplace", (0.0, 1.0))
    proven = ~np.isnan(found.clean)
    assert found.total == 3000 and found.off_grid == 3000 and found.unexplained == 0
    assert found.proven == proven.sum() > 0.5 * found.total, found.to_dict()
    assert np.array_equal(found.clean[proven], clean[proven])  # 0 errors
    assert all(in_laplace_image(v, c, scale) for v, c in zip(released[:200], clean[:200],
                                                               strict=True))


def test_integer_noise_proves_nothing() -> None:
    rng = np.random.default_rng(8)
    clean = rng.integers(0, 2, 3000).astype(float)
    released = clean + np.round(rng.laplace(0.0, 4.0, clean.size))  # noise on the integers
    found = float_leaks(released, 4.0, "laplace", (0.0, 1.0))
    assert found.proven == 0 and found.off_grid == 0 and found.unexplained == 0
    dyadic = clean + np.round(rng.laplace(0.0, 4.0 * 8, clean.size)) / 8  # grid 2^-3
    assert float_leaks(dyadic, 4.0, "laplace", (0.0, 1.0), 0.125).to_dict()["proven"] == 0


def test_the_additive_test_catches_the_old_opendp_leak() -> None:
    """|v| < 0.5 off the 2^-53 grid is never fl(1 + y): it proves c = 0 whatever the noise."""
    v = 0.3 + 2.0**-60
    assert in_additive_image(v, 0.0) and not in_additive_image(v, 1.0)
    assert in_additive_image(0.25, 1.0)  # 1 + (-0.75) is exact
    found = float_leaks([v, 0.25 + 2.0**-54, 7.5], 3.0, "gaussian", (0.0, 1.0))
    assert found.proven == 2 and list(found.clean[:2]) == [0.0, 0.0] and found.by_test == {
        "additive": 2}
    assert math.isnan(found.clean[2])


def test_gaussian_float_noise_is_flagged_off_its_grid() -> None:
    rng = np.random.default_rng(9)
    released = rng.integers(0, 2, 500) + rng.standard_normal(500) * 3.0
    assert float_leaks(released, 3.0, "gaussian", (0.0, 1.0), grid=1.0).off_grid == 500
    assert float_leaks(released, 3.0, "gaussian", (0.0, 1.0), grid=None).off_grid == 0


def test_candidates_are_the_counts_of_the_clean_range() -> None:
    assert count_candidates(0.0, 1.0, 1) == [0.0, 1.0]
    assert count_candidates(0.0, 5.0, 3) == [float(c) for c in range(16)]
    assert count_candidates(0.0, 1.0, 100) is None


def smallest(noise: str, privacy: str = "ldp") -> RunConfig:
    return RunConfig(n_states=2, n_actions=2, horizon=1, episodes=1, privacy=privacy,
                     epsilon=1.0, noise=noise)


@pytest.mark.parametrize("release", ["local", "central"])
def test_the_randomizer_audit_proves_the_float_backends_outputs(release: str) -> None:
    audit = (audit_local_randomizer if release == "local" else audit_central_release)(
        smallest(FLOAT), generator(1, "audit"), samples=2000)
    assert audit.float_entries > 0 and audit.leaks
    assert audit.float_proven > 0.5 * audit.float_entries, audit
    assert audit.float_wrong == 0


@pytest.mark.parametrize("release", ["local", "central"])
def test_the_randomizer_audit_proves_nothing_on_integer_noise(release: str) -> None:
    audit = (audit_local_randomizer if release == "local" else audit_central_release)(
        smallest(INTEGER_DEFAULT), generator(1, "audit"), samples=2000)
    assert audit.float_entries > 0 and audit.float_proven == 0 and not audit.leaks, audit
