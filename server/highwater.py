"""The high-water mark: what the server has published of each run, kept outside its database.

A store can go backwards: a lost `-wal` after a crash, a restored backup, `synchronous=NORMAL`
and a power loss. Replaying it would publish, at counts already published, other data under the
same counter-based noise: the difference of the two releases is exact. So every grouped commit
also advances, and fsyncs, a small JSON file beside the database (`<db>.highwater`) with each
run's noise epoch and reports published; a run whose store is behind its mark is held at start
(503 with the reason, /readyz not ready) until an admin continues it under a new noise epoch or
stops it. Marks only go up, except by an admin's choice. The file holds counts, never a seed.
"""

from __future__ import annotations

import json
import os
import threading
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
    """The marks of every run, in the file `path` (rewritten whole, atomically, fsynced)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.marks: dict[str, Mark] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
                self.marks = {run_id: Mark(**fields) for run_id, fields in data.items()}
            except (ValueError, TypeError, AttributeError) as exc:
                raise RuntimeError(
                    f"the high-water mark {path} is unreadable ({exc}): without it a store that"
                    " went backwards cannot be told; restore it or remove it knowingly"
                ) from None

    @classmethod
    def beside(cls, db: Path) -> HighWater:
        """The mark file of the database `db`."""
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
        """Write the file again (a probe of its folder while writes fail)."""
        with self._lock:
            self._save()

    def _save(self) -> None:
        """Write the file anew: a temporary file, fsync, rename over, fsync the directory."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        text = json.dumps({k: asdict(v) for k, v in sorted(self.marks.items())})
        with open(tmp, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
