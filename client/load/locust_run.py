"""A headless Locust run as a child process, read back from its CSV files (Locust itself is only
imported by that child, never here)."""

from __future__ import annotations

import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privrl.client.procs import child_env

HERE = Path(__file__).resolve().parent
EPISODES_FILE = HERE / "locustfile.py"  # EpisodeUser: real episodes
HEALTHZ_FILE = HERE / "locust_healthz.py"  # HealthzUser: the ceiling


class LocustError(RuntimeError):
    """Locust is missing, or its run failed (the message says how)."""


def require_locust() -> None:
    """A clear error when the optional Locust is not installed."""
    if importlib.util.find_spec("locust") is None:
        raise LocustError("Locust is not installed: pip install 'privrl[load]' (or use"
                          " --generator swarm)")


def read_samples(paths: Sequence[Path]) -> dict[str, Any]:
    """Every process's request samples: per endpoint count and p50/p95/p99/max ms, the summed
    per-process rates of answered requests (overall and per endpoint: a refused or failed
    request is an error, never throughput), failures by kind."""
    import numpy as np
    from privrl.client.load.report import latency

    names: dict[str, list[float]] = {}
    rates: dict[str, float] = {}
    errors: dict[str, int] = {}
    for path in paths:
        rows = json.loads(path.read_text())
        if not rows:
            continue
        ended = np.array([r[0] for r in rows])
        window = max(float(ended.max() - (ended.min() - rows[int(ended.argmin())][2] / 1e3)),
                     1e-9)
        for ended_at, name, ms, error in rows:
            del ended_at
            names.setdefault(name, []).append(ms / 1e3)
            if error:
                errors[f"{name} {error}"] = errors.get(f"{name} {error}", 0) + 1
                continue
            rates[name] = rates.get(name, 0.0) + 1 / window
            rates["all"] = rates.get("all", 0.0) + 1 / window
    return {"latency_ms": {n: latency(np.array(v)) for n, v in names.items()},
            "requests_per_second": rates, "errors_by_kind": errors}


def run_locust(locustfile: Path, host: str, users: int, seconds: float, processes: int,
               extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
               stop_timeout: float = 30.0) -> dict[str, Any]:
    """`processes` independent `locust --headless` processes sharing `users` users (each all
    spawned at once) for `seconds`; their merged samples and the CPU seconds they used.

    Independent processes rather than Locust's own --processes: each writes its samples when it
    quits, after its users finished their episode, so none are lost in a hand-over to a master."""
    require_locust()
    from privrl.client.load.swarm import split

    processes = max(1, min(processes, users))
    with tempfile.TemporaryDirectory(prefix="privrl-locust-") as tmp:
        samples = [Path(tmp) / f"samples-{i}.json" for i in range(processes)]
        logs = [Path(tmp) / f"locust-{i}.log" for i in range(processes)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        procs = []
        for n, path, log in zip(split(users, processes), samples, logs, strict=True):
            cmd = [sys.executable, "-P", "-m", "locust", "-f", str(locustfile), "--headless",
                   "-u", str(n), "-r", str(n), "--privrl-seconds", f"{seconds:g}",
                   "--stop-timeout", f"{stop_timeout:g}", "--host", host, "--only-summary",
                   "--loglevel", "WARNING", "--privrl-samples", str(path), *extra]
            with log.open("wb") as out:
                procs.append(subprocess.Popen(cmd, env=child_env(env), stdout=out,
                                              stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL))
        try:
            for proc in procs:
                proc.wait(timeout=seconds + stop_timeout + 120)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        missing = [i for i, path in enumerate(samples)
                   if not path.exists() or path.read_text().strip() == "[]"]
        if missing:
            tail = " | ".join(logs[missing[0]].read_text(errors="replace").splitlines()[-3:])
            raise LocustError(f"locust process {missing[0]} made no request (exit code "
                              f"{procs[missing[0]].returncode}): {tail}")
        out = read_samples(samples)
    out["cpu_seconds"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    out["processes"] = processes
    return out
