"""What a user process keeps to stay private: its seed, a nonce counter and the episodes it played.

An LDP user's noise must not depend on anything the server sends: a server that can make a user
repeat its noise can subtract it, and one that can make it replay an episode gets the same
trajectory twice under independent noise. So each report is randomized from
`privrl.seeding.noise_generator(seed, nonce)` with a nonce from the user's own counter, and a
user refuses an episode index it has already played.

- No seed given (the default): the process draws its own seed from the OS CSPRNG and keeps
  both in memory. The seed dies with the process, so nothing can come round again; not even the
  processes of one swarm share it.
- A seed given (reproducible simulation): every process with that seed shares one folder in the
  user's state directory (`$PRIVRL_STATE_DIR`, default `$XDG_STATE_HOME/privrl` or
  `~/.local/state/privrl`), named by a digest of the seed (never the seed itself): a counter
  file from which each process reserves blocks of nonces under a lock, and per run a bitmap of
  the episodes played. A restarted user, or another process with the same seed, goes on after
  the last nonce reserved and refuses the episodes already played, so neither a rollback nor a
  rewritten episode index can replay its noise or its trajectory. A fresh state directory starts
  at nonce 0: a sequential run then randomizes exactly as the in-process runner does
  (`privrl.run.user_episode`, where nonce = episode).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from privrl.seeding import derived_seed, secret_seed

STATE_DIR_ENV = "PRIVRL_STATE_DIR"
NONCE_BLOCK = 1024  # nonces a process reserves in one locked, synced write


def state_dir() -> Path:
    """Where user processes keep what must outlive them ($PRIVRL_STATE_DIR, else XDG's)."""
    if os.environ.get(STATE_DIR_ENV, "").strip():
        return Path(os.environ[STATE_DIR_ENV])
    xdg = os.environ.get("XDG_STATE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "privrl"


def seed_folder(seed: int, directory: Path | None = None) -> Path:
    """The state folder of `seed`, named by a digest that does not reveal the seed."""
    digest = derived_seed(seed, "user-state").to_bytes(16, "little").hex()
    return (directory or state_dir()) / "users" / digest


class _Locked:
    """An open file descriptor held under an exclusive `flock` (created 0600 if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the lock


class UserState:
    """One user process's seed, nonce counter and record of played episodes."""

    def __init__(self, seed: int, folder: Path | None) -> None:
        """`folder`: the shared state of a given seed; None: all in memory (a seed of its own)."""
        self.seed, self.folder = int(seed), folder
        self._next = self._end = 0
        self.started: int | None = None  # the first nonce this process took
        self._played: dict[str, bytearray] = {}  # in memory: a bitmap of episodes per run

    @classmethod
    def of(cls, seed: int | None) -> UserState:
        """A given simulation seed keeps its state in its folder; None draws a seed of its own."""
        if seed is None:
            return cls(secret_seed(), None)
        return cls(seed, seed_folder(seed))

    def take_nonce(self) -> int:
        """The next nonce: never one taken before with this seed (by any process, for a seed
        with a state folder)."""
        if self._next == self._end:
            self._reserve()
        nonce = self._next
        self._next += 1
        if self.started is None:
            self.started = nonce
        return nonce

    def first_play(self, run_id: str, episode: int) -> bool:
        """Record that this user plays `episode` of `run_id`; False if it already had."""
        byte, bit = divmod(episode, 8)
        if self.folder is None:
            bitmap = self._played.setdefault(run_id, bytearray())
            if byte >= len(bitmap):
                bitmap.extend(bytes(byte + 1 - len(bitmap)))
            if bitmap[byte] >> bit & 1:
                return False
            bitmap[byte] |= 1 << bit
            return True
        name = hashlib.sha256(run_id.encode()).hexdigest()[:32]
        with _Locked(self.folder / f"played-{name}") as fd:
            old = os.pread(fd, 1, byte)
            value = old[0] if old else 0
            if value >> bit & 1:
                return False
            os.pwrite(fd, bytes([value | 1 << bit]), byte)
        return True

    def _reserve(self) -> None:
        """Reserve the next NONCE_BLOCK nonces (from the counter file, under its lock)."""
        if self.folder is None:
            self._end = self._next + NONCE_BLOCK
            return
        path = self.folder / "nonce"
        with _Locked(path) as fd:
            text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            if text and not text.isdigit():
                raise RuntimeError(f"the nonce counter {path} is corrupt ({text[:20]!r}): this"
                                   " seed's noise cannot be kept fresh; use another seed")
            start = int(text) if text else 0
            end = start + NONCE_BLOCK
            # in place, never truncated first: the new number is as long or longer, so a crash
            # leaves the old count or the new one, never an empty file that restarts at 0
            os.pwrite(fd, f"{end}\n".encode(), 0)
            os.fsync(fd)  # durable before any nonce of the block is used
        self._next, self._end = start, end
