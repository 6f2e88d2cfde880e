"""UCRL-VTR+ over HTTP: a short sequential run with a real server and a real `privrl users`
process serves the in-process messages (weights included) and ends with the same billboard,
regret and ledger (JDP, LDP)."""

from __future__ import annotations

import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.evaluator import evaluate
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.client import create_run, reference_run, run_cli, start_server

pytestmark = pytest.mark.slow  # a server subprocess and a users subprocess

SEED = 7
K = 30
HARD = make("lm-hard")


def config_of(privacy: str) -> RunConfig:
    """A short UCRL-VTR+ run on LM-Hard (practical preset, Gaussian)."""
    return RunConfig(algo="ucrl-vtr-plus", n_states=HARD.S, n_actions=HARD.A, horizon=HARD.H,
                     model=model_spec_of(HARD), episodes=K, privacy=privacy, epsilon=50.0,
                     delta=1e-5, mechanism="gaussian")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("vtr-plus-http"), sequential=True)
    yield proc
    proc.stop()


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_sequential_http_run_matches_in_process(server, privacy: str) -> None:
    config = config_of(privacy)
    run_id = create_run(server, config, seed=SEED)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--users", str(K),
                   "--concurrency", "1", "--seed", str(SEED), "--env", "lm-hard", "--quiet")
    assert done.returncode == 0, done.stderr
    ref = reference_run(config, SEED, SEED, HARD)
    ref_run, messages = ref.run, ref.messages
    in_process = run_in_process(config, HARD, [SEED])
    ev = evaluate(server.url, run_id, HARD)
    with ServerAPI(server.url) as api:
        board, ledger, log = api.billboard(run_id), api.ledger(run_id), api.policies(run_id)
    for k in range(K):
        version = log.version_of(k)
        np.testing.assert_array_equal(np.asarray(log.versions[version]), messages[k]["actions"])
        for name in ("values", "weights"):
            np.testing.assert_array_equal(log.arrays[version][name].to_array(),
                                          messages[k][name])
    np.testing.assert_allclose(ev.regret, in_process.regret[0], rtol=0, atol=1e-12)
    d = HARD.model.d
    assert board.shapes == {"wgram": [HARD.H, d, d], "wtarget": [HARD.H, d],
                            "gram2": [HARD.H, d, d], "target2": [HARD.H, d]}
    for name, arr in ref_run.billboard().items():
        np.testing.assert_array_equal(np.asarray(board.arrays[name]), arr[0].ravel())
    assert board.radius == ref_run.radius()
    spent = in_process.ledger.totals(config.delta).epsilon
    assert ledger.epsilon == pytest.approx(spent, rel=1e-12)
    assert spent == pytest.approx(config.epsilon, rel=1e-6)
