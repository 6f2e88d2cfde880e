"""DP-UCBVI's compiled kernels (numba, `cache=True`), compiled in the calling process on first use.

numba keeps the machine code in its cache: next to this package when it is writable, else in
numba's per-user cache dir, or in NUMBA_CACHE_DIR. The first process on a machine compiles them
(about 30 s on 2 cores) and says so on stderr as it goes, "compiling ..., first run only", one
line per kernel; later processes load them in well under a second, silently. `privrl warmup`
(or `python -m privrl.accel`) compiles them ahead of time, and `privrl demo`, `privrl serve` and
the server's readiness load them before anything waits on them.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

# the kernels `privrl.accel.kernels` compiles at import, one signature each (its __all__)
KERNELS = ("break_ties", "new_model", "plan_replicas", "policy_values", "rollout", "run_episodes")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _progress(say: Callable[[str], None]) -> Any:
    """A numba compile-event listener that reports each kernel compiled (loading one from the
    cache compiles nothing, so a warm cache says nothing)."""
    from numba.core import event

    class Progress(event.Listener):
        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.done: list[str] = []
            self.said = False

        @staticmethod
        def _name(ev: Any) -> str | None:
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            name = getattr(func, "__name__", None)
            return name if name in KERNELS else None

        def on_start(self, ev: Any) -> None:
            if self._name(ev) is not None and not self.said:
                self.said = True
                say("privrl: compiling DP-UCBVI's kernels, first run only (numba caches them;"
                    f" about 30 s on 2 cores): {len(KERNELS)} kernels")

        def on_end(self, ev: Any) -> None:
            name = self._name(ev)
            if name is not None:
                self.done.append(name)
                say(f"privrl: compiled {name} ({len(self.done)}/{len(KERNELS)},"
                    f" {time.perf_counter() - self.started:.0f} s)")

    return Progress()


@functools.cache
def load() -> ModuleType:
    """`privrl.accel.kernels`, compiled (or loaded from numba's cache) once per process, with
    one progress line per kernel on stderr while compiling."""
    from numba.core import event

    with event.install_listener("numba:compile", _progress(_say)):
        from privrl.accel import kernels as module
    compiled = [name for name in sorted(module.__all__)
                if sum(getattr(module, name).stats.cache_misses.values())]
    if compiled:  # timed by the module's own import, whoever imported it first
        _say(f"privrl: compiled DP-UCBVI's kernels ({', '.join(sorted(compiled))}) in"
             f" {module.IMPORT_SECONDS:.1f} s; numba caches them for later processes")
    return module
