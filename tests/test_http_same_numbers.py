"""Same numbers over HTTP: a sequential run through a real server and a real `privrl users`
process reproduces the in-process runner exactly (policies, regret, billboard, ledger)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.evaluator import evaluate
from privrl.run import run_in_process
from support.client import MDP, config_for, create_run, reference_run, run_cli, start_server

pytestmark = pytest.mark.slow  # every test here starts a real server and users' processes

SEED = 7
CASES = [("jdp", "gaussian"), ("jdp", "laplace"), ("ldp", "gaussian"), ("ldp", "laplace"),
         ("none", "laplace")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("same-numbers"), sequential=True)
    yield proc
    proc.stop()


@pytest.mark.parametrize(("privacy", "mechanism"), CASES)
def test_sequential_http_run_matches_in_process(server, privacy: str, mechanism: str) -> None:
    config = config_for(privacy, mechanism, episodes=60)
    run_id = create_run(server, config, seed=SEED)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--users", "60",
                   "--concurrency", "1", "--seed", str(SEED), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "60 episodes reported" in done.stdout

    in_process = run_in_process(config, MDP, [SEED])
    reference = reference_run(config, SEED, SEED)
    ev = evaluate(server.url, run_id, MDP)
    with ServerAPI(server.url) as api:
        info, board, ledger = api.get_run(run_id), api.billboard(run_id), api.ledger(run_id)

    assert info.status.reported == 60 and info.status.finished
    # the public policy log serves, episode by episode, exactly the in-process policies
    assert ev.regret.shape == (60,)
    for k in range(60):
        np.testing.assert_array_equal(ev.policies[int(ev.versions[k])], reference.policies[k])
    np.testing.assert_allclose(ev.regret, in_process.regret[0], rtol=0, atol=1e-12)
    # the billboard is the in-process billboard, entry by entry
    expected = reference.run.billboard()
    assert set(board.arrays) == set(expected)
    for name, arr in expected.items():
        assert board.shapes[name] == list(arr.shape[1:])
        np.testing.assert_allclose(np.asarray(board.arrays[name]), arr[0].ravel(), rtol=0,
                                   atol=1e-12)
    assert board.radius == pytest.approx(reference.run.radius(), rel=1e-12, abs=1e-12)
    # the ledger charges what the in-process run charged
    totals = in_process.ledger.totals(config.delta if config.delta > 0 else 1e-5)
    spent = ledger.epsilon
    if privacy == "none":
        return
    assert not isinstance(spent, str) and not math.isinf(totals.epsilon)
    assert spent == pytest.approx(totals.epsilon, rel=1e-9)
    assert spent <= config.epsilon * (1 + 1e-9)
