"""`privrl bench`: one run times every variant with 1 and R replicas side by side (no timing is
asserted: the suite checks what the command reports, not how fast this machine is)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from privrl.client.cli import main
from privrl.lab.bench import Row, paired_ratio, variants


def test_bench_reports_single_and_batched_replicas(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    rc = main(["bench", "--episodes", "6", "--horizon", "4", "--rounds", "2", "--replicas",
               "1", "3", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "interleaved round(s), medians" in text
    result = json.loads(out.read_text())
    assert result["episodes"] == 6 and result["rounds"] == 2
    rows = result["rows"]
    assert [(r["variant"], r["replicas"]) for r in rows] == [
        (name, n) for n in (1, 3) for name, *_ in variants()]
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
    assert result["rlberry"] is None  # not asked for


@pytest.mark.slow
def test_bench_compares_with_rlberry_in_its_own_process(tmp_path) -> None:
    """`--rlberry` in a process of its own: rlberry binds a log handler to the stderr it finds at
    import, which inside a test is pytest's capture. rlberry-scool is not a test dependency."""
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "privrl.client", "bench", "--episodes", "6",
                           "--horizon", "4", "--rounds", "1", "--rlberry", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(out.read_text())
    if result["rlberry"] is None:
        assert "rlberry-scool not installed" in done.stdout
    else:
        assert all(r["x_faster_than_rlberry"] > 0 for r in result["rows"])


def test_a_ratio_pairs_the_samples_of_one_round() -> None:
    """The machine's speed drifts between rounds: each ratio is taken within a round, and the
    median of those is reported (here 4.0, where the ratio of the medians would be 3.0)."""
    peer = Row("rlberry", "none", 1, samples_ms=[4.0, 6.0, 12.0])
    row = Row("privrl", "none", 2, samples_ms=[2.0, 4.0, 4.0])  # per replica: 1, 2, 2
    assert paired_ratio(peer, row) == 4.0
    assert peer.ms_per_episode / row.ms_per_replica_episode == 3.0
