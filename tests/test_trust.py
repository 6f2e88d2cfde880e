"""The trust-boundary registry (`privrl.trust`): the built-ins own their parts of a run, and a
boundary registered under a new name runs without anything else naming it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from privrl import trust
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.lab.plots import privacy_color
from privrl.privacy.privatizers import Aggregator, Central, Identity
from privrl.run import run_in_process
from privrl.trust.local import LocalDP
from privrl.worlds import riverswim

MDP = riverswim(6)


def config(privacy: str, **kw: object) -> RunConfig:
    base = dict(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=30, privacy=privacy,
                epsilon=2.0, mechanism="laplace", delta=0.0)
    return RunConfig(**{**base, **kw})


def test_the_built_ins_are_registered_by_name() -> None:
    assert trust.names()[:3] == ("none", "jdp", "ldp")
    assert [trust.get(n).label for n in ("none", "jdp", "ldp")] == ["non-private", "JDP", "LDP"]
    with pytest.raises(ValueError, match="unknown trust boundary 'xdp': known are none, jdp"):
        trust.get("xdp")
    with pytest.raises(ValueError, match="unknown trust boundary 'xdp'"):
        config("xdp")


@pytest.mark.parametrize(("name", "privatizer", "kind"), [
    ("none", Identity, "trajectory"), ("jdp", Central, "trajectory"), ("ldp", Aggregator, "noisy")])
def test_each_boundary_owns_its_privatizer_report_kind_and_users_side(
        name: str, privatizer: type, kind: str) -> None:
    cfg = config(name)
    algorithm = bind(cfg)
    calibration = algorithm.calibration()
    assert calibration.boundary is trust.get(name) and calibration.mode == name
    assert isinstance(algorithm.privatizer(calibration, [1], cfg.episodes), privatizer)
    assert algorithm.report_kind(name) == kind
    stats = {f.name: np.zeros((1, *f.shape)) for f in calibration.families}
    rng = [np.random.default_rng(0)]
    noisy = calibration.boundary.randomize(stats, calibration, rng, rng)
    assert (noisy is not None) == (name == "ldp")
    assert (calibration.acceptance_margin() > 0) == (name == "ldp")


def test_release_variance_comes_from_the_boundary() -> None:
    """JDP's release sums a counter's nodes (about log t), LDP's every report (t)."""
    jdp, ldp = (bind(config(n, episodes=1024)).calibration() for n in ("jdp", "ldp"))
    assert ldp.release_std(1000) == pytest.approx(ldp.release_std(1) * np.sqrt(1000))
    assert jdp.release_std(1000) < 12 * jdp.release_std(1)


class Shuffled(LocalDP):
    """A toy boundary: LDP's users' side and aggregator under another name and colour."""

    name = "toy-local"
    label = "toy"
    colour = "#9467bd"
    summary = "a toy boundary for the registry's test"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> trust.TrustBoundary:
    """The toy boundary, offered through the entry-point group as a plug-in would be."""
    boundary = Shuffled()
    point = SimpleNamespace(name=boundary.name, load=lambda: boundary)
    monkeypatch.setattr(trust, "_registry", dict(trust._registry))
    monkeypatch.setattr(trust, "_loaded", False)
    monkeypatch.setattr(trust, "entry_points",
                        lambda group: [point] if group == trust.ENTRY_POINTS else [])
    return boundary


def test_a_boundary_from_an_entry_point_runs_without_anything_naming_it(
        toy: trust.TrustBoundary) -> None:
    assert "toy-local" in trust.names() and trust.get("toy-local") is toy
    assert privacy_color("toy-local") == "#9467bd"
    cfg = config("toy-local")
    assert cfg.boundary is toy
    result = run_in_process(cfg, MDP, [3])
    assert result.regret.shape == (1, cfg.episodes)
    assert result.ledger.totals(cfg.accounting_delta).epsilon == pytest.approx(2.0)
