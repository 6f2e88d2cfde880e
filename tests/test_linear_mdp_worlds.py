"""Linear-MDP worlds: the papers' values, the linear structure, norm assumptions, files."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from privrl.worlds import make, optimal_q, optimal_return, uniform_random_return
from privrl.worlds.linear_mdp import (
    LinearMDP,
    linear_mdp_model,
    load_linear_mdp_npz,
    mu_norm_bound,
    save_linear_mdp_npz,
)
from privrl.worlds.model_spec import ModelSpec, model_spec_of
from privrl.worlds.tabular import WorldError

WORLDS = ["lin-cube", "lin-tab", "river-chain", "latent-levels", "lin-mix"]


@pytest.mark.parametrize(
    ("name", "params", "v_star", "uniform"),
    [
        ("lin-cube", {}, 2.47436875, 1.6384),  # 2.4744 and 1.6384 (docs/explanation/linear-mdp.md)
        ("river-chain", {}, 1.68144, 0.469338),  # Ngo et al.'s RiverChain-4
        ("river-chain", {"n_states": 5, "horizon": 8}, 2.0727768, None),  # a variant
        ("latent-levels", {}, 1.38703125, 0.3883703609),  # Ngo et al.'s LatentLevels
    ],
)
def test_verified_values(name: str, params: dict, v_star: float, uniform: float | None) -> None:
    mdp = make(name, **params)
    assert optimal_return(mdp) == pytest.approx(v_star, abs=1e-9)
    if uniform is not None:
        assert uniform_random_return(mdp) == pytest.approx(uniform, abs=1e-9)


def test_river_chain_and_latent_levels_tables() -> None:
    """Ngo et al.'s worlds: V*_1 at every state, Q*_1(0, .), the chain's optimal actions."""
    q, v = optimal_q(make("river-chain"))
    np.testing.assert_allclose(v[0], [1.68144, 2.69233, 3.98213, 5.37816], atol=1e-9)
    np.testing.assert_allclose(q[0, 0], [1.2919, 1.68144], atol=1e-9)
    table = [[1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]]
    np.testing.assert_array_equal(np.argmax(q, axis=-1), table)
    q, v = optimal_q(make("latent-levels"))
    np.testing.assert_allclose(
        v[0], [1.387031, 1.129181, 2.744222, 2.273076, 4.464611, 3.929221, 5, 5], atol=1e-6)
    np.testing.assert_allclose(q[0, 0], [0.785381, 1.387031, 0.785381], atol=1e-6)


def test_lin_cube_optimal_action_is_the_sign_of_nu() -> None:
    mdp = make("lin-cube", seed=3)
    q, _ = optimal_q(mdp)
    m = mdp.d - 2
    feats = mdp.model.features[0, :, :m]  # a / sqrt(2m)
    for h in range(mdp.H - 1):
        best = np.sign(feats[int(np.argmax(q[h, 0]))])
        nu_sign = np.sign(mdp.mu[h, 1, :m])
        np.testing.assert_array_equal(best, nu_sign)


@pytest.mark.parametrize("name", WORLDS)
def test_structure_and_norm_assumptions(name: str) -> None:
    """P = <phi, mu>, R = <phi, theta> (checked at construction, re-checked here), ||phi|| <= 1,
    ||theta_h|| <= sqrt(d), ||sum mu_h v|| <= sqrt(d) ||v||_inf."""
    mdp = make(name)
    assert isinstance(mdp, LinearMDP)
    phi = mdp.model.features
    np.testing.assert_allclose(np.einsum("sad,htd->hsat", phi, mdp.mu), mdp.P, atol=1e-12)
    np.testing.assert_allclose(np.einsum("sad,hd->hsa", phi, mdp.theta), mdp.R, atol=1e-12)
    assert np.linalg.norm(phi, axis=-1).max() <= 1 + 1e-12
    assert np.linalg.norm(mdp.theta, axis=-1).max() <= math.sqrt(mdp.d) + 1e-12
    assert mu_norm_bound(mdp.mu) <= math.sqrt(mdp.d) + 1e-12
    v = np.random.default_rng(0).uniform(-1, 1, size=(50, mdp.S))
    assert np.linalg.norm(np.einsum("hsd,vs->hvd", mdp.mu, v), axis=-1).max() <= math.sqrt(mdp.d)


@pytest.mark.parametrize("name", WORLDS)
def test_public_spec_names_no_secret_and_rebuilds_the_features(name: str) -> None:
    mdp = make(name)
    spec = model_spec_of(mdp)
    assert spec is not None and spec == mdp.spec
    assert not {"seed", "mu", "theta", "gap"} & set(spec.params)
    if name == "lin-mix":  # the public features do not depend on the secret seed
        assert model_spec_of(make(name, seed=5)) == spec
    np.testing.assert_array_equal(linear_mdp_model(spec).features, mdp.model.features)


def test_a_broken_world_is_refused() -> None:
    mdp = make("latent-levels")
    with pytest.raises(WorldError, match="theta"):
        LinearMDP(mdp.P, mdp.R, mdp.d1, model=mdp.model, mu=mdp.mu, theta=mdp.theta * 5,
                  spec=mdp.spec)
    with pytest.raises(WorldError, match="mu"):
        LinearMDP(mdp.P, mdp.R, mdp.d1, model=mdp.model, mu=mdp.mu[:, ::-1], theta=mdp.theta,
                  spec=mdp.spec)
    with pytest.raises(WorldError, match="gap"):
        make("lin-cube", gap=0.2)
    with pytest.raises(WorldError, match="unknown linear-MDP model"):
        linear_mdp_model(ModelSpec(name="nope"))


@pytest.mark.parametrize("name", ["lin-cube", "latent-levels"])
def test_npz_round_trip(name: str, tmp_path: Path) -> None:
    mdp = make(name)
    path = tmp_path / "world.npz"
    save_linear_mdp_npz(mdp, path)
    back = make(str(path))
    assert isinstance(back, LinearMDP)
    np.testing.assert_array_equal(back.P, mdp.P)
    assert back.spec.name == "inline-phi" and set(back.spec.params) == {
        "horizon", "features"}
    np.testing.assert_array_equal(linear_mdp_model(back.spec).features,
                                  mdp.model.features)
    assert optimal_return(back) == pytest.approx(optimal_return(mdp), abs=1e-12)
    np.savez(tmp_path / "bad.npz", phi=mdp.model.features * 3, mu=mdp.mu, theta=mdp.theta,
             d1=mdp.d1)
    with pytest.raises(WorldError, match="bad.npz"):
        make(str(tmp_path / "bad.npz"))
    with pytest.raises(WorldError, match="disagrees"):
        load_linear_mdp_npz(path, horizon=mdp.H + 1)


@pytest.mark.slow
def test_privrl_worlds_lists_them() -> None:
    done = subprocess.run([sys.executable, "-m", "privrl.client", "worlds"], capture_output=True,
                          text=True, timeout=120, check=True)
    for name in WORLDS:
        assert name in done.stdout
