"""UCRL-VTR+ over HTTP: a short sequential run with a real server and a real `privrl users`
process serves the in-process messages (weights included) and ends with the same billboard,
regret and ledger (JDP, LDP)."""

from __future__ import annotations

import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.evaluator import evaluate
from privrl.config import RunConfig
from privrl.run import Run, run_in_process, user_episode
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.client import create_run, run_cli, start_server

pytestmark = pytest.mark.slow  # a server subprocess and a users subprocess

SEED = 7
K = 30
HARD = make("lm-hard")


def config_of(privacy: str) -> RunConfig:
    """A short UCRL-VTR+ run on LM-Hard (practical preset, Gaussian)."""
    return RunConfig(algo="ucrl-vtr-plus", n_states=HARD.S, n_actions=HARD.A, horizon=HARD.H,
                     model=model_spec_of(HARD), episodes=K, privacy=privacy, epsilon=50.0,
                     delta=1e-5, mechanism="gaussian")


def reference(config: RunConfig, seed: int) -> tuple[Run, list[dict[str, np.ndarray]]]:
    """The in-process protocol, one fresh user per episode at its own nonce."""
    run = Run(config, [seed])
    messages = []
    for k in range(config.episodes):
        message = run.message()
        messages.append({n: a[0].copy() for n, a in message.items()})
        traj, noisy = user_episode(HARD, message, [seed], k, run.algorithm, run.calibration,
                                   nonces=[k])
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)
    return run, messages


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
    ref_run, messages = reference(config, SEED)
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
