"""The compiled path's cold start: kernels compile in the background while the numpy path runs,
and a long in-process run hands its remaining episodes to the compiled loop when they are ready
(the same numbers as a run on either path alone)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from privrl import accel
from privrl.algorithms.ucbvi.fused import FusedEpisodes
from privrl.config import RunConfig
from privrl.run import HANDOFF_EVERY, run_in_process
from privrl.worlds import riverswim

pytestmark = pytest.mark.skipif(not accel.available(), reason="numba is not installed")

CASES = {  # private cases on the float backend: the compiled loop draws its noise
    "none": dict(privacy="none"),
    "jdp-gaussian": dict(privacy="jdp", noise="float", mechanism="gaussian", epsilon=1.0,
                         delta=1e-5),
    "jdp-laplace": dict(privacy="jdp", noise="float", mechanism="laplace", epsilon=1.0),
    "ldp": dict(privacy="ldp", noise="float", mechanism="laplace", epsilon=5.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_run_switches_to_the_compiled_loop_with_the_same_numbers(monkeypatch, case: str) -> None:
    """The generic loop runs until the kernels are "ready" (after episode 100 here), then the
    compiled loop takes the remaining episodes from the next look: regret, policy versions,
    switches and ledger equal those of a run on the numpy path alone."""
    mdp = riverswim(12)
    config = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=300,
                       preset="practical", **CASES[case])
    monkeypatch.setenv(accel.ENV_SWITCH, "0")
    numpy_run = run_in_process(config, mdp, [3, 4])

    ready = {"now": False}
    monkeypatch.setattr(accel, "enabled", lambda: ready["now"])
    resumed: list[int] = []
    original = FusedEpisodes.__call__

    def spy(self, regret, progress, progress_every, resume=None):  # noqa: ANN001, ANN202
        resumed.append(self.run.reported if resume is not None else -1)
        return original(self, regret, progress, progress_every, resume)

    monkeypatch.setattr(FusedEpisodes, "__call__", spy)

    def progress(done: int) -> None:
        ready["now"] = ready["now"] or done >= 100

    switched = run_in_process(config, mdp, [3, 4], progress=progress, progress_every=50)
    assert resumed == [2 * HANDOFF_EVERY]  # handed over at the first look after episode 100
    np.testing.assert_array_equal(switched.regret, numpy_run.regret)
    np.testing.assert_array_equal(switched.policy_changes, numpy_run.policy_changes)
    assert switched.policy_versions == numpy_run.policy_versions
    assert switched.ledger.entries == numpy_run.ledger.entries
    assert switched.ledger.totals(1e-5) == numpy_run.ledger.totals(1e-5)
    assert numpy_run.policy_changes.min() > 0 and numpy_run.regret[:, -1].max() > 0


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """A process that has not found the kernels compiled, with an empty cache dir of its own
    and background processes recorded instead of started."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(accel.ENV_SWITCH, raising=False)
    for name, value in (("_ready", False), ("_warm_up_started", False),
                        ("_last_check", -accel.RECHECK_SECONDS)):
        monkeypatch.setattr(accel, name, value)
    started: list[list[str]] = []
    monkeypatch.setattr(accel.subprocess, "Popen", lambda cmd, **kw: started.append(cmd))
    return started


def test_cold_process_uses_numpy_and_compiles_in_the_background_once(cold) -> None:
    assert not accel.enabled()  # the numpy path, not a compilation here
    assert len(cold) == 1 and cold[0][1:3] == ["-m", "privrl.accel"]
    lock = accel.marker().with_suffix(".lock")
    assert cold[0][-2:] == ["--lock", str(lock)] and lock.exists()
    accel._last_check = -accel.RECHECK_SECONDS
    assert not accel.enabled() and len(cold) == 1  # one warm-up per process
    accel.mark_ready()  # what the warm-up does when it is done
    assert not accel.enabled()  # looked again too soon: not yet
    accel._last_check = -accel.RECHECK_SECONDS
    assert accel.enabled() and accel.enabled()


def test_a_live_warm_up_is_not_started_twice(cold) -> None:
    lock = accel.marker().with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("12345")  # another process compiles
    assert not accel.enabled() and cold == []
    accel._warm_up_started = False
    old = time.time() - 2 * accel.STALE_SECONDS
    os.utime(lock, (old, old))  # ... or did, and died
    accel._last_check = -accel.RECHECK_SECONDS
    assert not accel.enabled() and len(cold) == 1


def test_switch_values(cold, monkeypatch) -> None:
    monkeypatch.setenv(accel.ENV_SWITCH, "1")
    assert accel.enabled() and cold == []  # compiles where it is needed, no background
    monkeypatch.setenv(accel.ENV_SWITCH, "0")
    assert not accel.enabled() and not accel.available() and cold == []
    monkeypatch.setenv(accel.ENV_SWITCH, "auto")
    assert accel.mode() == "auto" and not accel.enabled() and len(cold) == 1


@pytest.mark.slow
def test_warm_up_command_marks_ready_and_frees_its_lock(tmp_path) -> None:
    """`python -m privrl.accel --lock F` (what the background start runs): compiled or loaded
    kernels, the ready marker written, the lock removed."""
    lock = tmp_path / "warm.lock"
    lock.write_text("0")
    done = subprocess.run([sys.executable, "-m", "privrl.accel", "--lock", str(lock)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "kernels ready" in done.stdout and not lock.exists()
    assert accel.marker().exists()


UNIFORMS = """
import numpy as np
from privrl.accel.episodes import _uniforms
out = np.empty(3)
_uniforms(np.array([7], np.uint32), np.uint32(1), 2, out, np.empty(2, np.uint32),
          np.empty(8, np.uint32), np.empty(4, np.uint64))
print(repr(out.tolist()))
"""


@pytest.mark.slow
def test_a_changed_callee_in_another_module_is_not_loaded_stale(tmp_path) -> None:
    """numba's cache checks only the file of the function it loads: after `git pull` changed a
    kernel's callee in another module (streams.py here, under episodes._uniforms), the caller's
    cached machine code would still run the old callee. The package drops its cached kernels
    when their sources change, so the second process computes with the new callee."""
    package = tmp_path / "site" / "privrl"  # privrl.accel alone: it imports nothing else
    (package / "accel").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for path in sorted(Path(accel.__file__).parent.glob("*.py")):
        (package / "accel" / path.name).write_text(path.read_text())
    env = {**os.environ, "PYTHONPATH": str(package.parent), accel.ENV_SWITCH: "1",
           "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def uniforms() -> list[float]:
        done = subprocess.run([sys.executable, "-c", UNIFORMS], capture_output=True, text=True,
                              env=env, timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return eval(done.stdout)  # noqa: S307 (our own repr of three floats)

    first = uniforms()
    streams = package / "accel" / "streams.py"
    streams.write_text(streams.read_text().replace("TO_DOUBLE = 1.0 /", "TO_DOUBLE = 2.0 /"))
    assert uniforms() == [2.0 * u for u in first]
    assert all(0.0 <= u < 1.0 for u in first)
