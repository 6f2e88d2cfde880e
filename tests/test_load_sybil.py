"""scripts/load/sybil.py, small: a 64-address client with one credential holds only its cap,
and an address that never reports in a sequential run is held back for a doubling backoff, so
the honest users keep most of their rate.

Slow: it starts a server, `privrl users` and an attacker process, for about a minute."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from privrl.server.ops.sources import BACKOFF_RATIO
from support.vendored import REPO_ROOT

pytestmark = pytest.mark.slow

PHASE, TIMEOUT = 4.0, 0.5
# On a shared machine an honest rate drifts by tens of percent between two windows (see
# docs/results/index.md), so the rate bound is looser than the measured figures; the claims the
# attacker got are the exact bound.
MIN_RATIO = 0.5


def test_neither_many_addresses_nor_a_staller_takes_the_run(tmp_path: Path) -> None:
    out = tmp_path / "sybil.json"
    cmd = [sys.executable, str(REPO_ROOT / "scripts" / "load" / "sybil.py"), "--phase",
           str(PHASE), "--warmup", "2", "--addresses", "64", "--stall-timeout", str(TIMEOUT),
           "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    sybil, stall = json.loads(out.read_text())["runs"]
    assert sybil["attack"] == "sybil" and sybil["attacker_addresses"] == 64
    assert sybil["attacker"]["claims"] <= 4  # PRIVRL_MAX_CLAIMS_PER_CREDENTIAL
    assert sybil["ratio_to_mean_of_alone_and_after"] >= MIN_RATIO, sybil
    # the n-th stall (TIMEOUT s) is followed by a backoff of BACKOFF_RATIO * TIMEOUT * 2**(n-1)
    stalls = 1 + math.ceil(math.log2(PHASE / (BACKOFF_RATIO * TIMEOUT) + 1))
    assert 1 <= stall["attacker"]["claims"] <= stalls, stall
    assert stall["ratio_to_mean_of_alone_and_after"] >= MIN_RATIO, stall
