"""Fixtures shared by the server tests, and the guard that keeps the fast tier in process: a test
not marked `slow` fails when it starts a process (`python -m pytest -m "not slow"`)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
from privrl import accel
from privrl.client.user_state import STATE_DIR_ENV
from privrl.trust.secagg.boundary import ROUNDS_ENV
from support.server import Apps

pytest_plugins = ("pytester",)  # test_repository runs the guard on a probe suite

# audit events (sys.addaudithook) of everything that starts a process; multiprocessing's spawn
# and forkserver start methods raise none, so BaseProcess.start is guarded as well
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                            "os.spawn", "os.system", "os.exec"})


class ProcessInFastTest(RuntimeError):
    """A test not marked slow started a process."""


class _Guard:
    """The non-slow test running in this process (None between tests) and what it started."""

    test: str | None = None
    started: list[str] = []

    @classmethod
    def check(cls, what: str) -> None:
        if cls.test is not None:
            cls.started.append(what)
            raise ProcessInFastTest(f"{cls.test} started a process ({what}): mark this test slow "
                                    "(@pytest.mark.slow) or keep it in process")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in PROCESS_EVENTS and _Guard.test is not None:
        _Guard.check(f"{event} {str(args[:2])[:200]}")


def _guarded_start(self: BaseProcess) -> None:
    _Guard.check(f"multiprocessing {type(self).__name__}.start")


sys.addaudithook(_audit)  # audit hooks cannot be removed: it does nothing between tests


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile (or load from numba's cache) DP-UCBVI's kernels here, outside any test; keep
    the users' state (nonce counters of given seeds) out of the home directory."""
    accel.load()
    os.environ[STATE_DIR_ENV] = tempfile.mkdtemp(prefix="privrl-users-state-")
    os.environ.pop(ROUNDS_ENV, None)  # cohorts run their rounds unless a test says otherwise


@pytest.fixture(autouse=True)
def fresh_user_state(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's users start with fresh nonce counters (a seeded run reproduces the
    in-process numbers); the processes a test starts inherit the folder."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("users-state")))


@contextmanager
def _no_process(item: pytest.Item) -> Iterator[None]:
    """Guard one phase (setup, call or teardown; xdist's workers are started before any) of a
    test not marked slow; a process it started fails it even if the test caught the error."""
    if item.get_closest_marker("slow") is not None:
        yield
        return
    _Guard.test, _Guard.started = item.nodeid, []
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(BaseProcess, "start", _guarded_start)
            yield
    finally:
        started, _Guard.test = _Guard.started, None
    if started:
        pytest.fail(f"{item.nodeid} started a process ({started[0]}): mark this test slow "
                    "(@pytest.mark.slow) or keep it in process", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _no_process(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _no_process(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _no_process(item):
        return (yield)


@pytest.fixture
def apps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Apps]:
    """Apps on one database file (tmp_path/privrl.db), free of PRIVRL_* settings; each client
    is closed at the end."""
    for name in ("ADMIN_TOKEN", "DB", "HIGHWATER", "CLAIM_TIMEOUT", "SEQUENTIAL",
                 "MAX_BODY_BYTES"):
        monkeypatch.delenv(f"PRIVRL_{name}", raising=False)
    factory = Apps(tmp_path / "privrl.db")
    yield factory
    for client in list(factory.opened):
        factory.close(client)
