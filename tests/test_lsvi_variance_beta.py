"""LSVI-UCB's beta from the actual release noise (`noise_norms=variance`): the papers' own beta
formulas (Luyo App. E.1, Ngo Theorem 16) with their worst-case noise-norm bounds replaced by the
norm scales the release's variance implies, a public function of sigma, schedule and counter."""

from __future__ import annotations

import math

import pytest
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.protocol import RunRequest
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.server import AUTH, Apps

ALGOS = ["lsvi-ucb-batched", "lsvi-ucb-switching"]
VARIANCE = {"beta": None, "noise_norms": "variance"}


def config(algo: str, privacy: str = "jdp", epsilon: float = 10.0, episodes: int = 5000,
           preset: str = "practical", **knobs) -> RunConfig:
    world = make("lin-cube")
    return RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                     model=model_spec_of(world), episodes=episodes, privacy=privacy,
                     epsilon=epsilon, delta=1e-5 if privacy != "none" else 0.0,
                     mechanism="gaussian", preset=preset, knobs=knobs or None)


def papers_beta(algo: str, K: int, H: int, d: int, p: float, ridge: float, gram_norm: float,
                target_norm: float) -> float:
    """The papers' beta written out here, at the given noise norms (Ups / lam_t and C / lam_y)."""
    if algo == "lsvi-ucb-batched":  # App. E.1: c_K = d Ups
        reg = ridge + d * gram_norm
        u_k = max(1.0, 2 * H * math.sqrt(d * K / reg) + target_norm / reg)
        chi = 24**2 * 18 * K**2 * d * u_k * H / p
        return 24 * H * math.sqrt(d * reg) * math.log(chi)
    lam = gram_norm if gram_norm > 0 else ridge  # Theorem 16
    u_k = max(1.0, 2 * H * math.sqrt(d * K / lam) + target_norm / lam)
    log_chi = math.log(25**4 * 162 * d * u_k * H / p) + 4 * math.log(K)
    return 5 * H**2 * math.sqrt(d * gram_norm * log_chi) + 6 * d * H * math.sqrt(log_chi)


@pytest.mark.parametrize("counter", ["smoothed", "tree"])
@pytest.mark.parametrize("algo", ALGOS)
def test_variance_beta_is_the_papers_formula_at_the_release_norms(algo: str,
                                                                   counter: str) -> None:
    """beta = beta_scale * the paper's formula at 2 sqrt(d) sigma sqrt(max_t v_t) (the Gram
    counter's largest release variance, summed here over its releases) and sqrt(d) sigma_y."""
    cfg = config(algo, beta_scale=0.25, **VARIANCE).model_copy(update={"counter": counter})
    a = bind(cfg)
    plan = a.counter_plan
    assert plan.kind == counter
    worst = max(plan.release_variance(t) for t in range(1, plan.releases + 1))
    d = a.model.d
    gram_norm = 2 * math.sqrt(d) * a.gram_sigma * math.sqrt(worst)
    target_norm = math.sqrt(d) * a.target_sigma
    assert gram_norm > 0 and target_norm > 0
    want = papers_beta(algo, cfg.episodes, cfg.horizon, d, cfg.beta, a.knobs.ridge, gram_norm,
                       target_norm)
    assert a.beta == pytest.approx(0.25 * want, rel=1e-12)
    # the same norm the variance-aware shift adds (one home)
    if a.knobs.shift == "variance":
        assert a.gram_diagonal - a.gram_floor == pytest.approx(
            a.knobs.shift_scale * gram_norm, rel=1e-12)
    # and far below the tail-bound theory value
    theory = bind(cfg.model_copy(update={"knobs": {"beta": None, "beta_scale": 0.25}}))
    assert a.beta < theory.beta


@pytest.mark.parametrize("algo", ALGOS)
def test_variance_beta_grows_with_sigma(algo: str) -> None:
    """A smaller epsilon means larger sigmas, larger noise norms and a larger beta."""
    runs = [bind(config(algo, epsilon=eps, **VARIANCE)) for eps in (1e4, 100.0, 10.0, 1.0, 0.1)]
    sigmas = [a.gram_sigma for a in runs]
    betas = [a.beta for a in runs]
    assert sigmas == sorted(sigmas) and len(set(sigmas)) == len(sigmas)
    assert all(b2 > b1 for b1, b2 in zip(betas, betas[1:], strict=False))


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize(("privacy", "epsilon"), [("none", math.inf), ("jdp", math.inf)])
def test_without_noise_the_variance_beta_is_the_non_private_limit(algo: str, privacy: str,
                                                                   epsilon: float) -> None:
    """No noise: zero norms, so beta is the papers' non-private value (faithful knobs: the same
    ridge as the theory beta), and the formula with zero norms."""
    a = bind(config(algo, privacy, epsilon, preset="faithful", noise_norms="variance"))
    assert a.release_norms() == (0.0, 0.0)
    theory = bind(config(algo, privacy, epsilon, preset="faithful"))
    assert a.beta == pytest.approx(theory.beta, rel=1e-12)
    ridge = float(a.model.d) if algo == "lsvi-ucb-batched" else a.knobs.ridge
    assert a.beta == pytest.approx(papers_beta(algo, 5000, 5, a.model.d, 0.1, ridge, 0.0, 0.0),
                                   rel=1e-12)


@pytest.mark.parametrize("algo", ALGOS)
def test_beta_knobs_refuse_nonsense(algo: str) -> None:
    """A fixed beta and noise_norms=variance exclude each other (the practical preset fixes
    beta = 2, so it needs beta=null); unknown modes and non-positive scales are refused."""
    with pytest.raises(ValueError, match="unset beta"):
        bind(config(algo, noise_norms="variance"))
    with pytest.raises(ValueError, match="unset beta"):
        bind(config(algo, beta=3.0, noise_norms="variance", preset="faithful"))
    with pytest.raises(ValueError, match="noise_norms"):
        bind(config(algo, beta=None, noise_norms="worst"))
    for scale in (0.0, -1.0):
        with pytest.raises(ValueError, match="beta_scale"):
            bind(config(algo, beta_scale=scale, **VARIANCE))
    with pytest.raises(ValueError, match="beta"):
        bind(config(algo, beta=-2.0))


def test_a_server_refuses_a_fixed_beta_with_noise_norms_where_the_run_is_made(apps: Apps) -> None:
    """The knobs are each schema-valid; only with the preset's fixed beta do they clash, a rule
    beyond the served schema: 422 invalid_run, never a schema refusal."""
    client = apps()
    body = RunRequest(**config("lsvi-ucb-switching", noise_norms="variance").model_dump(),
                      seed=3).model_dump(mode="json", exclude_none=True)
    resp = client.post("/v1/runs", headers=AUTH, json=body)
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_run", resp.text
    assert "unset beta" in resp.json()["detail"]
