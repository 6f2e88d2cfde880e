"""The opendp noise backend: calibrated, unseeded draws; the ledger names it; a server persists
the tree noise it draws and rebuilds exactly from it (never re-drawing a published value)."""

from __future__ import annotations

import math
import sqlite3
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy import noise as noise_mod
from privrl.privacy.accountant import Charge, Ledger
from privrl.privacy.discrete import discrete_gaussian_variance, discrete_laplace_variance
from privrl.privacy.mechanisms import Gaussian, Laplace
from privrl.privacy.noise import (
    IntegerNoise,
    OpenDPNoise,
    SecureNoiseUnavailable,
    noise_backend,
)
from privrl.privacy.tree import StoredNoiseError, TreeCounter
from privrl.protocol import LedgerView
from privrl.run import run_in_process
from privrl.seeding import generator
from privrl.worlds.tabular import TabularMDP, riverswim
from support.discrete import pmf_pvalue
from support.server import (
    AUTH,
    Apps,
    LiveServer,
    create,
    interleaved,
    play,
    snapshot,
    spec,
    state,
    user_report,
)

SECURE = OpenDPNoise()
N_DRAWS = 20_000


def _node_rows(db: Path, run_id: str) -> int:
    """How many tree nodes' noise the store holds for a run."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM node_noise WHERE run_id = ?", (run_id,))
        return int(rows.fetchone()[0])


def _cycle(http: httpx.Client, run_id: str, config: dict, mdp: TabularMDP) -> None:
    """One honest user's claim and report over real HTTP."""
    resp = http.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 200, resp.text
    resp = http.post(f"/v1/runs/{run_id}/reports", json=user_report(resp.json(), config, mdp))
    assert resp.status_code == 200, resp.text


# ---------------------------------------------------------------------------------------------
# The samplers
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # statistical: KS tests on 20,000 OpenDP draws
@pytest.mark.parametrize("b", [0.7, 25.0])
def test_opendp_laplace_has_the_calibrated_scale(b: float) -> None:
    """OpenDP's Laplace(b) draws are discrete Laplace integers of scale b: their pmf (chi-square
    against exp(-|k| / b)) and their variance 2q / (1 - q)^2, q = exp(-1 / b)."""
    x = Laplace(b, SECURE).sample(None, N_DRAWS)
    assert x.shape == (N_DRAWS,) and x.dtype == np.int64
    assert pmf_pvalue(x, lambda k: np.exp(-np.abs(k) / b)) > 1e-4
    assert x.var() == pytest.approx(discrete_laplace_variance(b), rel=0.06)
    # a wrong scale convention (std passed as scale) would be rejected:
    assert pmf_pvalue(x, lambda k: np.exp(-np.abs(k) / (math.sqrt(2.0) * b))) < 1e-6


