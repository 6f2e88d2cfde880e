"""LDP reports in the compact form (base64 of little-endian float64): lossless, accepted beside the
JSON form, stored compact, and refused with a clear message when malformed."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
from privrl.protocol import NoisyReport
from privrl.wire import F64_PATTERN, pack_floats, unpack_floats
from support.server import Apps, claim, create, spec, state, user_report, world


def test_packing_is_lossless_to_the_bit() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(size=100) * 10.0 ** rng.integers(-300, 300, 100),
                             [0.0, -0.0, 5e-324, -1.7976931348623157e308, 1 / 3]])
    back = unpack_floats(pack_floats(values))
    assert back.dtype == np.float64 and back.tobytes() == values.astype("<f8").tobytes()


@pytest.mark.parametrize("extra", range(8))
def test_the_pattern_matches_exactly_whole_float64s(extra: int) -> None:
    for n in range(7):
        text = base64.b64encode(bytes(8 * n + extra)).decode()
        assert bool(re.fullmatch(F64_PATTERN, text)) == (extra == 0), (n, extra)


def packed_body(body: dict) -> dict:
    """The same report with every array packed."""
    return {**body, "arrays": {k: pack_floats(np.asarray(v)) for k, v in body["arrays"].items()}}


def test_both_forms_are_the_same_report_and_count_once(apps: Apps) -> None:
    client = apps()
    config = spec("ldp", episodes=4, horizon=20, n_states=6)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    body = user_report(ticket, config, world(config))
    compact = packed_body(body)
    # the packed form's size is the run's alone (base64 of 8 bytes an entry), whatever the
    # values; the list form's is not (integer noise makes its entries short: "27.0")
    for name, values in body["arrays"].items():
        assert len(compact["arrays"][name]) == 4 * -(-8 * len(values) // 3)
    resp = client.post(f"/v1/runs/{run_id}/reports", json=compact)
    assert resp.status_code == 200 and not resp.json()["duplicate"]
    resp = client.post(f"/v1/runs/{run_id}/reports", json=body)  # a retry in the JSON form
    assert resp.status_code == 200 and resp.json()["duplicate"] and resp.json()["reported"] == 1
    report = NoisyReport.model_validate(compact)
    for name, values in body["arrays"].items():
        np.testing.assert_array_equal(report.array(name), values)


def test_malformed_packed_arrays_are_refused_and_change_nothing(apps: Apps) -> None:
    client = apps()
    config = spec("ldp", episodes=4)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    body = packed_body(user_report(ticket, config, world(config)))
    before = state(client, run_id)
    name = sorted(body["arrays"])[0]
    values = unpack_floats(body["arrays"][name])
    cases = {
        "short": pack_floats(values[:-1]),
        "nan": pack_floats(np.where(np.arange(values.size) == 2, np.nan, values)),
        "inf": pack_floats(np.where(np.arange(values.size) == 3, -np.inf, values)),
        "not base64": "%%%%",
    }
    for what, text in cases.items():
        bad = {**body, "arrays": {**body["arrays"], name: text}}
        resp = client.post(f"/v1/runs/{run_id}/reports", json=bad)
        assert resp.status_code == 422, (what, resp.text)
        detail = resp.json()["detail"]
        assert name in detail or "arrays" in detail, detail
        if what in ("nan", "inf"):  # named as such, at its index (not as out of range)
            assert f"[{2 if what == 'nan' else 3}] is not a finite number" in detail, detail
        assert state(client, run_id) == before
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
