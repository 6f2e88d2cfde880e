"""`privrl frontier` as a user runs it: a tiny study through the real command (a process with
its parallel workers), its JSON and figure, and a re-run that continues it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TINY = ["frontier", "--cases", "dp-ucbvi-pooled-jdp", "lsvi-ucb-batched-jdp", "--epsilon", "1",
        "1000", "--episodes", "40", "--seeds", "2", "--workers", "2"]


def privrl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privrl.client", *args], capture_output=True,
                          text=True, timeout=600)


def test_a_tiny_study_runs_and_continues(tmp_path: Path) -> None:
    out = tmp_path / "study"
    done = privrl(*TINY, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((out / "frontier.json").read_text())
    assert (out / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["command"].startswith("privrl frontier --cases")
    assert len(data["frontier"]) == 2 * 2 * 2  # cases x presets x ε
    assert all(data["runs"][r["run"]]["status"] == "done" for r in data["frontier"])
    assert {t["case"] for t in data["thresholds"]} == {"dp-ucbvi-pooled-jdp",
                                                       "lsvi-ucb-batched-jdp"}
    runs = len(data["runs"])
    ran = sum(r["status"] == "done" for r in data["runs"].values())
    assert f"[{ran}/{ran}] " in done.stderr and "ETA" in done.stderr
    # K = 40 is too short for the pooled ablation's batch:200 rows: recorded, and said why
    assert runs - ran == 2 and "releases nothing in 40 episodes" in done.stderr
    assert "is not available" not in done.stderr  # every lever has its knobs now
    assert "smallest learning ε" in done.stdout

    again = privrl(*TINY, "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"continuing {out / 'frontier.json'}: {runs} run(s) already there" in again.stderr
    assert f"{runs} runs already done or refused, 0 to run" in again.stderr
    assert json.loads((out / "frontier.json").read_text())["runs"] == data["runs"]

    other = privrl(*TINY[:-4], "--seeds", "3", "--out", str(out))
    assert other.returncode == 2 and "another spec" in other.stderr
