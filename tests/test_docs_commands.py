"""Docs commands are tests: every shell and Python block of the tutorials and how-to guides runs
as written, page by page, in one bash session in a fresh folder that looks like the checkout's
root (a copy), with the test's environment's `privrl` on PATH and no PRIVRL_ setting
but a fresh user-state folder. A `console` block's commands print what the page shows under them
(ids, numbers and column padding aside). Blocks that call `docker` run only when an engine
answers (`docker info`, the one DOCKER_HOST names). A block marked
`<!-- docs-test: skip REASON -->` does not run; the reason is the page's.

`PRIVRL_DOCS_UPDATE=1` writes what the commands printed into the pages' console blocks: a
page's shown output is generated, never typed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.docs_blocks import Block, blocks, matches, normalise, script, with_output
from support.vendored import REPO_ROOT

DOCS = REPO_ROOT / "docs"
PAGES = sorted((DOCS / "tutorials").glob("*.md")) + sorted((DOCS / "how-to").glob("*.md"))
IDS = [str(p.relative_to(DOCS)) for p in PAGES]
SECONDS = 600  # one page's session at most (a Docker page: DOCKER_SECONDS, it builds an image)
DOCKER_SECONDS = 1800
NOT_COPIED = {".git", ".venv", "results", "plots", "site", "build"}  # outputs and local state


def docker_engine() -> bool:
    """`docker info` answers: the engine DOCKER_HOST names, or docker's default one."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True,
                              timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def checkout_copy(folder: Path) -> None:
    """The checkout's root, as the pages assume, copied (a page's command never writes into the
    checkout): every entry but outputs and local state."""
    def ignore(where: str, names: list[str]) -> list[str]:
        top = Path(where) == REPO_ROOT
        return [n for n in names if (top and n in NOT_COPIED) or n == "__pycache__"
                or n.endswith((".db", ".db-wal", ".db-shm", ".egg-info"))]

    shutil.copytree(REPO_ROOT, folder, symlinks=True, ignore=ignore)


def session_env(tmp: Path) -> dict[str, str]:
    """A fresh shell's environment: the test's bin/ first on PATH, no PRIVRL_ setting but the
    user-state folder, nothing on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PRIVRL_") and k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PRIVRL_STATE_DIR"] = os.environ.get("PRIVRL_STATE_DIR", str(tmp / "state"))
    return env


def run_session(page_blocks: list[Block], folder: Path, outputs: Path, seconds: float
                ) -> tuple[int, str]:
    """Run the page's script in bash in its own process group; end every process it left."""
    log = folder.parent / "session.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", script(page_blocks, outputs)], cwd=folder,
                                env=session_env(folder.parent), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            code = -1
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):  # the servers it backgrounded
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                if sig == signal.SIGTERM:
                    try:
                        proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
    return code, log.read_text()


@pytest.mark.slow  # runs the pages' commands: servers, users, runs
@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    page_blocks = blocks(page)
    docker = any(b.runs and b.docker for b in page_blocks)
    if docker and not docker_engine():
        pytest.skip("no Docker engine answers `docker info` (DOCKER_HOST or the default)")
    folder, outputs = tmp_path / "work", tmp_path / "outputs"
    outputs.mkdir()
    checkout_copy(folder)
    code, log = run_session(page_blocks, folder, outputs,
                            DOCKER_SECONDS if docker else SECONDS)
    where = str(page.relative_to(REPO_ROOT))
    assert code == 0, (f"{where}: the session {'timed out' if code == -1 else f'exited {code}'}"
                       f"; its output, last lines:\n{log[-6000:]}")
    update = os.environ.get("PRIVRL_DOCS_UPDATE") == "1"
    text, wrong = page.read_text(), []
    for b, block in reversed(list(enumerate(page_blocks))):  # from the end: spans stay valid
        if not (block.runs and block.lang == "console"):
            continue
        differs = False
        for c, command in enumerate(block.commands()):
            actual = (outputs / f"{b}-{c}").read_text().splitlines()
            if not matches(command.shown, actual, seeded="--seed " in command.text,
                           live=block.live is not None):
                differs = True
                wrong.append(f"{block.where} `$ {command.text}` shows\n  "
                             + "\n  ".join(command.shown) + "\nbut printed\n  "
                             + "\n  ".join(actual))
        if update and differs:  # only a block that differs: the others keep their text
            start, end = block.span
            text = text[:start] + with_output(block, outputs, b) + text[end:]
    if update:
        page.write_text(text)
        return
    assert not wrong, f"{where}: shown output differs (ids and numbers aside):\n" + "\n".join(
        wrong)


# the fast checks: what the session test relies on, and the pages' servers and ports

