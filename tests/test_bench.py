"""`privrl bench`: one run times every variant with 1 and R replicas side by side (no timing is
asserted: the suite checks what the command reports, not how fast this machine is)."""

from __future__ import annotations

import json

import pytest
from privrl.client.cli import main
from privrl.lab.bench import VARIANTS


def test_bench_reports_single_and_batched_replicas(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    rc = main(["bench", "--episodes", "6", "--horizon", "4", "--rounds", "2", "--replicas",
               "1", "3", "--rlberry", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "interleaved round(s), medians" in text
    result = json.loads(out.read_text())
    assert result["episodes"] == 6 and result["rounds"] == 2
    rows = result["rows"]
    assert [(r["variant"], r["replicas"]) for r in rows] == [
        (name, n) for n in (1, 3) for name, *_ in VARIANTS]
    for row in rows:
        assert len(row["samples_ms"]) == 2 and all(x > 0 for x in row["samples_ms"])
        per_replica = row["ms_per_replica_episode"] * row["replicas"]
        assert per_replica == pytest.approx(row["ms_per_episode"])
        assert row["variant"] in text
        if row["privacy"] == "none":
            assert row["noise_draws"] == 0 and row["noise_ms_per_replica_episode"] is None
        elif row["replicas"] == 1:  # H = 4, S = 6, A = 2: (H S A S + H S A) entries per report
            cells = 4 * 6 * 2 * 6 + 4 * 6 * 2
            assert row["noise_draws"] in (cells, 2 * cells)  # LDP / a JDP tree's nodes
            assert row["noise_ms_per_replica_episode"] > 0
    assert "noise only" in text and "int/float" in text
    twins = [r for r in rows if r["privacy"] != "none" and not r["variant"].endswith(" float")]
    assert twins and all(r["integer_over_float"] > 0 for r in twins)  # measured side by side
    if result["rlberry"] is None:  # rlberry-scool is not a test dependency
        assert "rlberry-scool not installed" in text
    else:
        assert all(r["x_faster_than_rlberry"] > 0 for r in rows)
