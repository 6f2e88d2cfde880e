"""The floating-point attack from outside, against a real server process (issue 27).

An outsider with public routes and the open library only (never the seed) reads clean counts off
the float noise's low-order bits: a JDP billboard after one report (`privrl audit server`) and
LDP reports as they cross the wire (`privrl audit proxy`). On the float backend the attack must
prove most entries, and every proven value must be the true clean value (the test knows it);
on the integer-noise default it must prove none.

"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.base import PolicyMessage
from privrl.audit.float_leaks import LeakReport, count_candidates, float_leaks
from privrl.audit.lower_bound import count_families
from privrl.protocol import PolicyPayload
from privrl.run import user_episode
from privrl.seeding import generator
from privrl.stats import Stats
from support.client import run_cli
from support.proxy import Proxy
from support.server import LiveServer, create_at, public, spec, world

pytestmark = pytest.mark.slow

FLOAT = "float"  # the float backend (simulation only)
INTEGER_DEFAULT = "numpy"  # the default backend: integer noise


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("floats")
    with LiveServer(base / "db.sqlite", base / "log") as live:
        yield live


def one_user(http: httpx.Client, run_id: str, config: dict[str, Any], client_seed: int
             ) -> tuple[Stats, dict[str, Any]]:
    """An honest user plays and reports once: its clean statistics (what the test knows) and
    the body it posted."""
    cfg, mdp = public(config), world(config)
    ticket = http.post(f"/v1/runs/{run_id}/claims").json()
    message: PolicyMessage = PolicyPayload.model_validate(ticket["policy"]).message()
    traj, noisy = user_episode(mdp, message, [client_seed], ticket["episode"],
                               bind(cfg), bind(cfg).calibration(), nonces=[ticket["episode"]])
    if noisy is None:
        body = {"kind": "trajectory", "ticket": ticket["ticket"],
                "states": traj.states[0].tolist(), "actions": traj.actions[0].tolist(),
                "rewards": traj.rewards[0].tolist()}
    else:
        body = {"kind": "noisy", "ticket": ticket["ticket"],
                "arrays": {n: a[0].ravel().tolist() for n, a in noisy.items()}}
    assert http.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    return bind(cfg).user_statistics(traj, message), body


def attack(config: dict[str, Any], released: dict[str, Any], clean: Stats
           ) -> tuple[LeakReport, int]:
    """The outsider's test on released arrays (one clean value + one draw per entry), and how
    many proven values differ from the truth."""
    cal, cfg = bind(public(config)).calibration(), public(config)
    total, wrong = LeakReport(), 0
    counts = count_families(cfg, generator(0, "test"))
    assert counts == ("sas",)  # RiverSwim's rewards 0.005 are no count: "r" is left out
    for fam in cal.families:
        if fam.name not in counts:
            continue
        values = np.asarray(released[fam.name], dtype=np.float64).ravel()
        found = float_leaks(values, fam.scale, cal.mechanism_name,
                            count_candidates(fam.clean_min, fam.clean_max, 1) or [], None)
        truth = np.asarray(clean[fam.name], dtype=np.float64).ravel()
        proven = ~np.isnan(found.clean)
        wrong += int((found.clean[proven] != truth[proven]).sum())
        total.add(found)
    assert cfg.noise in (FLOAT, INTEGER_DEFAULT)
    return total, wrong


def jdp_after_one_report(server: LiveServer, noise: str) -> tuple[str, LeakReport, int]:
    config = spec("jdp", episodes=8, seed=None, noise=noise)
    run_id = create_at(server.url, config)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        clean, _ = one_user(http, run_id, config, client_seed=21)
        board = http.get(f"/v1/runs/{run_id}/billboard").json()
    assert board["reported"] == 1
    return run_id, *attack(config, board["arrays"], clean)


def audit_cli(server: LiveServer, run_id: str) -> tuple[int, dict[str, Any], str]:
    done = run_cli("audit", "server", "--server", server.url, "--run", run_id, "--polls", "1",
                   "--guesses", "0", "--max-candidates", "0", "--seed", "1", "--json",
                   timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_jdp_billboard_after_one_report_is_proven_exact(server: LiveServer) -> None:
    run_id, found, wrong = jdp_after_one_report(server, FLOAT)
    assert found.proven > 0.5 * found.total and wrong == 0, found.to_dict()
    code, report, err = audit_cli(server, run_id)
    assert code == 1
    leak = [f for f in report["findings"] if f["check"] == "float-noise"]
    assert [f["run_id"] for f in leak] == [run_id], report["findings"]
    assert leak[0]["evidence"]["proven"] == found.proven
    assert leak[0]["evidence"]["total"] == found.total
    phases = [line for line in err.splitlines() if line.startswith("privrl audit server: ")]
    assert len(phases) >= 4 and any("float noise" in line for line in phases), err


def test_ldp_reports_as_the_server_receives_them_are_proven_exact(
        server: LiveServer, tmp_path: Path) -> None:
    """Five users report through `privrl audit proxy`; the proxy's count of proven entries is
    the outsider's, and the test checks each proven value against the user's clean counts."""
    config = spec("ldp", episodes=8, seed=None, noise=FLOAT)
    run_id = create_at(server.url, config)
    proxy = Proxy(server.url, tmp_path / "wire.jsonl")
    found, wrong = LeakReport(), 0
    try:
        with httpx.Client(base_url=proxy.url, timeout=30) as http:
            for user in range(5):
                clean, body = one_user(http, run_id, config, client_seed=100 + user)
                part, bad = attack(config, body["arrays"], clean)  # what crossed the wire
                found.add(part)
                wrong += bad
        live = proxy.report()
    finally:
        proxy.kill()
    assert found.proven > 0.5 * found.total and wrong == 0, found.to_dict()
    leak = [f for f in live["findings"] if f["check"] == "float-noise"]
    assert [f["run_id"] for f in leak] == [run_id], live["findings"]
    assert leak[0]["evidence"]["reports"] == 5
    assert leak[0]["evidence"]["proven"] == found.proven
    assert leak[0]["evidence"]["total"] == found.total


def test_nothing_is_proven_on_the_integer_noise_default(server: LiveServer) -> None:
    run_id, found, wrong = jdp_after_one_report(server, INTEGER_DEFAULT)
    assert found.proven == 0 and wrong == 0, found.to_dict()
    code, report, _ = audit_cli(server, run_id)
    assert not [f for f in report["findings"] if f["check"] == "float-noise"], report
