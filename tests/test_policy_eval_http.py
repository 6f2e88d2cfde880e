"""A policy-evaluation round between real processes: users post first-visit returns, the server
validates and clips them, accumulates (n, g) privately and publishes only theta_hat: the same
seeds give the same numbers as the same code run in process (whatever the order of the
reports)."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.users import UserError, run_users
from privrl.lab.policy_eval import round_config, round_in_process
from privrl.protocol import NOT_VISITED
from privrl.wire import pack_floats
from privrl.worlds.chain import ChainMRP
from privrl.worlds.tabular import riverswim
from support.client import TOKEN, create_run, run_cli, start_server

pytestmark = pytest.mark.slow  # every test here starts real server processes and the CLI

CHAIN = ChainMRP()
# long seeds: a short one (1234) could equal a counter's value in /metrics by chance
SERVER_SEED, USERS_SEED = 73_914_265_107, 58_302_617_449
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("policy-eval"))
    yield proc
    proc.stop()


def swarm(server, run_id: str, users: int | None, concurrency: int = 6, world=CHAIN):
    return asyncio.run(run_users(server.url, run_id, users, concurrency, USERS_SEED, world,
                                 progress=False))


@pytest.mark.parametrize(("estimator", "features"), [("dp-lsw", "agg2"), ("dp-lsl", "tabular"),
                                                     ("lsw", "tabular")])
def test_concurrent_users_give_the_in_process_estimate_exactly(server, estimator, features):
    config = round_config(CHAIN, estimator, features, 80, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    first = swarm(server, run_id, 50)
    assert first.reported == 50 and first.refused == 0
    with ServerAPI(server.url) as api:
        assert api.billboard(run_id).arrays == {}  # nothing before the m-th report
        assert api.ledger(run_id).charges == []
    rest = swarm(server, run_id, None)
    assert rest.reported == 30
    with ServerAPI(server.url) as api:
        info, board, ledger = api.get_run(run_id), api.billboard(run_id), api.ledger(run_id)
        again = api.billboard(run_id)
    assert info.status.finished and info.status.reported == 80
    assert set(board.arrays) == {"theta", "value"}
    assert again.arrays == board.arrays  # cached: reading never re-draws
    expected = round_in_process(config, CHAIN, SERVER_SEED, USERS_SEED)
    np.testing.assert_array_equal(np.asarray(board.arrays["theta"]), expected)
    if estimator.startswith("dp-"):
        assert (ledger.epsilon, ledger.delta) == (0.1, 0.1)
        assert [c["mechanism"] for c in ledger.charges] == ["smoothed-gaussian:theta"]
    else:
        assert ledger.charges == [] and ledger.epsilon == 0.0


def claim(http: httpx.Client, run_id: str) -> dict:
    resp = http.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize(("visits", "status", "message"), [
    ([[40, 0.5]], 422, "outside [0, S) = [0, 40)"),
    ([[3, 0.5], [5, 0.2], [3, 0.1]], 422, "visits[2] repeats a state"),
    ([[3, -0.5]], 422, "greater than or equal to 0"),
    ([[3, "NaN"]], 422, "valid number, got a string"),  # strict: no string is a number
    ([[3, 1e300]], 422, "outside [0, R_max / (1 - gamma)]"),
    ([[3]], 422, ""),
])
def test_bad_reports_get_a_clear_4xx_and_change_nothing(server, visits, status, message):
    config = round_config(CHAIN, "dp-lsw", "tabular", 3, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ticket = claim(http, run_id)
        body = {"kind": "returns", "ticket": ticket["ticket"], "visits": visits}
        resp = http.post(f"/v1/runs/{run_id}/reports", content=json.dumps(body),
                         headers={"Content-Type": "application/json"})
        assert resp.status_code == status, resp.text
        assert message in resp.text
        status_after = http.get(f"/v1/runs/{run_id}").json()["status"]
        assert status_after["reported"] == 0
        wrong_kind = {"kind": "trajectory", "ticket": ticket["ticket"], "states": [0, 0],
                      "actions": [0], "rewards": [0.0]}
        resp = http.post(f"/v1/runs/{run_id}/reports", json=wrong_kind)
        assert resp.status_code == 422 and "accepts only kind='returns'" in resp.text
        good = {"kind": "returns", "ticket": ticket["ticket"], "visits": [[38, 0.98], [39, 1.0]]}
        first = http.post(f"/v1/runs/{run_id}/reports", json=good)
        assert first.status_code == 200 and first.json()["reported"] == 1
        retry = http.post(f"/v1/runs/{run_id}/reports", json=good)
        assert retry.status_code == 200 and retry.json()["duplicate"] is True
        other = {**good, "visits": [[39, 1.0]]}
        assert http.post(f"/v1/runs/{run_id}/reports", json=other).status_code == 409
        assert http.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 1


def test_a_return_above_f_max_is_clipped_not_refused(server) -> None:
    """F_max = 0.5 < a legitimate return of 0.98: the server clips it to 0.5 (Balle et al. 2016)."""
    config = round_config(CHAIN, "lsw", "tabular", 1, 0.1, 0.1, 0.5)
    run_id = create_run(server, config, seed=SERVER_SEED)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ticket = claim(http, run_id)
        body = {"kind": "returns", "ticket": ticket["ticket"], "visits": [[38, 0.98], [39, 1.0]]}
        assert http.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
        theta = http.get(f"/v1/runs/{run_id}/billboard").json()["arrays"]["theta"]
    assert theta[38] == 0.5 and theta[39] == 0.5 and theta[0] == 0.0


def test_the_release_survives_a_restart_bit_for_bit(tmp_path: Path) -> None:
    config = round_config(CHAIN, "dp-lsl", "agg2", 40, 0.5, 0.1, 1.0)
    server = start_server(tmp_path / "srv")
    try:
        run_id = create_run(server, config, seed=SERVER_SEED)
        swarm(server, run_id, None, concurrency=4)
        with ServerAPI(server.url) as api:
            before = api.billboard(run_id).arrays, api.ledger(run_id).model_dump()
    finally:
        server.stop()
    server = start_server(tmp_path / "srv")
    try:
        with ServerAPI(server.url) as api:
            after = api.billboard(run_id).arrays, api.ledger(run_id).model_dump()
    finally:
        server.stop()
    assert after == before


def test_no_response_carries_a_seed_or_the_private_statistics(server) -> None:
    config = round_config(CHAIN, "dp-lsw", "tabular", 20, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    swarm(server, run_id, None)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        texts = [http.get(f"/v1/runs/{run_id}{p}").text
                 for p in ("", "/billboard", "/ledger", "/policy", "/policies")]
        texts.append(http.get("/metrics").text)
    joined = "\n".join(texts)
    for secret in (SERVER_SEED, USERS_SEED):  # as a whole number (a float's digits may hold it)
        assert not re.search(rf"(?<![\d.]){secret}(?![\d])", joined), secret
    board = json.loads(texts[1])
    assert set(board["arrays"]) == {"theta", "value"}
    for word in ('"visits"', '"returns"', '"sigma"', '"psi"', '"counts"'):
        assert word not in texts[1] and word not in texts[2]


def test_users_refuse_a_world_the_run_cannot_be_played_in(server) -> None:
    config = round_config(CHAIN, "dp-lsw", "tabular", 5, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    with pytest.raises(UserError, match="policy-evaluation world"):
        swarm(server, run_id, 1, world=riverswim(20, n_states=40))
    with pytest.raises(UserError, match="has 30 states but the run is for 40"):
        swarm(server, run_id, 1, world=ChainMRP(n_states=30))


def test_policy_eval_round_command_starts_a_server_and_matches_in_process(tmp_path: Path):
    out = tmp_path / "round.json"
    done = run_cli("policy-eval-round", "--estimator", "dp-lsw", "--features", "agg2",
                   "--trajectories", "60", "--concurrency", "4", "--seed", "9", "--quiet",
                   "--json-out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    assert record["http"]["reported"] == 60 and record["in_process"]["identical"] is True
    assert record["in_process"]["max_abs_difference"] == 0.0
    assert math.isclose(record["rmse"], record["in_process"]["rmse"])
    assert record["ledger"]["epsilon"] == 0.1 and record["ledger"]["delta"] == 0.1
    assert "identical" in done.stdout and "episodes/s" in done.stdout


def test_users_cli_plays_the_chain_world(server) -> None:
    config = round_config(CHAIN, "dp-lsw", "tabular", 12, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--env", "chain",
                   "--concurrency", "3", "--seed", str(USERS_SEED), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "12 episodes reported" in done.stdout
    with ServerAPI(server.url) as api:
        theta = api.billboard(run_id).arrays["theta"]
    np.testing.assert_array_equal(theta, round_in_process(config, CHAIN, SERVER_SEED,
                                                          USERS_SEED))


def dense(values: dict[int, float], n_states: int = 40) -> str:
    """A dense `returns` field: the given states' returns, NOT_VISITED elsewhere."""
    out = np.full(n_states, NOT_VISITED)
    for s, f in values.items():
        out[s] = f
    return pack_floats(out)


