"""A fresh install's first run: the kernels compile before anything waits on them, and say so.

NUMBA_CACHE_DIR points numba's cache at an empty folder, as on a machine that never ran privrl:
every process of the demo (the CLI, the server, the users) would find no compiled kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.client import run_cli


@pytest.mark.slow
def test_the_first_demo_on_a_cold_cache_compiles_first_and_succeeds(tmp_path: Path) -> None:
    cache = tmp_path / "numba-cache"
    cache.mkdir()
    done = run_cli("demo", "--episodes", "20", "--schedule", "batch:5", "--seeds", "1",
                   "--users-processes", "1", "--concurrency", "2", "--out", str(tmp_path / "d"),
                   env={"NUMBA_CACHE_DIR": str(cache)}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    err = done.stderr
    said = err.index("compiling DP-UCBVI's kernels, first run only")
    assert said < err.index("server at http://")  # compiled before the server waits on them
    for name in ("new_model", "plan_replicas", "rollout", "run_episodes"):
        assert f"privrl: compiled {name} (" in err  # one progress line per kernel
    assert err.count("compiling DP-UCBVI's kernels") == 1  # the server and users load them
    assert any(cache.rglob("*.nbi"))  # numba's index: the next process loads, not compiles
    assert (tmp_path / "d" / "summary.json").exists()


def test_the_whole_suite_shows_its_progress_and_its_slowest_tests() -> None:
    """The full suite runs for minutes on 2 cores: each line of dots ends with a count of the
    tests done out of all, and the end lists the slowest ones (pytest's own options, free)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    ini = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert ini["console_output_style"] == "count"
    assert "--durations=" in ini["addopts"] and "-ra" in ini["addopts"]


def test_the_pages_say_when_their_variant_does_not_learn() -> None:
    """The compose page's variant and the first demo's "Next" command: the variant keeps the K
    at which JDP learns and says what a shorter run did; "Next" says its JDP run does not
    learn, beside the command, never silently."""
    docs = Path(__file__).resolve().parents[1] / "docs"
    compose = (docs / "how-to" / "compose.md").read_text()
    command = next(ln for ln in compose.splitlines() if "PRIVRL_EPSILON=20" in ln)
    assert "PRIVRL_EPISODES" not in command  # the variant keeps the K at which JDP learns
    assert "saw its\nJDP run not learn" in compose  # and the page says what a shorter run did
    demo = (docs / "tutorials" / "first-demo.md").read_text()
    nxt = demo[demo.index("## Next"):]
    assert "--no-pooled" in nxt and "Expect **JDP not to learn** there" in nxt
