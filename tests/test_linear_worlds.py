"""Linear-mixture worlds: the papers' values, norm assumptions, structure, files."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from privrl.worlds import (
    LinearMixtureMDP,
    episode_regret,
    load_linear_npz,
    make,
    optimal_q,
    optimal_return,
    public_model,
    rollout,
    save_linear_npz,
    uniform_random_return,
)
from privrl.worlds.linear_mixture import sign_actions
from privrl.worlds.model_spec import ModelSpec
from privrl.worlds.rollout import draw_uniforms
from privrl.worlds.tabular import WorldError

LUYO = ["lm-hard", "lm-mix"]  # Luyo's Asm. 2: ||phi_v|| <= 1 for v in [0,1]^S, ||w_h|| <= C_w
ZHOU = ["zhou-mix", "zhou-tabular"]  # Zhou's Asm. 1: ||phi_V|| <= sqrt(d1) H, ||theta_p|| <=
# sqrt(d1), ||varphi|| <= 1, ||theta_r|| <= sqrt(d2)
WORLDS = LUYO + ZHOU


def _vertex_norm(mdp: LinearMixtureMDP) -> float:
    """max ||phi_v(s,a)|| over every vertex v of [0,1]^S (the maximum of a convex function)."""
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=mdp.S)))
    return float(np.linalg.norm(mdp.model.value_features(vertices), axis=-1).max())


def test_lm_hard_verified_values() -> None:
    """Luyo et al. 2021's LM-Hard: d=4, H=5, Delta=0.05 gives V*_1 = 2.4744 and 1.6384 for
    the uniform policy."""
    mdp = make("lm-hard")
    assert (mdp.H, mdp.S, mdp.A, mdp.model.d) == (5, 7, 8, 4)
    assert optimal_return(mdp) == pytest.approx(2.47436875, abs=1e-12)
    assert uniform_random_return(mdp) == pytest.approx(1.6384, abs=1e-12)
    # the optimal action at x_h is sign(mu_h) (mu_h = theta_h[1:] c_b); the last step's
    # transition does not matter
    q, _ = optimal_q(mdp)
    acts = sign_actions(4)
    for h in range(mdp.H - 1):
        best = acts[int(np.argmax(q[h, h]))]
        np.testing.assert_array_equal(best, np.sign(mdp.theta[h, 1:]))


@pytest.mark.parametrize("name", WORLDS)
def test_norm_assumptions(name: str) -> None:
    mdp = make(name)
    model = mdp.model
    exact = _vertex_norm(mdp)
    assert exact <= model.feature_bound + 1e-12
    rng = np.random.default_rng(0)
    v = rng.random((200, mdp.S))
    assert np.linalg.norm(model.value_features(v), axis=-1).max() <= exact + 1e-12
    norms = np.linalg.norm(mdp.theta, axis=-1)
    assert norms.max() <= model.c_w + 1e-12
    if name in LUYO:
        assert exact <= 1.0 + 1e-12
        assert model.rewards is not None  # Luyo: rewards known to the learner
    else:
        d1, d2 = model.d, model.d2
        assert exact <= math.sqrt(d1) + 1e-12
        assert norms.max() <= math.sqrt(d1)
        assert np.linalg.norm(model.reward_features, axis=-1).max() <= 1 + 1e-12
        assert np.linalg.norm(mdp.reward_theta, axis=-1).max() <= math.sqrt(d2)
        assert mdp.reward_noise == "bernoulli"


def test_lm_hard_c_w_is_attained() -> None:
    for d, gap in ((4, 0.05), (6, 0.02)):
        mdp = make("lm-hard", d=d, gap=gap)
        np.testing.assert_allclose(np.linalg.norm(mdp.theta, axis=-1), 1 + (d - 1) * gap)
        assert mdp.model.c_w == pytest.approx(1 + (d - 1) * gap)


@pytest.mark.parametrize("name", WORLDS)
def test_transitions_are_the_linear_mixture(name: str) -> None:
    mdp = make(name)
    np.testing.assert_allclose(np.einsum("satd,hd->hsat", mdp.model.features, mdp.theta), mdp.P,
                               atol=1e-12)
    np.testing.assert_allclose(mdp.P.sum(-1), 1.0, atol=1e-12)
    assert (mdp.P >= 0).all()
    # [P_h V](s,a) = <phi_V(s,a), theta_h> for any V
    v = np.random.default_rng(1).random(mdp.S) * mdp.H
    np.testing.assert_allclose(mdp.model.value_features(v) @ mdp.theta[0], mdp.P[0] @ v, atol=1e-9)


@pytest.mark.parametrize("name", WORLDS)
def test_public_spec_names_no_secret_and_rebuilds_the_model(name: str) -> None:
    mdp = make(name)
    spec = mdp.spec
    assert "seed" not in spec.params
    model = public_model(spec)
    np.testing.assert_array_equal(model.features, mdp.model.features)
    if name in ("lm-hard", "lm-mix", "zhou-mix"):
        other = make(name, seed=5)
        assert other.spec == spec  # same public model ...
        assert not np.array_equal(other.theta, mdp.theta)  # ... another secret world


@pytest.mark.slow  # statistical: Monte Carlo over 40,000 rollouts
def test_exact_values_match_monte_carlo() -> None:
    mdp = make("lm-mix")
    pol = np.random.default_rng(2).integers(0, mdp.A, size=(mdp.H, mdp.S))
    n = 40_000
    rngs = [np.random.default_rng(i) for i in range(n)]
    traj = rollout(mdp, pol, draw_uniforms(rngs, mdp.H))
    exact = optimal_return(mdp) - episode_regret(mdp, pol[None])[0]
    assert traj.returns.mean() == pytest.approx(exact, abs=4 * traj.returns.std() / math.sqrt(n))


@pytest.mark.parametrize("name", WORLDS)
def test_npz_round_trip(name: str, tmp_path: Path) -> None:
    mdp = make(name)
    path = tmp_path / "world.npz"
    save_linear_npz(mdp, path)
    back = make(str(path))
    assert isinstance(back, LinearMixtureMDP)
    np.testing.assert_allclose(back.P, mdp.P, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(back.R, mdp.R)
    assert back.reward_noise == mdp.reward_noise
    assert back.spec.name == "inline" and "theta" not in back.spec.params
    inline = public_model(back.spec)
    np.testing.assert_array_equal(inline.features, mdp.model.features)
    assert optimal_return(back) == pytest.approx(optimal_return(mdp), abs=1e-12)


def _save(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


def test_npz_errors(tmp_path: Path) -> None:
    mdp = make("lm-mix")
    good = {"features": mdp.model.features, "theta": mdp.theta, "d1": mdp.d1,
            "rewards": mdp.model.rewards}
    cases = [
        ({k: v for k, v in good.items() if k != "theta"}, "missing key.*theta"),
        ({**good, "extra": np.zeros(2)}, "unknown key.*extra"),
        ({**good, "theta": mdp.theta[:, :2]}, "theta must have shape"),
        ({**good, "features": mdp.model.features[..., 0]}, r"features must have shape \(S, A"),
        ({**good, "theta": mdp.theta * 1.5}, "sums to|non-negative"),
        ({**good, "theta": mdp.theta, "c_w": 0.5}, "exceeds the public bound c_w"),
        ({**good, "rewards": np.full((2, 2), 0.5)}, "rewards must have shape"),
        ({k: v for k, v in good.items() if k != "rewards"}, "known rewards or reward_features"),
        ({**good, "reward_features": np.ones((5, 3, 2))}, "go together"),
        ({**good, "features": np.where(mdp.model.features > 0, np.nan, 0.0)}, "non-finite"),
    ]
    for i, (arrays, pattern) in enumerate(cases):
        path = _save(tmp_path / f"bad{i}.npz", **arrays)
        with pytest.raises(WorldError, match=pattern):
            make(path)
    with pytest.raises(WorldError, match="disagrees"):
        load_linear_npz(_save(tmp_path / "ok.npz", **good), horizon=7)
    with pytest.raises(WorldError, match="does not take"):
        make(_save(tmp_path / "ok2.npz", **good), gap=1)


def test_world_parameter_errors() -> None:
    with pytest.raises(WorldError, match="gap"):
        make("lm-hard", gap=0.2)  # (d-1) gap > 1/H
    with pytest.raises(WorldError, match="does not take"):
        make("lm-mix", gap=0.1)
    with pytest.raises(WorldError, match="unknown public model"):
        public_model(ModelSpec(name="nope"))


@pytest.mark.slow
def test_privrl_worlds_lists_them() -> None:
    done = subprocess.run([sys.executable, "-m", "privrl.client", "worlds"], capture_output=True,
                          text=True, timeout=120, check=True)
    for name in WORLDS:
        assert name in done.stdout
    assert "H=5" in done.stdout and "gap=0.05" in done.stdout