@pytest.mark.parametrize(("fields", "message"), [
    ({"returns": dense({3: 0.5}, 39)}, "returns must hold S = 40 packed float64s"),
    ({"returns": dense({3: -0.5})}, "returns[3] is neither a return >= 0 nor -1"),
    ({"returns": dense({3: 0.5}), "visits": [[3, 0.5]]}, "give exactly one of visits"),
    ({}, "give exactly one of visits"),
])
def test_bad_dense_reports_get_a_clear_4xx(server, fields: dict, message: str) -> None:
    config = round_config(CHAIN, "dp-lsw", "tabular", 3, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ticket = claim(http, run_id)
        body = {"kind": "returns", "ticket": ticket["ticket"], **fields}
        resp = http.post(f"/v1/runs/{run_id}/reports", json=body)
        assert resp.status_code == 422 and message in resp.json()["detail"], resp.text
        assert http.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 0


def test_a_dense_report_is_the_same_report_as_its_sparse_form(server) -> None:
    config = round_config(CHAIN, "dp-lsw", "tabular", 3, 0.1, 0.1, 1.0)
    run_id = create_run(server, config, seed=SERVER_SEED)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ticket = claim(http, run_id)["ticket"]
        packed = {"kind": "returns", "ticket": ticket, "returns": dense({38: 0.98, 39: 1.0})}
        first = http.post(f"/v1/runs/{run_id}/reports", json=packed)
        assert first.status_code == 200 and first.json()["reported"] == 1, first.text
        sparse = {"kind": "returns", "ticket": ticket, "visits": [[38, 0.98], [39, 1.0]]}
        again = http.post(f"/v1/runs/{run_id}/reports", json=sparse)  # a retry: same digest
        assert again.status_code == 200 and again.json()["reported"] == 1, again.text  # not 409
