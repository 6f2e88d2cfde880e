"""The high-water mark: what the server has published of each run, kept outside its database.

A store can go backwards: a lost `-wal` after a crash, a restored backup, `synchronous=NORMAL`
and a power loss. Replaying it would publish, at counts already published, other data under the
same counter-based noise: the difference of the two releases is exact. So every grouped commit
also advances, and syncs, a small JSON file beside the database (`<db>.highwater.0|1`) with
each run's noise epoch and reports published; a run whose store is behind its mark is held at start
(503 with the reason, /readyz not ready) until an admin continues it under a new noise epoch or
stops it. Marks only go up, except by an admin's choice. The file holds counts, never a seed.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path


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


class HighWater:
    """The marks of every run, kept in two files `<db>.highwater.0` and `.1` written in turn.

    Each write overwrites the older file in place and fdatasyncs it (one sync, no rename and no
    directory sync: a rename-based write cost 2.5 times a COMMIT here); each file holds a
    sequence number and a checksum, so a write torn by a crash leaves the other file, one step
    older, as the mark (never ahead of the store, which committed before)."""

    def __init__(self, base: Path) -> None:
        self.paths = (base.with_name(base.name + ".0"), base.with_name(base.name + ".1"))
        self._lock = threading.Lock()
        self.marks: dict[str, Mark] = {}
        self.seq = 0
        found = [(seq, marks) for seq, marks in map(_read, self.paths) if seq >= 0]
        if not found and any(p.exists() and p.stat().st_size for p in self.paths):
            raise RuntimeError(
                f"the high-water mark {self.paths[0]} is unreadable: without it a store that went"
                " backwards cannot be told; restore it or remove it knowingly"
            )
        if found:
            self.seq, self.marks = max(found, key=lambda f: f[0])
        self._fds: list[int] = []

    @classmethod
    def beside(cls, db: Path) -> HighWater:
        """The mark files of the database `db`."""
        return cls(db.with_name(db.name + ".highwater"))

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
        data = json.dumps({"seq": self.seq, "crc": zlib.crc32(body.encode()), "marks": body})
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


def _read(path: Path) -> tuple[int, dict[str, Mark]]:
    """(sequence number, marks) of one mark file; (-1, {}) when missing, torn or corrupt."""
    try:
        data = json.loads(path.read_text())
        body = data["marks"]
        if zlib.crc32(body.encode()) != data["crc"]:
            return -1, {}
        return int(data["seq"]), {k: Mark(**v) for k, v in json.loads(body).items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return -1, {}
