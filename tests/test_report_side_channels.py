"""Nothing public depends on what a user did, except the billboard and the policy log (issue 27).

Single users report one by one to a JDP RiverSwim run with different trajectories: rewards 0.005
(state 0, left) or 0.0 everywhere, states of one and of two digits. After each report every
public series (/metrics samples, the run's info, its policy log; timings, the ledger and the
policy version left out) must move by the same amount, and every report body sent by the real
client's encoder must have the same size (what a network observer reads as Content-Length), as
must a policy-evaluation report whatever states it visited.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from privrl.client.users import encode_returns, encode_trajectory
from privrl.protocol import ReturnsReport, TrajectoryReport
from privrl.wire import pack_floats, pack_ints
from privrl.worlds.first_visit import FirstVisits
from privrl.worlds.rollout import Trajectories
from support.server import claim, create, spec

S, H = 12, 6  # two-digit states exist
LEFT = 0
# timings (and the GC's pauses), sample creation times, the ledger and the policy version
LEFT_OUT = ("privrl_request_duration_seconds", "privrl_gc_", "privrl_epsilon_spent",
            "privrl_policy_version")
SKIPPED_KEYS = re.compile(r"(^|\.)(\w*_at|\w*seconds\w*|\w*version\w*|ledger\w*|spent\w*)(\.|$)")


def metric_samples(text: str) -> dict[str, float]:
    """Every sample of the Prometheus text but those LEFT_OUT: 'name{labels}' -> value."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or line.startswith(LEFT_OUT):
            continue
        key, value = line.rsplit(" ", 1)
        if not key.split("{")[0].endswith("_created"):
            out[key] = float(value)
    return out


def leaves(doc: Any, path: str = "") -> dict[str, Any]:
    """Numeric leaves and list lengths of a JSON document by path (timestamps, versions and
    the ledger left out); list items are named from the end, so a log's newest entry is [-1]
    after every report."""
    out: dict[str, Any] = {}
    if isinstance(doc, dict):
        for key, value in doc.items():
            sub = f"{path}.{key}" if path else str(key)
            if not SKIPPED_KEYS.search(sub):
                out.update(leaves(value, sub))
    elif isinstance(doc, list):
        out[f"{path}#len"] = len(doc)
        for i, value in enumerate(doc[-3:]):
            out.update(leaves(value, f"{path}[{i - len(doc[-3:])}]"))
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        out[path] = doc
    elif isinstance(doc, str):
        out[path] = f"str of {len(doc)}"
    return out


def public(client: Any, run_id: str) -> dict[str, Any]:
    """Every public series of the server and the run (the billboard is the release itself)."""
    series = {f"metrics {k}": v for k, v in metric_samples(client.get("/metrics").text).items()}
    for route in ("", "/policies"):
        body = client.get(f"/v1/runs/{run_id}{route}").json()
        series.update({f"run{route} {k}": v for k, v in leaves(body).items()})
    return series


# The policy log may depend on users' data (a new version when the plan changes): its per-version
# entries are left out, as the "other than the policy version" says.
POLICY_LOG = ("run/policies served.", "run/policies versions.", "run/policies arrays.")


