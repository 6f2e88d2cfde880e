"""LSVI-UCB (batched and switching) over HTTP: a real server and a real `privrl users` process
reproduce the in-process run number for number; no GET route returns the stored history; LDP
is refused at creation (HTTP 422, CLI exit 2) naming raw history; bad reports change nothing;
SIGKILL and restart republish exactly the released weights."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.evaluator import evaluate
from privrl.config import RunConfig
from privrl.protocol import RunRequest
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.client import (
    assert_no_get_returns,
    create_run,
    reference_run,
    run_cli,
    start_server,
)
from support.server import (
    AUTH,
    assert_refused_unchanged,
    claim,
    create,
    sigkill_round_trip,
    state,
    user_report,
)

SEED = 7
K = 40
CUBE = make("lin-cube")
ALGOS = ["lsvi-ucb-batched", "lsvi-ucb-switching"]
# public knobs that make both release new weights within a few episodes
# (random tie-breaking too: the ties drawn from the server's seed replay over HTTP)
KNOBS = {"lsvi-ucb-batched": {"batches": 8},
         "lsvi-ucb-switching": {"beta": 2.0, "tie_break": "random"}}


def lsvi_config(algo: str, privacy: str = "jdp", episodes: int = K, **kw: Any) -> RunConfig:
    """A small run on LIN-Cube (practical preset, Gaussian, a weak budget)."""
    base = dict(algo=algo, n_states=CUBE.S, n_actions=CUBE.A, horizon=CUBE.H,
                model=model_spec_of(CUBE), episodes=episodes, privacy=privacy, epsilon=1e5,
                delta=1e-5 if privacy != "none" else 0.0, mechanism="gaussian",
                knobs=KNOBS[algo])
    return RunConfig(**{**base, **kw})


def request_body(config: RunConfig, seed: int = 3) -> dict[str, Any]:
    """The POST /v1/runs body of a config with the server's seed."""
    return RunRequest(**config.model_dump(), seed=seed).model_dump(mode="json", exclude_none=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("lsvi-http"), sequential=True)
    yield proc
    proc.stop()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
def test_sequential_http_run_matches_in_process_and_hides_the_history(server, algo: str
                                                                      ) -> None:
    config = lsvi_config(algo)
    run_id = create_run(server, config, seed=SEED)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--users", str(K),
                   "--concurrency", "1", "--seed", str(SEED), "--env", "lin-cube", "--quiet")
    assert done.returncode == 0, done.stderr
    ref = reference_run(config, SEED, SEED, CUBE)
    assert int(ref.run.privatizer.rounds[0]) >= 2  # weights were released, more than once
    in_process = run_in_process(config, CUBE, [SEED])
    ev = evaluate(server.url, run_id, CUBE)
    np.testing.assert_allclose(ev.regret, in_process.regret[0], rtol=0, atol=1e-12)
    with ServerAPI(server.url) as api:
        board, ledger, log = api.billboard(run_id), api.ledger(run_id), api.policies(run_id)
    for k in range(K):  # the public log serves exactly the in-process tables
        np.testing.assert_array_equal(np.asarray(log.versions[log.version_of(k)]),
                                      ref.policies[k])
    d = CUBE.d
    assert board.shapes == {"gram": [CUBE.H, d, d], "w": [CUBE.H, d]}
    for name, arr in ref.run.billboard().items():
        np.testing.assert_array_equal(np.asarray(board.arrays[name]), arr[0].ravel())
    assert board.radius == ref.run.radius()
    spent = in_process.ledger.totals(config.delta).epsilon
    assert ledger.epsilon == pytest.approx(spent, rel=1e-12) and 0 < spent <= config.epsilon

    # no GET route returns the trusted store: trajectories, per-user features and next states,
    # the history sums LSVI re-reads, or the exact Gram sum
    sequences = [t.states[0].tolist() for t in ref.trajectories]
    sequences += [t.actions[0].tolist() for t in ref.trajectories]
    sequences += [t.rewards[0].tolist() for t in ref.trajectories]
    algorithm = ref.run.algorithm
    users = [algorithm.user_statistics(t, {}) for t in ref.trajectories]
    history = ref.run.privatizer.history
    phis = np.stack([u["phi"][0] for u in users])
    arrays = [u["phi"][0] for u in users] + [u["next_state"][0] for u in users]
    arrays += [history.phi_reward[0], history.phi_next[0],
               np.einsum("khi,khj->hij", phis, phis)]
    arrays += [history.phi_reward[0, h] for h in range(CUBE.H)]
    assert assert_no_get_returns(server, run_id, sequences, arrays) >= 6


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
def test_ldp_is_refused_at_creation(apps, algo: str) -> None:
    client = apps()
    body = request_body(lsvi_config(algo))
    resp = client.post("/v1/runs", json={**body, "privacy": "ldp"}, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert "raw history required" in resp.json()["detail"]
    done = run_cli("run", "--algo", algo, "--env", "lin-cube", "--privacy", "ldp",
                   "--episodes", "5", "--quiet")
    assert done.returncode == 2
    assert "raw history required" in done.stderr and "Traceback" not in done.stderr


def test_bad_reports_are_refused_and_change_nothing(apps) -> None:
    client = apps()
    config = lsvi_config("lsvi-ucb-switching", episodes=6)
    body = request_body(config)
    run_id = create(client, body)
    ticket = claim(client, run_id)
    good = user_report(ticket, body, CUBE)
    H = CUBE.H
    cases = [
        ("another action", dict(good, actions=[(a + 1) % CUBE.A for a in good["actions"]]),
         "not the action"),
        ("state outside", dict(good, states=[0] * H + [CUBE.S]), "outside [0, S)"),
        ("short", dict(good, rewards=good["rewards"][:-1]), "must have H"),
        ("reward above 1", dict(good, rewards=[1.5] + good["rewards"][1:]),
         "not a number in [0, 1]"),
        ("negative reward", dict(good, rewards=[-0.1] + good["rewards"][1:]),
         "not a number in [0, 1]"),
        ("noisy arrays", {"kind": "noisy", "ticket": good["ticket"], "arrays": {}},
         "accepts only kind='trajectory'"),
    ]
    assert_refused_unchanged(client, run_id, cases)
    url = f"/v1/runs/{run_id}/reports"
    before = state(client, run_id)
    text = json.dumps(good).replace(json.dumps(good["rewards"][0]), "NaN", 1)
    resp = client.post(url, content=text, headers={"Content-Type": "application/json"})
    assert resp.status_code == 422 and state(client, run_id) == before
    assert client.post(url, json=good).status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
def test_sigkill_and_restart_republish_the_released_weights(tmp_path: Path, algo: str) -> None:
    config = lsvi_config(algo, episodes=24)
    trip = sigkill_round_trip(tmp_path, request_body(config, seed=21), CUBE, 17, 7)
    assert np.any(np.asarray(trip.before["billboard"]["arrays"]["w"]) != 0)
    assert trip.restarted == trip.before  # the same weights, Grams, policies and ledger
    final = trip.final
    assert final["status"]["finished"] and final["status"]["reported"] == 24
    assert "rebuilt: 17 reports replayed" in trip.log
    assert 0 < final["ledger"]["epsilon"] <= config.epsilon and math.isfinite(
        final["ledger"]["epsilon"])