ALL_BLOCKS = {page: blocks(page) for page in PAGES}
LISTEN = re.compile(r"(?:--port|--listen)\s+(\d+)")


def test_the_pages_have_blocks_that_run() -> None:
    """The extraction sees the pages' commands (a broken pattern would make the test vacuous)."""
    runnable = [b for bs in ALL_BLOCKS.values() for b in bs if b.runs]
    assert len(runnable) >= 15
    assert {b.lang for b in runnable} >= {"bash", "console", "python"}
    assert sum(len(b.commands()) for b in runnable if b.lang == "console") >= 4


def test_commands_are_shown_in_console_blocks() -> None:
    """A prompted command (`$ `) in a block of plain text would neither run nor be checked."""
    stray = [b.where for bs in ALL_BLOCKS.values() for b in bs
             if b.lang in {"", "text"} and re.search(r"^\$ ", b.body, re.M)]
    assert stray == []


def test_every_skipped_block_says_why() -> None:
    marked = [(b.where, b.skip or b.live) for bs in ALL_BLOCKS.values() for b in bs
              if b.skip or b.live]
    assert marked and all(len(why.split()) >= 3 for _, why in marked), marked
    assert all(b.lang == "console" for bs in ALL_BLOCKS.values() for b in bs if b.live)


def test_a_backgrounded_server_is_waited_for() -> None:
    """Every `privrl serve ... &` (or audit proxy) is followed by `privrl wait` within two lines
    (a pasted block would otherwise meet "connection refused")."""
    found, unwaited = 0, []
    for page_blocks in ALL_BLOCKS.values():
        for block in page_blocks:
            if not block.runs:
                continue
            lines = [x for x in block.body.splitlines() if x.strip() and not x.startswith("#")]
            for i, line in enumerate(lines):
                if not re.search(r"\bprivrl (?:serve|audit (?:replay-)?proxy)\b.*&", line):
                    continue
                found += 1
                after = " ".join(lines[i + 1:i + 3])  # the next line, or after setting a URL
                if "privrl wait --server" not in after:
                    unwaited.append(f"{block.where}: {line.strip()}")
    assert found >= 6
    assert unwaited == []


def shell_text(page: Path) -> str:
    return "\n".join(b.body for b in ALL_BLOCKS.get(page) or blocks(page)
                     if b.lang in {"bash", "sh", "console"})


def test_each_page_listens_on_its_own_ports() -> None:
    """Pages run side by side (and a reader may keep each page's server running): no two pages
    start a server or proxy on one port, and no page's command uses 8000, where `mkdocs serve`
    and the compose demo listen."""
    pages = [*PAGES, *sorted((DOCS / "explanation").glob("*.md"))]
    owners = Counter(int(port) for page in pages
                     for port in set(LISTEN.findall(shell_text(page))))
    assert owners[8100] == 1, "no port found: the pattern is broken"
    assert {p: n for p, n in owners.items() if n > 1} == {}
    assert [p.name for p in pages if p.name != "compose.md"
            and re.search(r"(?:127\.0\.0\.1|localhost):8000\b|--port 8000\b", shell_text(p))] == []


def test_shown_output_is_compared_without_what_varies() -> None:
    assert normalise("run 698c9e3002c39dea: 200 episodes,  eps = 1e-05") == \
        normalise("run 0cf32c6d406c5c09: 31 episodes, eps = 0.25")
    assert normalise("ok noise") != normalise("skip noise")
    assert matches(["a 1", "...", "c"], ["a 2", "b", "b", "c"])
    assert matches(["a", "...", "c"], ["a", "c"])
    assert not matches(["a", "c"], ["a", "b", "c"])
    assert not matches(["a"], ["a", "b"])
    assert matches(["TPR >= 0.1 (4.3s), 3 ms"], ["TPR >= 0.1 (107.4s), 12 ms"], seeded=True)
    assert not matches(["TPR >= 0.1"], ["TPR >= 0.2"], seeded=True)
    check = "  {} seeds        94 candidate seeds ... (0.6s)"
    assert matches([check.format("ok")], ["  skip  seeds  the run kept moving"], live=True)
    assert not matches([check.format("ok")], ["  skip  seeds  the run kept moving"])
    assert not matches([check.format("ok")], ["  FOUND seeds  seed 42"], live=True)
    assert matches(["  FOUND seed  seed 42 (also at /a) re-derives"],
                   ["  FOUND seed  seed 42 (also at /metrics (text)) re-derives"], live=True)
    assert not matches(["  FOUND seed  seed 42 (also at /a) re-derives"],
                       ["  FOUND seed  seed 42 (also at /a) re-derives nothing"], live=True)
