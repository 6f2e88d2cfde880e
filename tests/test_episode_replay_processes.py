"""The episode-replay attack of issue 40 over real HTTP between real processes, reduced: the
script `scripts/attacks/episode_replay.py` with 4 users of dp-ucbvi LDP behind the rewriting
proxy (`privrl audit replay-proxy`) and the recording one (`privrl audit proxy`), and a short
backup-restore drill. privrl's users, each a process with its own seed, show no reused noise and
give no trajectory away; processes that share one seed and state directory play the rewritten
episode once and refuse it after; after a restore, seeded users refuse every re-issued episode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from privrl.client.procs import child_env

REPO = Path(__file__).resolve().parents[1]
USERS = 4  # 6 pairs for the reuse check: noise keyed by the replayed episode repeats in each

# slow: it starts a server, two proxies and some 25 user processes (some 40 s of CPU)
pytestmark = pytest.mark.slow


def test_privrl_users_behind_the_rewriting_proxy_repeat_no_noise(tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "attacks" / "episode_replay.py"), "--users",
         str(USERS), "--algos", "dp-ucbvi", "--before", "2", "--lost", "3", "--json", str(out)],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    attack = result["attack"]["dp-ucbvi"]

    own = attack["privrl"]
    assert own["users"]["played"] == USERS and not own["users"]["failed"], own
    for audit in ("audit_proxy", "audit_server"):  # the report bodies, the billboard increments
        reuse = own[audit]
        assert reuse["ran"] and not reuse["found"] and reuse["flagged"] == 0, reuse
        assert reuse["reports"] == USERS and reuse["reconstructed"] == 0, reuse
        assert reuse["small_fraction"] < 3 * reuse["expected_fraction"], reuse
    assert result["attack"]["findings"] == {"audit_proxy": [], "audit_server": []}

    shared = attack["shared-seed"]["users"]
    assert shared["played"] == 1 and shared["refused_already_played"] == USERS - 1, shared

    drill = result["restore"]
    assert drill["continue"]["exit"] == 0 and "fresh noise" in drill["continue"]["output"]
    assert drill["held_after_restore"]["status"] == 503
    assert drill["seeded_after_restore"]["refused_already_played"] == 3, drill
    assert drill["seeded_after_restore"]["played"] == 0, drill
    assert drill["reported"] == 2 + 3 + 2, drill  # the backup's, the fresh users', new seeded
    reuse = drill["audit_proxy"]  # every report of the run, before and after the restore
    assert not reuse["found"] and reuse["reports"] == 2 + 3 + 3 + 2, reuse
    assert reuse["reconstructed"] == 0, reuse
