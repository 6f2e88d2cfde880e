"""The local-DP extension of policy evaluation (not in the paper): users noise their visit
indicators and scaled returns; the estimate is post-processing of the noisy sums; nothing raw
reaches the server."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from pathlib import Path

import httpx
import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.client.api import ServerAPI
from privrl.client.users import run_users
from privrl.lab.policy_eval import round_config, round_in_process
from privrl.privacy.accountant import epsilon_to_rho
from privrl.privacy.grid import FEATURE_GRID, rounding_slack
from privrl.privacy.privatizers import randomize_locally
from privrl.run import Run
from privrl.seeding import generator, user_generator
from privrl.wire import unpack_floats
from privrl.worlds.chain import ChainMRP
from privrl.worlds.first_visit import FirstVisits
from support.client import create_run, start_server
from support.policy_eval import pe_config, random_data, sums

CHAIN = ChainMRP()


@pytest.mark.parametrize("estimator", ["lsw", "lsl"])
def test_ldp_without_noise_is_the_non_private_estimate(estimator: str) -> None:
    ldp = round_config(CHAIN, f"dp-{estimator}", "agg2", 200, math.inf, 0.1, 1.0)
    ldp = ldp.model_copy(update={"privacy": "ldp"})
    plain = round_config(CHAIN, estimator, "agg2", 200, 0.1, 0.1, 1.0)
    a = round_in_process(ldp, CHAIN, 1, 2)
    b = round_in_process(plain, CHAIN, 1, 2)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def ldp_run(algo: str, replicas: int, m: int, n_states: int, epsilon: float = 0.5,
            delta: float = 1e-5, noise: str = "numpy", **knobs) -> Run:
    return Run(pe_config(algo, "ldp", m, n_states, epsilon=epsilon, delta=delta, noise=noise,
                         **knobs), list(range(replicas)))


def test_the_local_randomizer_is_calibrated_and_charged_once() -> None:
    """sigma_L^2 = (l2 of both families)^2 / (2 rho) = 2N / (2 rho), rho = rho(eps, delta) with
    the tight zCDP conversion (plus, under integer noise, the returns' rounding slack to the
    2^-16 grid), or with the exact Gaussian profile under float noise; never above the
    classical Gaussian (eps < 1)."""
    run = ldp_run("dp-lsw", 1, 10, 40)
    cal = run.calibration
    rho = epsilon_to_rho(0.5, 1e-5)
    slack = rounding_slack((40,), FEATURE_GRID, False)[1]
    assert cal.noise_scale == pytest.approx(math.sqrt((40 + (math.sqrt(40) + slack) ** 2)
                                                      / (2 * rho)), rel=1e-9)
    plain = ldp_run("dp-lsw", 1, 10, 40, noise="float").calibration  # the exact profile
    exact = epsilon_to_rho(0.5, 1e-5, continuous=True)
    assert exact > rho  # the exact Gaussian profile is tighter than the zCDP conversion
    assert plain.noise_scale == pytest.approx(math.sqrt(80 / (2 * exact)), rel=1e-9)
    classical = math.sqrt(80) * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert cal.noise_scale <= classical
    assert {f.name: (f.shape, f.l2) for f in cal.families} == {
        "visits": ((40,), math.sqrt(40)), "returns": ((40,), math.sqrt(40) + slack)}
    data = random_data(generator(1), 10, 40, 1.0)
    stats = run.algorithm.user_statistics(data, run.message())
    assert set(stats) == {"visits", "returns"} and stats["returns"].max() <= 1.0
    for i in range(10):
        rng = [user_generator(7, i)]
        noisy = randomize_locally({k: v[i : i + 1] for k, v in stats.items()}, cal, rng)
        run.ingest_noisy(noisy)
    assert [c.mechanism for c in run.ledger.entries] == ["local:visits", "local:returns"]
    assert run.ledger.totals(1e-5).epsilon == pytest.approx(0.5, rel=1e-6)
    board = run.billboard()
    assert set(board) == {"visits", "returns", "theta", "value"}


def test_noisy_sums_are_unbiased_with_the_declared_variance() -> None:
    """10^4 replicas of one fixed data set (returns in [0, F_max = 2]): the released sums minus
    the exact ones have mean 0 and variance m sigma_L^2 (times F_max^2 for g)."""
    replicas, m, n_states = 10_000, 6, 3
    # the test draws its own float noise: a run on the float backend takes off-grid reports
    run = ldp_run("dp-lsl", replicas, m, n_states, noise="float", f_max=2.0, gamma=0.5, lam=5.0)
    data = random_data(generator(2), m, n_states, 2.0)
    message = run.message()
    sigma = run.calibration.noise_scale
    for i in range(m):
        row = FirstVisits(np.repeat(data.visited[i : i + 1], replicas, axis=0),
                          np.repeat(data.returns[i : i + 1], replicas, axis=0))
        stats = run.algorithm.user_statistics(row, message)
        rngs = generator(3, "ldp-law", i)
        run.ingest_noisy({k: v + rngs.standard_normal(v.shape) * sigma for k, v in stats.items()})
    n, g = sums(data)
    board = run.billboard()
    for name, exact, scale in (("visits", n, 1.0), ("returns", g / 2.0, 1.0)):
        err = board[name] - exact
        sd = sigma * math.sqrt(m) * scale
        assert (np.abs(err.mean(axis=0)) < 5 * sd / math.sqrt(replicas)).all()
        assert (np.abs(err.var(axis=0) / sd**2 - 1) < 5 * math.sqrt(2 / replicas)).all()
    theta = run.algorithm.ldp_estimate(board["visits"], board["returns"] * 2.0)
    np.testing.assert_array_equal(board["theta"], theta)


@pytest.mark.slow
def test_ldp_round_over_http_sends_nothing_raw_and_matches_in_process(tmp_path: Path) -> None:
    tmp = tmp_path / "srv"
    server = start_server(tmp)
    config = round_config(CHAIN, "dp-lsl", "tabular", 30, 2.0, 1e-5, 1.0)
    config = config.model_copy(update={"privacy": "ldp"})
    requests: list[bytes] = []

    async def keep(request: httpx.Request) -> None:
        requests.append(request.content)

    try:
        run_id = create_run(server, config, seed=3)
        result = asyncio.run(run_users(server.url, run_id, None, 1, 4, CHAIN, progress=False,
                                       event_hooks={"request": [keep]}))
        assert result.reported == 30
        with ServerAPI(server.url) as api:
            board, ledger = api.billboard(run_id), api.ledger(run_id)
    finally:
        server.stop()
    expected = round_in_process(config, CHAIN, 3, 4)
    np.testing.assert_array_equal(np.asarray(board.arrays["theta"]), expected)
    assert ledger.epsilon == pytest.approx(2.0, rel=1e-6)
    raw = CHAIN.first_visits([user_generator(4, k) for k in range(30)])
    reports = [json.loads(b) for b in requests if b and b"noisy" in b]
    assert len(reports) == 30 and len({len(b) for b in requests if b"noisy" in b}) == 1
    inner = raw.returns[:, :-1]  # the goal's return is always 1: not a secret
    texts = [repr(float(f)) for f in inner[inner > 0]]
    forbidden = [t for t in texts if len(t) >= 10]  # short ones (0.99 = gamma) are everywhere
    assert len(forbidden) > 100
    for report in reports:
        assert set(report) == {"kind", "ticket", "arrays"}
        sizes = {k: unpack_floats(v).size for k, v in report["arrays"].items()}  # packed float64
        assert sizes == {"visits": 40, "returns": 40}
        for values in report["arrays"].values():  # noised integers on the grid, not 0/1 data
            assert not np.isin(unpack_floats(values), (0.0, 1.0)).all()
    sent = b"".join(requests).decode()
    stored = "".join(str(cell) for cell in _db_cells(tmp / "privrl.db"))
    log = (tmp / "server.log").read_text(errors="replace")
    for text in forbidden:
        assert text not in sent and text not in stored and text not in log


def _db_cells(path: Path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            for row in con.execute(f'SELECT * FROM "{table}"'):
                yield from row
    finally:
        con.close()


@pytest.mark.slow
def test_the_sweeps_local_dp_simulation_matches_per_user_randomizers_in_law() -> None:
    """The sweep adds the m users' summed noise N(0, m sigma_L^2) to the sufficient statistics;
    per-user randomizers through the Run give the same RMSE distribution (5 standard errors)."""
    from privrl.lab import policy_eval as pe

    m, runs = 100, 150
    spec = pe.SweepSpec(estimators=("ldp-lsl", "ldp-lsw"), features=("tabular",),
                        trajectories=(m,), runs=runs, epsilon=2.0, delta=1e-5, lambda_at=())
    summary = pe.sweep(spec, workers=2, progress=False)
    values = CHAIN.values()
    for est in ("ldp-lsl", "ldp-lsw"):
        (row,) = [r for r in summary["rows"] if r["estimator"] == est]
        fast = np.array(row["rmse"]["values"])
        config = spec.config(est, "tabular", m)
        phi = bind(config).phi
        slow = np.array([pe.rmse(values, phi, round_in_process(config, CHAIN, r, 10_000 + r))
                         for r in range(60)])
        se = math.sqrt(fast.var() / fast.size + slow.var() / slow.size)
        assert abs(fast.mean() - slow.mean()) < 5 * se


def test_ldp_cells_of_the_sweep_are_charged_as_local_reports() -> None:
    from privrl.lab import policy_eval as pe

    spec = pe.SweepSpec(estimators=("lsw", "ldp-lsw", "dp-lsw"), features=("agg2",),
                        trajectories=(50,), runs=2, epsilon=math.inf, delta=1e-5, lambda_at=())
    summary = pe.sweep(spec, workers=1, progress=False)
    rows = {r["estimator"]: r["rmse"]["values"] for r in summary["rows"]}
    np.testing.assert_allclose(rows["ldp-lsw"], rows["lsw"], rtol=1e-12)
    charges = summary["ledger"]["per_batch"]["50"]["charges"]
    assert sorted(c["mechanism"] for c in charges) == ["local:returns", "local:visits",
                                                      "smoothed-gaussian:theta"]
