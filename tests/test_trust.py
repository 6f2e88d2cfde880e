"""The trust-boundary registry (`privrl.trust`): the built-ins own their parts of a run, and a
boundary registered under a new name runs without anything else naming it."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from privrl import trust
from privrl.algorithms import bind
from privrl.client.cli import main as cli_main
from privrl.config import RunConfig
from privrl.lab.plots import privacy_color
from privrl.privacy.privatizers import Aggregator, Central, Identity
from privrl.run import run_in_process
from privrl.trust.local import LocalDP
from privrl.worlds import riverswim
from support.client import reference_run, run_cli
from support.server import AUTH, REPO, LiveServer

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
    assert calibration.boundary is trust.get(name)
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


class EntryPointToy(LocalDP):
    """A toy boundary: LDP's users' side and aggregator under another name and colour."""

    name = "toy-entry-point"
    label = "toy"
    colour = "#8c564b"
    summary = "a toy boundary for the registry's test"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> trust.TrustBoundary:
    """The toy boundary, offered through the entry-point group as a plug-in would be."""
    boundary = EntryPointToy()
    point = SimpleNamespace(name=boundary.name, load=lambda: boundary)
    trust.names()  # load the built-ins first: the copy restored after the test holds them
    monkeypatch.setattr(trust, "_registry", dict(trust._registry))
    monkeypatch.setattr(trust, "_loaded", False)
    monkeypatch.setattr(trust, "entry_points",
                        lambda group: [point] if group == trust.ENTRY_POINTS else [])
    return boundary


def test_a_boundary_from_an_entry_point_runs_without_anything_naming_it(
        toy: trust.TrustBoundary) -> None:
    assert "toy-entry-point" in trust.names() and trust.get("toy-entry-point") is toy
    assert trust.names()[:3] == ("none", "jdp", "ldp")
    assert privacy_color("toy-entry-point") == "#8c564b"
    cfg = config("toy-entry-point")
    assert cfg.boundary is toy
    result = run_in_process(cfg, MDP, [3])
    assert result.regret.shape == (1, cfg.episodes)
    assert result.ledger.totals(cfg.accounting_delta).epsilon == pytest.approx(2.0)


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """PRIVRL_PLUGINS names the toy boundary's module, registered afresh for this test only."""
    trust.names()  # load the built-ins first: the copy restored after the test holds them
    monkeypatch.setattr(trust, "_registry", dict(trust._registry))
    monkeypatch.setenv("PRIVRL_PLUGINS", "support.toy_boundary")
    monkeypatch.delitem(sys.modules, "support.toy_boundary", raising=False)


def test_a_plugin_boundary_shows_in_the_cli_and_runs_there(plugin: None, tmp_path: Path) -> None:
    """PRIVRL_PLUGINS names a module that registers a boundary: `privrl run --privacy` offers
    it and runs it in process, its figure in the boundary's colour."""
    code = cli_main(["run", "--privacy", "toy-local", "--epsilon", "2", "--episodes", "20",
                     "--seeds", "1", "--quiet", "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["config"]["privacy"] for r in summary["results"]] == ["toy-local"]
    assert privacy_color("toy-local") == "#9467bd"


@pytest.mark.slow  # a real server process and a real `privrl users` process
def test_a_plugin_boundary_runs_over_http_with_the_in_process_numbers(plugin: None,
                                                                      tmp_path: Path) -> None:
    """A server and its users load the toy boundary from PRIVRL_PLUGINS; nothing in privrl
    names it: the server lists it (the dashboard reads that), accepts its runs and its users'
    noisy reports, and publishes what the in-process protocol computes."""
    importlib.import_module("support.toy_boundary")  # this process knows it too
    env = {"PRIVRL_PLUGINS": "support.toy_boundary",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    cfg = config("toy-local", episodes=12)
    with LiveServer(tmp_path / "db.sqlite", tmp_path / "log", "--sequential", env=env) as server:
        listed = {b["name"]: b for b in httpx.get(f"{server.url}/v1/trust", timeout=10).json()}
        assert listed["toy-local"]["colour"] == "#9467bd" and listed["toy-local"]["local_noise"]
        body = {**cfg.model_dump(mode="json"), "seed": 5}
        created = httpx.post(f"{server.url}/v1/runs", json=body, headers=AUTH, timeout=30)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        done = run_cli("users", "--server", server.url, "--run", run_id, "--concurrency", "1",
                       "--seed", "9", "--quiet", env=env)  # the run's own world: MDP
        assert done.returncode == 0, done.stderr[-2000:]
        board = httpx.get(f"{server.url}/v1/runs/{run_id}/billboard", timeout=10).json()
    assert board["reported"] == cfg.episodes
    reference = reference_run(cfg, 5, 9, MDP)
    for name, arr in reference.run.billboard().items():
        np.testing.assert_array_equal(np.asarray(board["arrays"][name]).ravel(),
                                      np.asarray(arr[0]).ravel())
