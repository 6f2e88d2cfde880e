"""The denoising attack, run as an outsider would: public routes only, plus the open library.

Noise from a seeded generator is only as private as its seed. An attacker who can guess the seed
behind the server's tree noise (or behind a user's local noise) recomputes that noise with the
open library and subtracts it from the public billboard, which then shows the exact counts. The
attacker here harvests every integer the public routes show (run info, ledger, policy log,
metrics, the OpenAPI document), adds the small integers people type, and tries each as the
server's seed and as the users' seed. The test passes when no candidate brings the recovered
counts closer to the truth than the declared noise allows.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.ucbvi.counts import tabular_counts
from privrl.client.users import run_users
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger
from privrl.privacy.privatizers import Central
from privrl.protocol import PolicyLog
from privrl.run import user_episode
from support.server import AUTH, LiveServer, create_at, public, spec, user_report, world

pytestmark = pytest.mark.slow  # every test here starts a real server process

K = 24
GUESSES = range(0, 65)  # seeds people type: 0, 1, 42, ...
PUBLIC_ROUTES = ("", "/billboard", "/ledger", "/policy", "/policies")


def integers_in(doc: Any) -> Iterator[int]:
    """Every non-negative integer anywhere in a JSON document (keys and numeric strings too)."""
    if isinstance(doc, bool):
        return
    if isinstance(doc, int) and doc >= 0:
        yield doc
    elif isinstance(doc, float) and doc.is_integer() and doc >= 0:
        yield int(doc)
    elif isinstance(doc, str) and doc.isdigit():
        yield int(doc)
    elif isinstance(doc, dict):
        for key, value in doc.items():
            yield from integers_in(key)
            yield from integers_in(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from integers_in(value)


def public_view(url: str, run_id: str) -> tuple[dict[str, Any], set[int]]:
    """What anyone can read about a run, and every integer it contains (billboard arrays aside)."""
    view: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for route in PUBLIC_ROUTES:
            resp = http.get(f"/v1/runs/{run_id}{route}")
            assert resp.status_code == 200, resp.text
            view[route or "info"] = resp.json()
        view["list"] = http.get("/v1/runs").json()
        view["openapi"] = http.get("/openapi.json").json()
        metrics = http.get("/metrics").text
    docs = {k: v for k, v in view.items() if k != "/billboard"}
    found = set(integers_in(docs))
    for token in metrics.replace("{", " ").replace("}", " ").replace(",", " ").split():
        for part in token.replace('"', " ").replace("=", " ").split():
            if part.replace(".0", "").isdigit():
                found.add(int(float(part)))
    return view, found | set(GUESSES)


def play_honestly(url: str, run_id: str, config: dict[str, Any], client_seed: int) -> dict:
    """K honest users; the sum of their true counts (what the billboard must hide)."""
    mdp, truth = world(config), None
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(config["episodes"]):
            ticket = http.post(f"/v1/runs/{run_id}/claims").json()
            body = user_report(ticket, config, mdp, client_seed=client_seed)
            resp = http.post(f"/v1/runs/{run_id}/reports", json=body)
            assert resp.status_code == 200, resp.text
            policy = np.asarray(ticket["policy"]["actions"], dtype=np.int64)[None]
            cfg = public(config)
            traj, _ = user_episode(mdp, {"actions": policy}, [client_seed], ticket["episode"],
                                   bind(cfg), bind(cfg).calibration())
            counts = tabular_counts(traj, mdp.S, mdp.A)
            truth = counts if truth is None else {k: truth[k] + v for k, v in counts.items()}
    assert truth is not None
    return {k: v[0] for k, v in truth.items()}


def central_noise(config: RunConfig, seed: int, items: int) -> dict[str, np.ndarray]:
    """The server's tree noise after `items` reports, were its seed `seed` (open library)."""
    cal = bind(config).calibration()
    central = Central(cal, [seed], config.episodes)
    zeros = {f.name: np.zeros((1, *f.shape)) for f in cal.families}
    for _ in range(items):
        central.ingest(zeros, Ledger())
    return {name: arr[0] for name, arr in central.release().items()}


def local_noise(config: RunConfig, seed: int, policies: dict, served: list[int]) -> dict:
    """The sum of every user's local noise, were the users' seed `seed` (open library)."""
    cal = bind(config).calibration()
    mdp = world(config.model_dump())
    total: dict[str, np.ndarray] = {}
    for episode, version in enumerate(served):
        policy = np.asarray(policies[str(version)], dtype=np.int64)[None]
        algorithm = bind(config)
        traj, noisy = user_episode(mdp, {"actions": policy}, [seed], episode, algorithm, cal,
                                   nonces=[episode])
        assert noisy is not None
        clean = algorithm.user_statistics(traj, {"actions": policy})
        for name, arr in noisy.items():
            total[name] = total.get(name, 0.0) + (arr - clean[name])[0]
    return total


def rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a))))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server process for both runs."""
    base = tmp_path_factory.mktemp("attack")
    # the test reads the stored seeds while the server runs: the database is left shared
    env = {"PRIVRL_DB_EXCLUSIVE": "false"}
    with LiveServer(base / "db.sqlite", base / "log", env=env) as live:
        yield live


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_jdp_billboard_cannot_be_denoised_from_public_data(
    server: LiveServer, mechanism: str
) -> None:
    """Every harvested seed leaves the recovered N(s,a,s') about one release std from the truth."""
    delta = 1e-5 if mechanism == "gaussian" else 0.0
    config = spec("jdp", episodes=K, epsilon=1.0, mechanism=mechanism, delta=delta, seed=None)
    run_id = create_at(server.url, config)
    truth = play_honestly(server.url, run_id, config, client_seed=secrets.randbits(64))
    view, candidates = public_view(server.url, run_id)
    public = RunConfig.model_validate(view["info"]["config"])
    board = view["/billboard"]
    released = np.asarray(board["arrays"]["sas"]).reshape(board["shapes"]["sas"])
    std = bind(public).calibration().release_std(K)
    assert rms(released - truth["sas"]) > 0.5 * std  # the billboard itself is noisy
    for seed in sorted(candidates):
        recovered = released - central_noise(public, seed, K)["sas"]
        assert rms(recovered - truth["sas"]) > 0.5 * std, (
            f"seed {seed}, read from public data, denoises the JDP billboard"
        )


def test_ldp_billboard_cannot_be_denoised_from_public_data(server: LiveServer) -> None:
    """Every harvested seed, tried as the users' seed, leaves the LDP noise in place.

    The users are `privrl users` as a person starts them: no --seed, so each draws its own.
    """
    config = spec("ldp", episodes=K, epsilon=1.0, mechanism="laplace", seed=None)
    run_id = create_at(server.url, config)
    mdp = world(config)
    swarm = asyncio.run(
        run_users(server.url, run_id, None, 1, None, mdp, progress=False, keep_outcomes=True)
    )
    assert swarm.reported == K
    counts = [tabular_counts(out.trajectory, mdp.S, mdp.A) for out in swarm.outcomes]
    truth = {name: sum(c[name] for c in counts)[0] for name in counts[0]}
    view, candidates = public_view(server.url, run_id)
    public = RunConfig.model_validate(view["info"]["config"])
    board = view["/billboard"]
    released = np.asarray(board["arrays"]["sas"]).reshape(board["shapes"]["sas"])
    std = bind(public).calibration().release_std(K)
    log = view["/policies"]
    for seed in sorted(candidates):
        served = PolicyLog.model_validate(log).reported_versions()
        recovered = released - local_noise(public, seed, log["versions"], served)["sas"]
        assert rms(recovered - truth["sas"]) > 0.5 * std, (
            f"seed {seed}, read from public data, denoises the LDP billboard"
        )


def test_the_attack_works_when_the_seed_is_known(server: LiveServer) -> None:
    """The attack itself is sound: with the true seeds it recovers the counts exactly."""
    client_seed, server_seed = secrets.randbits(64), secrets.randbits(64)
    config = spec("jdp", episodes=K, epsilon=1.0, seed=server_seed)
    run_id = create_at(server.url, config)
    truth = play_honestly(server.url, run_id, config, client_seed=client_seed)
    view, _ = public_view(server.url, run_id)
    public = RunConfig.model_validate(view["info"]["config"])
    board = view["/billboard"]
    released = np.asarray(board["arrays"]["sas"]).reshape(board["shapes"]["sas"])
    recovered = released - central_noise(public, server_seed, K)["sas"]
    assert np.abs(recovered - truth["sas"]).max() < 1e-6
    assert str(server_seed) not in json.dumps(view)



def test_no_response_log_line_or_metric_contains_a_seed(server: LiveServer) -> None:
    """Grep every answer of a run's life, /metrics, the docs and the server log for the seeds."""
    admin_seed = secrets.randbits(128)
    answers: list[str] = []
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ids = []
        for privacy, seed in (("jdp", admin_seed), ("ldp", None)):
            config = spec(privacy, episodes=6, seed=seed)
            resp = http.post("/v1/runs", json=config, headers=AUTH)
            assert resp.status_code == 201, resp.text
            answers.append(resp.text)
            ids.append(resp.json()["id"])
            mdp = world(config)
            for _ in range(config["episodes"]):
                resp = http.post(f"/v1/runs/{ids[-1]}/claims")
                answers.append(resp.text)
                body = user_report(resp.json(), config, mdp)
                answers.append(http.post(f"/v1/runs/{ids[-1]}/reports", json=body).text)
        for run_id in ids:
            answers += [http.get(f"/v1/runs/{run_id}{route}").text for route in PUBLIC_ROUTES]
        for path in ("/v1/runs", "/metrics", "/openapi.json", "/docs", "/redoc", "/healthz",
                     "/readyz"):
            answers.append(http.get(path).text)
    with sqlite3.connect(server.db) as db:
        stored = dict(db.execute("SELECT id, seed FROM runs").fetchall())
    seeds = [int(stored[run_id]) for run_id in ids]
    assert seeds[0] == admin_seed and seeds[1] != admin_seed  # the second one: from the CSPRNG
    haystack = "\n".join([*answers, server.log()])
    assert "Traceback" not in haystack and "created" in server.log()  # the log is read
    for seed in seeds:
        for text in (str(seed), hex(seed)[2:], str(seed % 2**64)):
            assert text not in haystack, "a seed leaked into a response, a metric or a log line"
