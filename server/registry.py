"""The runs a server process hosts: creation (size limits), lookup, deletion, startup rebuild."""

from __future__ import annotations

import logging
import math
import secrets
import sqlite3
import time
from collections.abc import Callable

from privrl.config import RunConfig
from privrl.seeding import secret_seed
from privrl.server.admission import RunLimits
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.store import Store

log = logging.getLogger("privrl.server")

# Bytes one number takes in a JSON report ("-12.345678901234567," is 20), with some margin.
JSON_BYTES_PER_NUMBER = 24


class Registry:
    """Run id -> HostedRun, plus runs that could not be rebuilt (served as 503, deletable)."""

    def __init__(
        self, store: Store, limits: RunLimits, max_cells: int, max_body_bytes: int
    ) -> None:
        self.store = store
        self.limits = limits
        self.max_cells = max_cells
        self.max_body_bytes = max_body_bytes
        self.runs: dict[str, HostedRun] = {}
        self.failed: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.ready = False
        self.stopping = False
        self.rebuild_error: str | None = None

    def rebuild_all(self, before_ready: Callable[[], None] | None = None) -> None:
        """Replay every stored run (a run that fails to replay is reported, not served); then
        `before_ready()` (e.g. settling the heap), then ready."""
        self.deleted = self.store.deleted_ids()
        for row in self.store.runs():
            if self.stopping:
                return
            started = time.perf_counter()
            try:
                hosted = HostedRun.restore(row, self.store, self.limits)
            except Exception as exc:
                log.exception("run %s could not be rebuilt from the store", row.id)
                self.failed[row.id] = f"{type(exc).__name__}: {exc}"
                continue
            self.runs[row.id] = hosted
            log.info(
                "run %s rebuilt: %d reports replayed, policy version %d (%.2f s)",
                row.id,
                hosted.run.reported,
                hosted.version,
                time.perf_counter() - started,
            )
        if before_ready is not None:
            before_ready()
        self.ready = True

    def _check_ready(self) -> None:
        """Refuse (503) until every run has been rebuilt."""
        if self.rebuild_error is not None:
            raise Refusal(503, "not_ready", f"rebuilding runs failed: {self.rebuild_error}")
        if not self.ready:
            raise Refusal(503, "not_ready", "the server is still rebuilding runs from its store")

    def get(self, run_id: str) -> HostedRun:
        """The live run with this id, or a 404/503 refusal saying why not."""
        self._check_ready()
        hosted = self.runs.get(run_id)
        if hosted is not None and not hosted.deleted:
            return hosted
        if run_id in self.failed:
            raise Refusal(
                503,
                "broken",
                f"run {run_id} could not be rebuilt from the store ({self.failed[run_id]})",
            )
        if run_id in self.deleted:
            raise Refusal(404, "deleted", f"run {run_id} was deleted")
        raise Refusal(404, "unknown_run", f"no run with id {run_id!r}")

    def check_size(self, config: RunConfig) -> None:
        """Refuse runs this server cannot hold, or whose LDP reports exceed the body limit.

        The size of a run is the entries of its largest released statistic family (for
        DP-UCBVI: N(s,a,s'), H*S*A*S), as its algorithm declares them.
        """
        families = config.algorithm().families()
        largest = max(families, key=lambda f: math.prod(f.shape), default=None)
        cells = math.prod(largest.shape) if largest is not None else 0
        if cells > self.max_cells:
            assert largest is not None
            raise Refusal(
                422,
                "too_large",
                f"run too large: its {largest.name!r} array has {cells} entries (shape"
                f" {list(largest.shape)}), this server hosts at most {self.max_cells}"
                " (PRIVRL_MAX_CELLS)",
            )
        if config.privacy == "ldp":
            numbers = sum(math.prod(f.shape) for f in families)
            size = numbers * JSON_BYTES_PER_NUMBER
            if size > self.max_body_bytes:
                raise Refusal(
                    422,
                    "too_large",
                    f"an LDP report of this run would carry {numbers} numbers (about {size}"
                    f" bytes), above this server's body limit of {self.max_body_bytes} bytes"
                    " (PRIVRL_MAX_BODY_BYTES)",
                )

    def create(self, config: RunConfig, sequential: bool, seed: int | None = None,
               credentials: bool = False) -> HostedRun:
        """A new run with a fresh unguessable id (planned and persisted before it is listed).

        `seed` is the admin's seed for a reproducible experiment; without one the run's noise
        seed comes from the OS CSPRNG. Either way it is a secret: no route or log shows it.
        """
        self._check_ready()
        try:
            self.check_size(config)
        except (ValueError, ArithmeticError) as exc:
            raise Refusal(422, "invalid_run", f"cannot create this run: {exc}") from exc
        run_id = secrets.token_hex(8)
        while self.store.run_exists(run_id):  # pragma: no cover - 64 random bits
            run_id = secrets.token_hex(8)
        try:
            hosted = HostedRun.create(
                run_id,
                config,
                sequential,
                self.store,
                self.limits,
                time.time(),
                secret_seed() if seed is None else seed,
                credentials,
            )
        except (ValueError, ArithmeticError) as exc:
            raise Refusal(422, "invalid_run", f"cannot create this run: {exc}") from exc
        except sqlite3.Error as exc:
            log.exception("could not store a new run")
            raise Refusal(503, "store", "the server could not store the new run; retry") from exc
        self.runs[run_id] = hosted
        log.info(
            "run %s created: %s %s, K=%d, H=%d, S=%d, A=%d, sequential=%s, credentials=%s",
            run_id,
            config.algo,
            config.privacy,
            config.episodes,
            config.horizon,
            config.n_states,
            config.n_actions,
            sequential,
            credentials,
        )
        return hosted

    def delete(self, run_id: str) -> None:
        """Flag the run deleted and purge its private rows (the caller holds the run's lock)."""
        self.store.delete_run(run_id)
        self.deleted.add(run_id)
        hosted = self.runs.pop(run_id, None)
        if hosted is not None:
            hosted.deleted = True
        self.failed.pop(run_id, None)
        log.info("run %s deleted", run_id)

    def live(self) -> list[HostedRun]:
        """Live runs in creation order."""
        self._check_ready()
        return sorted(self.runs.values(), key=lambda h: (h.row.created_at, h.id))