def moved(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """How each series moved: the difference of numbers, the new value of anything else."""
    out = {}
    for key in before.keys() | after.keys():
        a, b = before.get(key), after.get(key)
        if isinstance(a, int | float) and isinstance(b, int | float):
            out[key] = b - a
        elif a != b:
            out[key] = (a is None, b is None)  # a series that appeared or vanished
    return out


def trajectory(ticket: dict[str, Any], kind: int, paid: float = 0.005) -> Trajectories:
    """A trajectory the served policy plays: kind 0 stays in state 0 with reward `paid` where it
    goes left; kind 1 walks two-digit states with reward 0.0; kind 2 mixes both."""
    actions_table = np.asarray(ticket["policy"]["actions"], dtype=np.int64)  # (H, S)
    states = {0: [0] * (H + 1), 1: [10, 11] * H, 2: [0, 11] * H}[kind][: H + 1]
    actions = [int(actions_table[h, states[h]]) for h in range(H)]
    rewards = [paid if states[h] == 0 and actions[h] == LEFT else 0.0 for h in range(H)]
    if kind == 0:
        assert paid in rewards or actions_table[0, 0] != LEFT
    return Trajectories(np.asarray([states]), np.asarray([actions]), np.asarray([rewards]))


@pytest.mark.parametrize(("noise", "paid"), [("numpy", 1.0), ("float", 0.005)])
def test_every_public_series_moves_the_same_for_every_report(apps, noise: str, paid: float
                                                             ) -> None:
    """Integer noise (users report Bernoulli rewards: 0 or 1) and float noise (0.005 is two
    characters longer than 0.0 in JSON): no public series tells the users apart."""
    client = apps()
    config = spec("jdp", n_states=S, horizon=H, episodes=20, seed=None, noise=noise)
    run_id = create(client, config)
    deltas, sizes, rewards = [], [], []
    before: dict[str, Any] = public(client, run_id)  # the GET routes' series exist from here
    for user in range(12):  # the first three create the run's series and logs: not compared
        ticket = claim(client, run_id)
        traj = trajectory(ticket, user % 3, paid)
        body = encode_trajectory(ticket["ticket"], traj)
        if user % 4 == 3:  # JSON arrays, which the server still takes: sizes vary, /metrics not
            report = TrajectoryReport.model_validate_json(body)
            body = report.model_dump_json().encode()
        else:
            sizes.append(len(body))
        resp = client.post(f"/v1/runs/{run_id}/reports", content=body,
                           headers={"Content-Type": "application/json"})
        assert resp.status_code == 200, resp.text
        after = public(client, run_id)
        if user >= 3:
            deltas.append(moved(before, after))
        rewards.append(tuple(traj.rewards[0]))
        before = after
    assert any(paid in r for r in rewards) and any(set(r) == {0.0} for r in rewards)
    assert len(set(sizes)) == 1, sizes  # Content-Length: a function of public H only
    first = deltas[0]
    assert any("privrl_reports_accepted_total" in k and v == 1 for k, v in first.items())
    for user, delta in enumerate(deltas[1:], start=1):
        differ = {k: (first.get(k), delta.get(k)) for k in first.keys() | delta.keys()
                  if first.get(k) != delta.get(k) and not k.startswith(POLICY_LOG)}
        assert not differ, f"user {user} moved public series differently: {differ}"


def test_both_forms_of_a_trajectory_are_one_report() -> None:
    """The packed form (what the client sends) and JSON arrays parse to the same trajectory."""
    plain = {"kind": "trajectory", "ticket": "t" * 32, "states": [0, 11, 3],
             "actions": [1, 0], "rewards": [0.005, 1.0]}
    packed_doc = {**plain, **TrajectoryReport.model_validate(plain).packed()}
    assert all(isinstance(packed_doc[k], str) for k in ("states", "actions", "rewards"))
    assert TrajectoryReport.model_validate(packed_doc).model_dump() == plain


@pytest.mark.parametrize(("field", "value", "message"), [
    ("states", pack_ints([0]), "states must have H+1"),
    ("rewards", pack_floats(np.asarray([math.inf] + [0.0] * (H - 1))),
     "rewards[0] is not a number in [0, 1]"),
    ("actions", "AAAA", "expected a JSON array or base64 of little-endian int32s"),
])
def test_a_packed_trajectory_is_checked_at_the_edge(apps, field: str, value: str,
                                                   message: str) -> None:
    client = apps()
    config = spec("jdp", n_states=S, horizon=H, episodes=4, seed=None)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    doc = TrajectoryReport.model_validate_json(encode_trajectory(
        ticket["ticket"], trajectory(ticket, 1))).model_dump()
    doc[field] = value
    resp = client.post(f"/v1/runs/{run_id}/reports", json=doc)
    assert resp.status_code == 422, resp.text
    assert message in resp.json()["detail"], resp.json()
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 0


def test_a_returns_report_has_one_size_whatever_was_visited() -> None:
    """Policy evaluation: the client's dense body is as long for one visited state as for all."""
    sizes = set()
    for visited in ([True] + [False] * 39, [True] * 40, [False, True] * 20):
        mask = np.asarray([visited])
        visits = FirstVisits(mask, np.where(mask, 0.005, 0.0))
        body = encode_returns("t" * 32, visits)
        assert ReturnsReport.model_validate_json(body).pairs() == visits.pairs(0)
        sizes.add(len(body))
    assert len(sizes) == 1, sizes