@pytest.mark.slow  # statistical: KS tests on 20,000 OpenDP draws
@pytest.mark.parametrize("sigma", [0.7, 25.0])
def test_opendp_gaussian_has_the_calibrated_scale(sigma: float) -> None:
    """OpenDP's Gaussian(sigma) draws are discrete Gaussian integers: pmf and variance."""
    x = Gaussian(sigma, SECURE).sample(None, (100, N_DRAWS // 100))
    assert x.shape == (100, N_DRAWS // 100) and x.dtype == np.int64
    assert pmf_pvalue(x.ravel(), lambda k: np.exp(-k * k / (2 * sigma**2))) > 1e-4
    assert x.var() == pytest.approx(discrete_gaussian_variance(sigma), rel=0.05)
    assert abs(x.mean()) < 0.05 * sigma + 0.02
    assert pmf_pvalue(x.ravel(), lambda k: np.exp(-k * k / (2 * (1.2 * sigma) ** 2))) < 1e-6


def test_opendp_privacy_maps_agree_with_the_mechanisms() -> None:
    """OpenDP's own privacy map of the measurement we sample from equals our map at that scale."""
    lap, gau = noise_mod._measurement("laplace", 4.0), noise_mod._measurement("gaussian", 4.0)
    assert lap.map(10) == pytest.approx(Laplace(4.0).epsilon(10.0), rel=1e-9)
    assert gau.map(10) == pytest.approx(Gaussian(4.0).rho(10.0), rel=1e-9)


def test_secure_draws_differ_and_ignore_any_generator() -> None:
    """Unseeded: two draws differ, even 'from' generators in the same state (rng is unused)."""
    for mech in (Laplace(3.0, SECURE), Gaussian(3.0, SECURE)):
        a = mech.sample(generator(1, "same"), 64)
        b = mech.sample(generator(1, "same"), 64)
        assert not np.array_equal(a, b)  # integers: single entries collide often
        assert not mech.reproducible
    seeded = Laplace(3.0)
    assert seeded.reproducible
    np.testing.assert_array_equal(
        seeded.sample(generator(1, "same"), 64), seeded.sample(generator(1, "same"), 64)
    )
    with pytest.raises(ValueError, match="seeded generator"):
        seeded.sample(None, 3)


def test_degenerate_scales_with_opendp() -> None:
    """Scale 0 is no noise; an infinite scale (zero budget) cannot be sampled, as with numpy."""
    assert np.all(Laplace(0.0, SECURE).sample(None, (2, 3)) == 0.0)
    assert np.all(Gaussian(0.0, SECURE).sample(None, 4) == 0.0)
    assert Laplace(1.0, SECURE).sample(None, (0, 3)).shape == (0, 3)
    assert Gaussian(1.0, SECURE).sample(None, ()).shape == ()
    with pytest.raises(ValueError, match="infinite"):
        Laplace(math.inf, SECURE).sample(None, 3)
    with pytest.raises(ValueError, match="infinite"):
        Gaussian(math.inf, SECURE).sample(None, 3)


@pytest.mark.parametrize(
    "privacy, mechanism, delta",
    [("jdp", "laplace", 0.0), ("jdp", "gaussian", 1e-5), ("ldp", "gaussian", 1e-5)],
)
def test_the_backend_changes_how_noise_is_drawn_not_its_calibration(
    privacy: str, mechanism: str, delta: float
) -> None:
    base = dict(n_states=4, n_actions=2, horizon=5, episodes=64, privacy=privacy,
                mechanism=mechanism, delta=delta)
    if privacy == "jdp":  # the same counter for both (the seeded backend's preset is a matrix)
        base["counter"] = "smoothed"
    plain = bind(RunConfig(**base)).calibration()
    secure = bind(RunConfig(**base, noise="opendp")).calibration()
    assert (plain.noise, secure.noise) == ("numpy", "opendp")
    assert isinstance(plain.mechanism.backend, IntegerNoise)
    assert isinstance(secure.mechanism.backend, OpenDPNoise)
    assert secure.noise_scale == plain.noise_scale > 0
    assert secure.families == plain.families
    assert secure.release_std(17) == plain.release_std(17)


def test_missing_opendp_is_a_clear_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opendp", None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    noise_mod._opendp.cache_clear()
    try:
        with pytest.raises(SecureNoiseUnavailable, match=r"pip install 'privrl\[secure\]'"):
            noise_backend("opendp")
        assert noise_backend("numpy") == IntegerNoise()  # the default never imports OpenDP
        with pytest.raises(ValueError, match="privrl"):  # a configuration error (422 on a server)
            config = RunConfig(n_states=2, n_actions=2, horizon=2, episodes=4, noise="opendp")
            bind(config).calibration()
    finally:
        noise_mod._opendp.cache_clear()


def test_a_server_without_opendp_refuses_an_opendp_run_saying_what_to_install(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = apps()
    monkeypatch.setitem(sys.modules, "opendp", None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    noise_mod._opendp.cache_clear()
    try:
        resp = client.post("/v1/runs", json=spec("jdp", noise="opendp"), headers=AUTH)
        assert resp.status_code == 422, resp.text
        assert "pip install 'privrl[secure]'" in resp.json()["detail"]
        assert client.post("/v1/runs", json=spec("jdp"), headers=AUTH).status_code == 201
    finally:
        noise_mod._opendp.cache_clear()


# ---------------------------------------------------------------------------------------------
# Tree counters: journal, replay, no draw on release
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("smooth", [False, True])
def test_unseeded_tree_noise_is_journalled_at_add_and_replays_exactly(smooth: bool) -> None:
    rng = np.random.default_rng(5)
    items = rng.integers(0, 3, size=(13, 1, 3)).astype(float)
    tree = TreeCounter((3,), Gaussian(2.0, SECURE), [0], "sas", 16, smooth)
    tree.journal = True
    releases, drawn = [], []
    for t in range(13):
        tree.add(items[t])
        drawn += tree.take_drawn()
        releases.append(tree.release())
        tree.release()
        assert tree.take_drawn() == []  # a release (a read) draws nothing
    assert len({(n.level, n.index) for n in drawn}) == len(drawn) > 0
    if not smooth:  # the binary mechanism draws one node per item: the one completing there
        assert len(drawn) == 13
    again = TreeCounter((3,), Gaussian(2.0, SECURE), [0], "sas", 16, smooth)
    again.begin_replay(drawn)
    for t in range(13):
        again.add(items[t])
        np.testing.assert_array_equal(again.release(), releases[t])
    again.end_replay()
    fresh = TreeCounter((3,), Gaussian(2.0, SECURE), [0], "sas", 16, smooth)
    for t in range(13):
        fresh.add(items[t])
    assert not np.array_equal(fresh.release(), releases[-1])  # unseeded: a new tree differs


def test_a_replay_never_redraws_a_missing_node_and_refuses_unused_ones() -> None:
    tree = TreeCounter((2,), Laplace(1.0, SECURE), [0], "sas", 8)
    tree.journal = True
    for _ in range(4):
        tree.add(np.ones((1, 2)))
    drawn = tree.take_drawn()
    missing = TreeCounter((2,), Laplace(1.0, SECURE), [0], "sas", 8)
    missing.begin_replay(drawn[:-1])
    for _ in range(3):
        missing.add(np.ones((1, 2)))
    with pytest.raises(StoredNoiseError, match="not stored"):
        missing.add(np.ones((1, 2)))
    unused = TreeCounter((2,), Laplace(1.0, SECURE), [0], "sas", 8)
    unused.begin_replay(drawn)
    unused.add(np.ones((1, 2)))
    with pytest.raises(StoredNoiseError, match="never used"):
        unused.end_replay()
    unused.add(np.ones((1, 2)))  # after the replay, fresh nodes are drawn again
    seeded = TreeCounter((2,), Laplace(1.0), [0], "sas", 8)
    seeded.journal = True
    seeded.add(np.ones((1, 2)))
    assert seeded.take_drawn() == []  # seeded noise is re-derived, never stored


# ---------------------------------------------------------------------------------------------
# In-process runs and the ledger
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "privacy, mechanism, delta",
    [("jdp", "laplace", 0.0), ("jdp", "gaussian", 1e-5), ("ldp", "laplace", 0.0)],
)
def test_in_process_runs_with_opendp_complete_and_the_ledger_names_the_backend(
    privacy: str, mechanism: str, delta: float
) -> None:
    base = dict(n_states=4, n_actions=2, horizon=5, episodes=24, privacy=privacy,
                mechanism=mechanism, delta=delta)
    mdp = riverswim(horizon=5, n_states=4)
    secure = run_in_process(RunConfig(**base, noise="opendp"), mdp, [0, 1])
    plain = run_in_process(RunConfig(**base), mdp, [0, 1])
    assert secure.regret.shape == (2, 24) and np.all(np.isfinite(secure.regret))
    assert {c.noise for c in secure.ledger.entries} == {"opendp"}
    assert {c.noise for c in plain.ledger.entries} == {"numpy"}
    view = LedgerView.of("r", secure.ledger, 1e-5)
    assert view.noise == ["opendp"] and all(c["noise"] == "opendp" for c in view.charges)
    # same calibration, so the same spend, whichever backend drew the noise
    assert secure.ledger.totals(1e-5) == plain.ledger.totals(1e-5)


def test_charges_round_trip_their_backend_and_old_ledgers_read_as_numpy() -> None:
    charge = Charge("tree:sas", epsilon=0.5, sensitivity=2.0, scale=4.0, noise="opendp")
    assert Charge.from_dict(charge.to_dict()) == charge
    old = {k: v for k, v in charge.to_dict().items() if k != "noise"}
    assert Charge.from_dict(old).noise == "numpy"
    assert Ledger([charge, Charge.from_dict(old)]).noise_backends() == ["numpy", "opendp"]
    with pytest.raises(ValueError, match="noise"):
        Charge("tree:sas", noise="")


# ---------------------------------------------------------------------------------------------
# A server: node noise persisted with its report, rebuilt exactly, never re-drawn
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def secure_spec() -> dict:
    """A small JDP run on the opendp backend (practical preset: smoothed trees)."""
    return spec("jdp", episodes=30, n_states=4, horizon=5, noise="opendp")


@pytest.mark.parametrize("smoothing", [False, pytest.param(True, marks=pytest.mark.slow)])  # long
def test_server_rebuilds_an_opendp_run_exactly_after_restarts(
    apps: Apps, secure_spec: dict, smoothing: bool
) -> None:
    config = {**secure_spec, "counter": "smoothed" if smoothing else "tree"}
    client = apps()
    run_id = create(client, config)
    plain = create(client, spec("jdp", episodes=30, n_states=4, horizon=5))
    play(client, plain, spec("jdp", episodes=30, n_states=4, horizon=5), 4)
    interleaved(client, run_id, config, 5, seed=3)
    for _ in range(3):  # reads draw nothing (nothing unstored could be published by them)
        client.get(f"/v1/runs/{run_id}/billboard")
    before = state(client, run_id)
    stored = _node_rows(apps.db, run_id)
    assert stored >= before["status"]["reported"] > 0
    assert _node_rows(apps.db, plain) == 0  # the seeded backend stores no noise
    assert before["ledger"]["noise"] == ["opendp"]
    assert {c["noise"] for c in before["ledger"]["charges"]} == {"opendp"}

    client = apps.reopen(client)
    assert state(client, run_id) == before  # same billboard, ledger and policy log
    assert _node_rows(apps.db, run_id) == stored  # the replay drew nothing new
    interleaved(client, run_id, config, 4, seed=4)  # fresh nodes drawn and stored after a restart
    middle = state(client, run_id)
    assert _node_rows(apps.db, run_id) > stored
    client = apps.reopen(client)
    assert state(client, run_id) == middle


def test_a_missing_stored_node_makes_the_rebuild_fail(apps: Apps, secure_spec: dict) -> None:
    client = apps()
    run_id = create(client, secure_spec)
    healthy = create(client, secure_spec)
    play(client, run_id, secure_spec, 6)
    play(client, healthy, secure_spec, 2)
    apps.close(client)
    with sqlite3.connect(apps.db) as conn:
        conn.execute(
            "DELETE FROM node_noise WHERE run_id = ? AND family = 'sas' AND level = 1 AND idx = 3",
            (run_id,),
        )
        assert conn.total_changes == 1
    client = apps()
    resp = client.get(f"/v1/runs/{run_id}/billboard")
    assert resp.status_code == 503
    assert "RebuildError" in resp.json()["detail"] and "not stored" in resp.json()["detail"]
    assert client.get(f"/v1/runs/{healthy}/billboard").status_code == 200
    assert client.delete(f"/v1/runs/{run_id}", headers=AUTH).status_code == 204
    assert _node_rows(apps.db, run_id) == 0  # deleting a run purges its (private) noise


def test_a_stored_node_the_replay_never_uses_makes_the_rebuild_fail(
    apps: Apps, secure_spec: dict
) -> None:
    client = apps()
    run_id = create(client, secure_spec)
    play(client, run_id, secure_spec, 3)
    apps.close(client)
    with sqlite3.connect(apps.db) as conn:
        value = conn.execute("SELECT value FROM node_noise LIMIT 1").fetchone()[0]
        conn.execute(
            "INSERT INTO node_noise (run_id, family, level, idx, value) VALUES (?, 'sas', 0, 9, ?)",
            (run_id, value),
        )
    client = apps()
    resp = client.get(f"/v1/runs/{run_id}")
    assert resp.status_code == 503 and "never used" in resp.json()["detail"]


def test_an_opendp_ldp_run_over_http_names_the_backend(apps: Apps) -> None:
    config = spec("ldp", episodes=5, noise="opendp")
    client = apps()
    run_id = create(client, config)
    play(client, run_id, config, 5)
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    assert ledger["noise"] == ["opendp"]
    assert _node_rows(apps.db, run_id) == 0  # the users drew the noise; the reports hold it


@pytest.mark.slow
def test_sigkilled_real_server_rebuilds_an_opendp_run(tmp_path: Path, secure_spec: dict) -> None:
    db, log = tmp_path / "privrl.db", tmp_path / "server.log"
    mdp = riverswim(horizon=secure_spec["horizon"], n_states=secure_spec["n_states"])
    server = LiveServer(db, log).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            run_id = create(http, secure_spec)
            for _ in range(9):
                _cycle(http, run_id, secure_spec, mdp)
            before = snapshot(http.get, run_id)
        server.kill()  # SIGKILL: only what was committed survives
        server = LiveServer(db, log).start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert snapshot(http.get, run_id) == before
            for _ in range(3):
                _cycle(http, run_id, secure_spec, mdp)
            assert snapshot(http.get, run_id)["status"]["reported"] == 12
    finally:
        server.stop()
    assert "rebuilt: 9 reports replayed" in server.log()
