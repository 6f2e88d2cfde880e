"""The runs a server process hosts: creation (size limits), lookup, deletion, startup rebuild,
and the runs held because their store went back, or their high-water mark is lost
(`privrl.server.ops.highwater`), until an admin continues them under a new noise epoch or stops
them."""

from __future__ import annotations

import logging
import math
import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Literal

from privrl.algorithms import bind, effective
from privrl.config import RunConfig
from privrl.seeding import secret_seed
from privrl.server.admission import RunLimits
from privrl.server.errors import Refusal
from privrl.server.hosted import HostedRun
from privrl.server.limits import max_report_bytes, report_numbers
from privrl.server.ops import noise_epochs
from privrl.server.ops.highwater import HighWater, Mark
from privrl.server.store import Store

log = logging.getLogger("privrl.server")

@dataclass
class Held:
    """A run whose store is behind what the server published, or whose mark is lost: not
    served until an admin acts. `hosted` is None when the store does not hold the run at all;
    `code` is its routes' 503 code ("rolled_back", or "mark_missing", "mark_unreadable",
    "mark_foreign" after `HighWater.state`)."""

    hosted: HostedRun | None
    reason: str
    code: str = "rolled_back"


class RunTable:
    """Run id -> HostedRun, plus runs that could not be rebuilt (served as 503, deletable)."""

    def __init__(
        self, store: Store, limits: RunLimits, max_cells: int, max_body_bytes: int,
        highwater: HighWater | None = None,
    ) -> None:
        self.store = store
        self.highwater = (highwater if highwater is not None
                          else HighWater.beside(store.path, store.identity))
        self.held: dict[str, Held] = {}
        self.limits = limits
        self.max_cells = max_cells
        self.max_body_bytes = max_body_bytes
        self.runs: dict[str, HostedRun] = {}
        self.failed: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.ready = False
        self.stopping = False
        self.rebuild_error: str | None = None

    def rebuild_all(self) -> None:
        """Replay every stored run (a run that fails to replay is reported, not served), then
        say ready."""
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
            log.info(
                "run %s rebuilt: %d reports replayed, policy version %d (%.2f s)",
                row.id,
                hosted.run.reported,
                hosted.version,
                time.perf_counter() - started,
            )
            self._admit(hosted)
        live = {row.id for row in self.store.runs()}
        for run_id, mark in list(self.highwater.marks.items()):
            # a mark still at Mark(): the run's creation never committed, nothing was published
            if (run_id not in live and mark != Mark() and not mark.deleted
                    and run_id not in self.deleted):
                self._hold(run_id, None, f"the server published {mark.reported} reports of it,"
                           " but the store has no such run")
        self.ready = True

    def _admit(self, hosted: HostedRun) -> None:
        """Serve a rebuilt run, or hold it when its store is behind the high-water mark or the
        mark does not know it (fail closed: a lost mark cannot vouch for the store)."""
        mark = self.highwater.get(hosted.id)
        if mark is None:
            code = "mark_" + ("missing" if self.highwater.state == "ok"
                              else self.highwater.state)
            self._hold(hosted.id, hosted, self.highwater.lost(), code)
            return
        behind = mark.ahead_of(hosted.epoch, hosted.reported, hosted.stopped)
        if behind is None:
            self.runs[hosted.id] = hosted
        else:
            self._hold(hosted.id, hosted, behind)

    def _hold(self, run_id: str, hosted: HostedRun | None, behind: str,
              code: str = "rolled_back") -> None:
        """Hold a run whose store went back (or may have), saying why and what an admin can
        do."""
        went = "may have gone back" if code.startswith("mark_") else "went back"
        reason = (f"run {run_id}'s store {went} ({behind}): it is not served until an admin"
                  " continues it under fresh noise or stops it (POST /v1/runs/{id}/recovery,"
                  " `privrl runs continue|stop`)")
        log.error("%s", reason)
        self.held[run_id] = Held(hosted, reason, code)

    def recover(self, run_id: str, action: Literal["continue", "stop"]) -> HostedRun | None:
        """An admin's choice for a held run: continue it under a new noise epoch (refused when
        that would exceed its budget) or stop it (read-only from now on); then it is served.
        Stopping a run the store does not hold forgets it (None)."""
        self._check_ready()
        held = self.held.get(run_id)
        if held is None:
            self.get(run_id)  # 404 for an unknown or deleted run
            raise Refusal(409, "not_held", f"run {run_id} is served: its store is not behind")
        mark = self.highwater.get(run_id)  # None: lost, nothing known of what was published
        if mark is not None and mark.deleted:
            raise Refusal(409, "deleted", f"run {run_id} was deleted before its store went back:"
                          " delete it again")
        hosted = held.hosted
        if hosted is None:
            if action == "continue":
                raise Refusal(409, "gone", f"the store has no run {run_id}: nothing to continue;"
                              " stop it to forget it")
            self.highwater.set(run_id, Mark(deleted=True))
            self.deleted.add(run_id)
            del self.held[run_id]
            log.warning("run %s forgotten by an admin: its store had lost it", run_id)
            return None
        if action == "stop":
            self.store.stop_run(run_id)
            hosted.stopped = True
            self.highwater.set(run_id, Mark(hosted.epoch, hosted.reported, stopped=True))
            log.warning("run %s stopped by an admin at %d reports", run_id, hosted.reported)
        else:
            self._continue(hosted, mark)
        hosted.publish(hosted.capture(time.time()))  # committed above: public reads see it
        del self.held[run_id]
        self.runs[run_id] = hosted
        return hosted

    def _continue(self, hosted: HostedRun, mark: Mark | None) -> None:
        """Start the noise epochs that make the run's next releases fresh, within its budget
        (with its mark lost, the store's epoch is charged as if published to its end)."""
        if not noise_epochs.supported(hosted.run):
            raise Refusal(
                409, "budget",
                f"run {hosted.id} cannot continue under fresh noise: its algorithm"
                f" ({hosted.config.algo!r}) draws its JDP noise outside the continual"
                " counters that noise epochs redraw; stop it (its releases so far stay served)"
                " or delete it",
            )
        if mark is None:  # lost: nothing is known of what was published past the store
            epochs, published = [hosted.epoch + 1], noise_epochs.UNKNOWN
        else:
            epochs = list(range(hosted.epoch + 1, max(mark.epoch, hosted.epoch) + 2))
            published = mark.reported if mark.epoch == hosted.epoch else noise_epochs.UNKNOWN
        fits, total = noise_epochs.fits(hosted.run, epochs, published)
        if not fits:
            unknown = (" (its mark is lost: every release of its noise epoch is charged as"
                       " published)" if mark is None else "")
            raise Refusal(
                409, "budget",
                f"continuing run {hosted.id} under fresh noise re-releases the"
                f" {hosted.reported} users it still counts{unknown}: its total would be"
                f" epsilon = {total:.6g}, above its budget of {hosted.config.epsilon:g}; stop"
                " it (its releases so far stay served) or delete it",
            )
        self.store.start_noise_epochs(hosted.id, epochs, hosted.reported, published)
        hosted.start_noise_epochs(epochs, published)
        self.highwater.set(hosted.id, Mark(hosted.epoch, hosted.reported))
        log.warning("run %s continued by an admin at %d reports under noise epoch %d",
                    hosted.id, hosted.reported, hosted.epoch)

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
        if run_id in self.held:
            raise Refusal(503, self.held[run_id].code, self.held[run_id].reason)
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
        """Refuse runs this server cannot hold, or whose reports could exceed the body limit.

        The size of a run is the entries of its largest released statistic family (for
        DP-UCBVI: N(s,a,s'), H*S*A*S), as its algorithm declares them.
        """
        families = bind(config).families()
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
        size = max_report_bytes(config)
        if size > self.max_body_bytes:
            raise Refusal(
                422,
                "too_large",
                f"a report of this run may carry {report_numbers(config)} numbers (up to {size}"
                f" bytes as JSON arrays), above this server's body limit of"
                f" {self.max_body_bytes} bytes (PRIVRL_MAX_BODY_BYTES)",
            )

    def create(self, config: RunConfig, sequential: bool, seed: int | None = None,
               credentials: bool = False) -> HostedRun:
        """A new run with a fresh unguessable id (planned and persisted before it is listed).

        `seed` is the admin's seed for a reproducible experiment; without one the run's noise
        seed comes from the OS CSPRNG. Either way it is a secret: no route or log shows it.
        """
        try:  # what the create schema states: the algorithm exists, with this mode and knobs
            config = effective(config)  # stored and shown as runs use it (the preset's schedule)
        except ValueError as exc:
            raise Refusal(422, "schema", f"invalid request: {exc}") from None
        self._check_ready()
        run_id = secrets.token_hex(8)
        while self.store.run_exists(run_id):  # pragma: no cover - 64 random bits
            run_id = secrets.token_hex(8)
        try:  # the algorithm's own rules (`bind`), the server's limits, then the learner
            self.check_size(config)
            hosted = HostedRun.create(
                run_id,
                config,
                sequential,
                self.store,
                self.limits,
                time.time(),
                secret_seed() if seed is None else seed,
                self.highwater,
                credentials,
            )
        except (ValueError, ArithmeticError) as exc:
            raise Refusal(422, "invalid_run", f"cannot create this run: {exc}") from exc
        except OSError as exc:
            log.exception("could not write the high-water mark of a new run")
            raise Refusal(503, "store", "the server could not record the new run's high-water"
                          " mark; retry") from exc
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
        self.highwater.set(run_id, Mark(deleted=True))
        self.deleted.add(run_id)
        self.held.pop(run_id, None)
        hosted = self.runs.pop(run_id, None)
        if hosted is not None:
            hosted.deleted = True
        self.failed.pop(run_id, None)
        log.info("run %s deleted", run_id)

    def live(self) -> list[HostedRun]:
        """Live runs in creation order."""
        self._check_ready()
        return sorted(self.runs.values(), key=lambda h: (h.row.created_at, h.id))
