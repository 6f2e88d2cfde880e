"""Local child processes: a privrl server on a free loopback port and user swarms, cleanly stopped.

Used by `privrl demo` and by the tests that launch real processes. The client never imports the
server package: it starts `python -m privrl.server` as a separate program.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child (unbuffered output), plus `extra`: the child
    imports the installed privrl, as this process does."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


def module_cmd(module: str, *args: str) -> list[str]:
    """`python -P -m module args...` with this interpreter: -P leaves the working directory off
    sys.path, so a folder named `privrl` where the command runs cannot shadow the installed
    package (as `-m` alone would put it first)."""
    return [sys.executable, "-P", "-m", module, *args]


def server_args(
    host: str, port: int, db: str | Path, claim_timeout: float | None = None,
    sequential: bool = False, access_log: bool = False, log_level: str | None = None,
) -> list[str]:
    """The flags of `python -m privrl.server` (the same ones `privrl serve` accepts)."""
    args = ["--host", host, "--port", str(port), "--db", str(db)]
    if log_level is not None:
        args += ["--log-level", log_level]
    if claim_timeout is not None:
        args += ["--claim-timeout", f"{claim_timeout:g}"]
    if sequential:
        args.append("--sequential")
    if access_log:
        args.append("--access-log")
    return args


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the `finally`
    blocks that stop this process's children run (the default action would end this process
    at once and leave them running)."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> int | None:
    """SIGTERM (SIGINT-like clean stop), then SIGKILL after `grace` seconds; return the code."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace)
        except ProcessLookupError:
            pass
    return proc.returncode


def rss_bytes(pid: int) -> int:
    """Resident set size of a running process, in bytes (Linux: /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/{pid}/status has no VmRSS line (a kernel thread or a zombie?)")


def wait_ready(url: str, proc: subprocess.Popen | None = None, timeout: float = 30.0) -> None:
    """Poll `url` until it answers 200; fail early if `proc` exits first."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before it was ready")
        try:
            resp = httpx.get(url, timeout=2.0)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise RuntimeError(f"the server at {url} was not ready after {timeout:g}s ({last})")


class ServerProcess:
    """A `python -m privrl.server` child on loopback: started, waited for, and always stopped."""

    def __init__(
        self, db: str | Path, token: str, *, port: int | None = None, host: str = "127.0.0.1",
        claim_timeout: float | None = None, sequential: bool = False,
        log_path: str | Path | None = None, env: Mapping[str, str] | None = None,
    ) -> None:
        """Remember how to start the server; nothing runs until `start()`."""
        self.host, self.port = host, port or free_port(host)
        self.db, self.token = Path(db).resolve(), token
        self.args = server_args(host, self.port, self.db, claim_timeout, sequential)
        self.log_path = Path(log_path) if log_path else None
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0, ready: bool = True) -> ServerProcess:
        """Start the process and wait until /readyz answers (`ready` False: /healthz, for a
        server that holds runs until an admin acts, e.g. after a restore)."""
        env = child_env({"PRIVRL_ADMIN_TOKEN": self.token, **self.extra_env})
        self._log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        out = self._log if self._log is not None else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            module_cmd("privrl.server", *self.args), env=env, stdout=out, stderr=out,
            stdin=subprocess.DEVNULL,
        )
        try:
            wait_ready(f"{self.url}/{'readyz' if ready else 'healthz'}", self.proc, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server wrote (when it logs to a file)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL) and close its log."""
        code = stop_process(self.proc) if self.proc is not None else None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def spawn(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, log_path: str | Path | None = None,
) -> subprocess.Popen:
    """Start a child (stdout+stderr to `log_path` or discarded) in the package root.

    Paths in `cmd` should be absolute: the child does not run in the caller's directory."""
    out: IO[bytes] | int = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            list(cmd), env=child_env(env), stdout=out, stderr=out,
            stdin=subprocess.DEVNULL,
        )
    finally:
        if not isinstance(out, int):
            out.close()
