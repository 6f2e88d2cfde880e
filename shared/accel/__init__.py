"""Optional compiled kernels (numba): one switch for the whole package.

Every kernel here has a pure-numpy twin where it is used, and both give the same numbers (the
tests run both). Kernels compile with `cache=True` (numba's cache: next to this package when it
is writable, else numba's per-user cache dir, or `NUMBA_CACHE_DIR`), about 20 s of CPU once per
machine; later processes load them in about a second. Nothing here imports numba until a kernel
is first needed.

numba checks only the file of the kernel it loads from its cache, not its callees' files, so a
kernel whose callee changed in another module would load with the old callee: the first process
to import a kernel after any source here changed deletes the package's cached kernels first
(`drop_stale_cache`).

`PRIVRL_NUMBA` says when the compiled path is used:

* unset or "auto" (default): once the kernels are compiled. Until then the numpy path runs (the
  same numbers) while one background process (`python -m privrl.accel`) compiles them, so no
  process waits for numba on a cold machine; a long in-process run switches over when they are
  ready (`privrl.run.run_in_process`).
* "1": always; the first use in a process compiles what is not cached yet (and waits for it).
* "0": never.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV_SWITCH = "PRIVRL_NUMBA"
RECHECK_SECONDS = 0.5  # how often a process waiting for the background compilation looks again
STALE_SECONDS = 600.0  # a warm-up's lock older than this is taken to be dead

_ready = False  # the kernels were found compiled: stays true for the life of the process
_last_check = -RECHECK_SECONDS
_warm_up_started = False
_cache_checked = False  # drop_stale_cache ran in this process


@functools.cache
def _numba_installed() -> bool:
    """Whether numba can be imported (looked up once, without importing it)."""
    return importlib.util.find_spec("numba") is not None


def mode() -> str:
    """PRIVRL_NUMBA as one of "auto", "1" and "0" (anything else is "auto")."""
    value = os.environ.get(ENV_SWITCH, "auto")
    return value if value in ("0", "1") else "auto"


def available() -> bool:
    """Whether the compiled path can be used at all: numba installed, PRIVRL_NUMBA not 0."""
    return mode() != "0" and _numba_installed()


def enabled() -> bool:
    """Whether the compiled path is used now: available, and (unless PRIVRL_NUMBA is 1) the
    kernels already compiled; if they are not, a background compilation is started once and
    the numpy path runs meanwhile."""
    switch = mode()  # one look at the environment: this is asked on hot paths
    if switch == "0" or not _numba_installed():
        return False
    return switch == "1" or _compiled()


def _compiled() -> bool:
    """Whether a warm-up left the kernels compiled (checked at most every RECHECK_SECONDS);
    if not, start one in the background."""
    global _ready, _last_check
    if _ready:
        return True
    now = time.monotonic()
    if now - _last_check < RECHECK_SECONDS:
        return False
    _last_check = now
    if marker().exists():
        _ready = True
        return True
    warm_up_in_background()
    return False


@functools.cache
def _key() -> str:
    """What the cached kernels depend on: their sources, numba, numpy, Python and the machine."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    for package in ("numba", "numpy"):
        digest.update(importlib.metadata.version(package).encode())
    digest.update(f"{sys.version}|{platform.machine()}".encode())
    return digest.hexdigest()[:16]


def _state_dir() -> Path:
    """Where the ready marker and the warm-up's lock live: NUMBA_CACHE_DIR when set, else this
    package's __pycache__ when writable (numba's cache is there too), else a per-user dir."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    here = Path(__file__).parent / "__pycache__"
    if os.access(here if here.exists() else here.parent, os.W_OK):
        return here
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "privrl"


def marker() -> Path:
    """The file a finished warm-up writes: the kernels of this version are in the cache."""
    return _state_dir() / f"privrl-kernels-{_key()}.ready"


def mark_ready() -> None:
    """Record that every kernel is compiled and cached (written atomically)."""
    path = marker()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
        tmp.write(f"{sys.executable}\n")
    os.replace(tmp.name, path)


def _take_lock(lock: Path) -> bool:
    """Create `lock` (holding this process's pid) unless a live process holds it: False then.
    A lock older than STALE_SECONDS is taken to be a dead process's and taken over. Atomic
    (O_EXCL), so of two processes at once only one gets it; OSError: the directory is not
    writable."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        if time.time() - lock.stat().st_mtime > STALE_SECONDS:
            lock.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(str(os.getpid()))
    return True


def drop_stale_cache(dispatcher: object) -> None:
    """Delete numba's cached kernels of this package once per version of their sources, before
    any is loaded: numba checks only the file of the function it loads, so a kernel whose
    callee in another module changed (an editable install after `git pull`) would run the old
    callee. `dispatcher` is any kernel here: its cache directory is theirs. The first process
    to see a new version deletes (holding a lock file); the others wait for it to finish."""
    global _cache_checked
    if _cache_checked:
        return
    _cache_checked = True
    directory = getattr(getattr(dispatcher, "_cache", None), "cache_path", None)
    fresh = _state_dir() / f"privrl-kernels-{_key()}.fresh"
    if directory is None or fresh.exists():
        return
    lock = fresh.with_suffix(".purging")
    try:
        taken = _take_lock(lock)
    except OSError:
        return  # no writable state dir: nothing was cached there either
    if not taken:  # another process is deleting: wait until it is done
        deadline = time.monotonic() + 30.0
        while lock.exists() and not fresh.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    try:
        modules = {path.stem for path in Path(__file__).parent.glob("*.py")}
        for path in Path(directory).glob("*.nb[ic]"):
            if path.name.split(".", 1)[0] in modules:
                path.unlink(missing_ok=True)
        fresh.touch()
    finally:
        lock.unlink(missing_ok=True)


def warm_up_in_background() -> bool:
    """Start `python -m privrl.accel` detached unless this process already did or another
    warm-up holds the lock; True when one was started."""
    global _warm_up_started
    if _warm_up_started:
        return False
    _warm_up_started = True
    lock = marker().with_suffix(".lock")
    try:
        if not _take_lock(lock):
            return False  # another process is compiling them
    except OSError:
        return False  # no writable cache: the numpy path goes on
    try:
        subprocess.Popen([sys.executable, "-m", "privrl.accel", "--lock", str(lock)],
                         env={**os.environ, ENV_SWITCH: "1"}, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    except OSError:
        lock.unlink(missing_ok=True)  # no process could start: let a later one try
        return False
    return True
