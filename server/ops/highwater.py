"""The high-water mark: what the server has published of each run, kept outside its database.

A store can go backwards: a lost `-wal` after a crash, a restored backup, `synchronous=NORMAL`
and a power loss. Replaying it would publish, at counts already published, other data under the
same counter-based noise: the difference of the two releases is exact. So every grouped commit
also advances, and syncs, a small JSON file beside the database (`<db>.highwater.0|1`) with
each run's noise epoch and reports published; a run whose store is behind its mark is held at start
(503 with the reason, /readyz not ready) until an admin continues it under a new noise epoch or
stops it. Marks only go up, except by an admin's choice. The file holds counts, never a seed.

It fails closed. Every run has a mark from its creation on (written before the run is stored),
and the file names the database it belongs to (`Store.identity`). So a store holding a run that
the mark does not know is held too: the files deleted, truncated to 0 bytes, unreadable (no
copy with a valid checksum) or written for another database (`state`) are all a store whose
mark is lost, not a first start (a new database holds no run). What it cannot see is a mark
restored together with its database from the same backup: the two agree (see the persistence
section of the server's documentation for the operator's side).
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class Mark:
    """What was published of one run: its noise epoch and reports counted in that epoch."""

    epoch: int = 0
    reported: int = 0
    stopped: bool = False  # an admin stopped it (a store that forgot this is behind)
    deleted: bool = False  # it was deleted (a store where it lives is behind)

    def ahead_of(self, epoch: int, reported: int, stopped: bool) -> str | None:
        """Why a store at (`epoch`, `reported`, `stopped`) is behind this mark, or None."""
        if self.deleted:
            return "the run was deleted, but the store still holds it"
        if self.epoch > epoch:
            return (f"the server published noise epoch {self.epoch}, the store is at epoch"
                    f" {epoch}")
        if self.epoch == epoch and self.reported > reported:
            return (f"the server published {self.reported} reports, the store holds only"
                    f" {reported}")
        if self.stopped and not stopped:
            return "the run was stopped, but the store does not say so"
        return None


MarkState = Literal["ok", "missing", "unreadable", "foreign"]


class HighWater:
    """The marks of every run, kept in two files `<db>.highwater.0` and `.1` written in turn.

    Each write overwrites the older file in place and fdatasyncs it (one sync, no rename and no
    directory sync: a rename-based write cost 2.5 times a COMMIT here); each file holds a
    sequence number, the identity of its database and a checksum, so a write torn by a crash
    leaves the other file, one step older, as the mark (never ahead of the store, which
    committed before).

    `state` says what was found: "ok", "missing" (no file, or only empty ones), "unreadable"
    (no copy with a valid checksum) or "foreign" (written for another database than `store`:
    its marks are not this store's and are dropped). Only "ok" marks are compared with the
    store; otherwise every run the store holds is one the mark does not know."""

    def __init__(self, base: Path, store: str | None = None) -> None:
        """The marks at `base` (.0, .1) of the database whose identity is `store` (None: keep
        the identity the files hold, as a tool reading or editing them does)."""
        self.paths = (base.with_name(base.name + ".0"), base.with_name(base.name + ".1"))
        if not base.parent.is_dir():
            raise FileNotFoundError(f"directory of the high-water mark {base} does not exist")
        self._lock = threading.Lock()
        self.marks: dict[str, Mark] = {}
        self.seq = 0
        self.store = store
        self.found: str | None = None  # the identity the files hold (None: none, or older)
        self.state: MarkState = "missing"
        copies = [c for c in map(_read, self.paths) if c is not None]
        if copies:
            self.seq, self.found, self.marks = max(copies, key=lambda c: c[0])
            self.state = "ok"
            if store is None:
                self.store = self.found
            elif self.found is not None and self.found != store:
                self.state, self.marks = "foreign", {}  # the next write (higher seq) is ours
        elif any(p.exists() and p.stat().st_size for p in self.paths):
            self.state = "unreadable"
        self._fds: list[int] = []

    def lost(self) -> str:
        """Why a run the store holds has no mark (each file by name)."""
        files = f"{self.paths[0]} and {self.paths[1].name}"
        if self.state == "missing":
            return f"its high-water mark is lost: {files} are missing or empty"
        if self.state == "unreadable":
            return (f"its high-water mark is lost: neither {files} has a valid checksum (not a"
                    " write torn by a crash, which leaves the other)")
        if self.state == "foreign":
            return (f"its high-water mark is lost: {files} were written for another database"
                    f" (store {self.found}, this one is {self.store})")
        return f"its high-water mark is lost: {files} hold no mark of it"

    @classmethod
    def beside(cls, db: Path, store: str | None = None) -> HighWater:
        """The mark files of the database `db` (its identity `store`, if known)."""
        return cls(db.with_name(db.name + ".highwater"), store)

    def get(self, run_id: str) -> Mark | None:
        """The mark of one run, if any was written."""
        with self._lock:
            return self.marks.get(run_id)

    def advance(self, published: Mapping[str, tuple[int, int]]) -> None:
        """Raise each run's mark to (epoch, reported) where that is higher; write if changed
        (called after each grouped commit, before any of its answers is sent)."""
        with self._lock:
            changed = False
            for run_id, (epoch, reported) in published.items():
                old = self.marks.get(run_id, Mark())
                if (epoch, reported) > (old.epoch, old.reported):
                    self.marks[run_id] = replace(old, epoch=epoch, reported=reported)
                    changed = True
            if changed:
                self._save()

    def set(self, run_id: str, mark: Mark) -> None:
        """An admin's choice: the run's mark is now `mark` (written before it is served)."""
        with self._lock:
            self.marks[run_id] = mark
            self._save()

    def save(self) -> None:
        """Write the marks again (a probe of the files while writes fail)."""
        with self._lock:
            self._save()

    def _save(self) -> None:
        """Overwrite the older file with the marks and the next sequence number, fdatasync."""
        if not self._fds:
            self._open()
        self.seq += 1
        body = json.dumps({k: asdict(v) for k, v in sorted(self.marks.items())})
        head = {} if self.store is None else {"store": self.store}
        data = json.dumps({"seq": self.seq, **head, "crc": _checksum(self.store, body),
                           "marks": body})
        fd = self._fds[self.seq % 2]
        raw = data.encode()
        os.pwrite(fd, raw, 0)
        os.ftruncate(fd, len(raw))
        os.fdatasync(fd)

    def _open(self) -> None:
        """Open (creating) both files, and make their names durable once."""
        created = not all(p.exists() for p in self.paths)
        self._fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) for p in self.paths]
        if created:
            folder = os.open(self.paths[0].parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)

    def close(self) -> None:
        """Close the files."""
        with self._lock:
            for fd in self._fds:
                os.close(fd)
            self._fds = []


def _checksum(store: str | None, body: str) -> int:
    """The CRC-32 of a file's identity and marks (of the marks alone in files without one)."""
    return zlib.crc32((body if store is None else f"{store}\n{body}").encode())


def _read(path: Path) -> tuple[int, str | None, dict[str, Mark]] | None:
    """(sequence number, identity of its database, marks) of one mark file; None when it is
    missing, empty, torn or corrupt."""
    try:
        data = json.loads(path.read_text())
        body, store = data["marks"], data.get("store")
        if not isinstance(store, str | None) or _checksum(store, body) != data["crc"]:
            return None
        return int(data["seq"]), store, {k: Mark(**v) for k, v in json.loads(body).items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
