"""Compiling DP-UCBVI's kernels has no side effects: the first use compiles in the calling
process and says so in one line on stderr; `python -m privrl.accel` and `privrl warmup` compile
ahead of time; nothing but numba's own cache is written, and no other process is started."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from privrl import accel

ACCEL = Path(accel.__file__).parent
COMPILED = re.compile(r"^privrl: compiled DP-UCBVI's kernels \(break_ties, new_model,"
                      r" plan_replicas, policy_values, rollout, run_episodes\)"
                      r" in \d+\.\d s;"
                      r" numba caches them for later processes$")


def _imports(path: Path) -> set[str]:
    """The modules a source file imports (absolute names, relative ones resolved in privrl)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.add(f"privrl.{base}" if node.level else base)
    return names


@pytest.mark.parametrize("name", ["__init__.py", "__main__.py", "kernels.py"])
def test_the_accel_package_starts_no_process_and_sits_below_the_runner(name: str) -> None:
    imported = _imports(ACCEL / name)
    assert not imported & {"subprocess", "multiprocessing", "tempfile", "privrl.run"}
    assert not any(m.startswith(("privrl.run", "privrl.algorithms")) for m in imported)


def test_a_loaded_process_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """In a process whose kernels are loaded (the test session loaded them), loading again is
    free and silent: the line is said once, by the process that compiled."""
    module = accel.load()
    assert accel.load() is module
    assert capsys.readouterr().err == ""
    assert {"plan_replicas", "break_ties", "new_model", "run_episodes"} <= set(vars(module))


def _warm_up(cache: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, *command], capture_output=True, text=True, env=env,
                          timeout=900)


@pytest.mark.slow
def test_warm_up_compiles_once_into_numbas_cache_only(tmp_path: Path) -> None:
    cache = tmp_path / "numba-cache"
    before = sorted(p.name for p in ACCEL.rglob("*") if p.suffix not in (".pyc",))
    first = _warm_up(cache, "-m", "privrl.accel")
    assert first.returncode == 0, first.stderr
    lines = first.stderr.strip().splitlines()  # it says so first, then what it compiled
    assert lines[0].startswith("privrl: compiling DP-UCBVI's kernels, first run only")
    assert COMPILED.match(lines[-1]), lines
    assert "privrl.accel: kernels ready in" in first.stdout
    written = [p for p in cache.rglob("*") if p.is_file()]
    assert written and all(p.suffix in (".nbi", ".nbc") for p in written)
    assert sorted(p.name for p in ACCEL.rglob("*") if p.suffix not in (".pyc",)) == before
    again = _warm_up(cache, "-m", "privrl.client", "warmup")  # `privrl warmup`: loads, silent
    assert again.returncode == 0, again.stderr
    assert again.stderr == "" and "kernels ready in" in again.stdout
    assert sorted(p for p in cache.rglob("*") if p.is_file()) == sorted(written)
