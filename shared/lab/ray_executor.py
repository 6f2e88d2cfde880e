"""Sweeps on a Ray cluster (`pip install 'privrl[ray]'`): every task is a Ray task, retried when
its worker dies; results stream back as tasks complete (`ray.wait`).

Workers import privrl: on a local instance they share this environment; on a remote cluster
privrl must be installed on every node (or shipped with `runtime_env`, see docs/how-to/ray.md).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import ray

from .executors import Executor, ExecutorError, Progress, TaskFn

LOCAL = "local"  # ray.init's address for a new local instance (never a stale running one)
MAX_RETRIES = 3  # a task whose worker process dies is run again, at most this many times
TOKEN_HINT = ("; a cluster with token authentication also needs RAY_AUTH_MODE=token and"
              " RAY_AUTH_TOKEN (`ray get-auth-token` on its head node)")
CONNECT_SECONDS = 5.0  # how long a HOST:PORT address may take to answer before we give up


class RayExecutor(Executor):
    """Ray tasks on the cluster at `address`: HOST:PORT, "auto" (the one `ray start` runs here)
    or None ($RAY_ADDRESS, else a new local instance of `num_cpus` CPUs, shut down at the end)."""

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        runtime_env: dict[str, Any] | None = None,
        max_retries: int = MAX_RETRIES,
    ) -> None:
        self.address = address or os.environ.get("RAY_ADDRESS") or LOCAL
        self.num_cpus = num_cpus
        self.runtime_env = runtime_env
        self.max_retries = max_retries
        self._owned = False

    def __enter__(self) -> RayExecutor:
        """Join (or start) the cluster now, so that a failure comes before any work."""
        self._owned = self._connect() or self._owned
        return self

    def __exit__(self, *exc: object) -> None:
        """Shut down the local instance this executor started (a joined cluster stays up)."""
        if self._owned:
            ray.shutdown()
            self._owned = False

    def run(self, fn: TaskFn, tasks: Sequence[Any], progress: Progress) -> Iterator[tuple]:
        """Submit every task, then yield `(task.key, result)` as each completes."""
        owned = self._connect()
        remote = _call.options(num_cpus=1, max_retries=self.max_retries, retry_exceptions=False)
        pending = {remote.remote(fn, task): task for task in tasks}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    task = pending.pop(ref)
                    yield task.key, self._result(ref, task)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if owned:
                ray.shutdown()

    def cores(self) -> int:
        """The CPUs of the cluster (joined or started first)."""
        self._owned = self._connect() or self._owned
        return int(ray.cluster_resources().get("CPU", 0))

    def _connect(self) -> bool:
        """Join (or start) the cluster unless Ray is already up; whether we started it."""
        if ray.is_initialized():
            return False
        _check_reachable(self.address)
        try:
            ray.init(
                address=self.address,
                num_cpus=self.num_cpus if self.address == LOCAL else None,
                runtime_env=self.runtime_env,
                include_dashboard=False,
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = "a new local instance" if self.address == LOCAL else self.address
            hint = TOKEN_HINT if self.address not in (LOCAL, "auto") else ""
            raise ExecutorError(f"Ray at {where}: {str(exc).splitlines()[0]}{hint}") from None
        return True

    def _result(self, ref: ray.ObjectRef, task: Any) -> Any:
        """The task's result; a task lost for good (its retries spent) is a one-line error."""
        try:
            return ray.get(ref)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError) as exc:
            raise ExecutorError(
                f"task {task.key} lost after {self.max_retries} retries: {type(exc).__name__}"
            ) from None


def _check_reachable(address: str) -> None:
    """Fail fast when HOST:PORT does not answer (ray.init would retry it for minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "local" or "auto": Ray starts or finds it itself
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise ExecutorError(f"no Ray cluster answers at {address}: {exc}") from None


@ray.remote
def _call(fn: TaskFn, task: Any) -> Any:
    """`fn(task)` on a Ray worker (any picklable callable; progress is heard on completion)."""
    return fn(task)
