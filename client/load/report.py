"""A swarm's final report: counts, throughput, latency percentiles per endpoint, errors by kind,
a per-second timeline (`privrl users --report FILE`), and its figure (`--plot FILE`).

`latency_ms` is every request on the wire (from the moment a connection slot is free to the last
byte of the answer); `user_latency_ms` is what a user waited for its successful claim or report,
the wait for a free slot in its process and any retries (and the pauses before them) included.
Throughput counts answered requests only: a request refused (429, 503) or failed is an error,
never throughput (`answered`)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from privrl.client.load.meter import ENDPOINTS, FLOW

QUANTILES = (50, 95, 99)


def _ms(seconds: np.ndarray, q: float) -> float:
    return float(1e3 * np.percentile(seconds, q)) if seconds.size else math.nan


def latency(seconds: np.ndarray) -> dict[str, float]:
    """Count, p50/p95/p99 and max of request latencies, in milliseconds."""
    out: dict[str, float] = {"count": int(seconds.size)}
    out.update({f"p{q}_ms": _ms(seconds, q) for q in QUANTILES})
    out["max_ms"] = float(1e3 * seconds.max()) if seconds.size else math.nan
    return out


def merge(parts: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Every process's request samples in one set of arrays."""
    return {k: np.concatenate([p["meter"][k] for p in parts]) for k in parts[0]["meter"]}


def answered(samples: dict[str, np.ndarray]) -> np.ndarray:
    """Which requests were answered (status < 400, or a claim's flow-control 409/410): the
    others (refused with 429/503, failed, no answer) are errors, not throughput."""
    status = samples["status"]
    flow = (samples["endpoint"] == ENDPOINTS.index("claim")) & np.isin(status, list(FLOW))
    return ((status > 0) & (status < 400)) | flow


def timeline(samples: dict[str, np.ndarray], start: float, bucket: float = 1.0
             ) -> dict[str, list[float]]:
    """Per `bucket` seconds: acknowledged episodes/s, answered and refused (or failed)
    requests/s, p50/p99 ms per endpoint."""
    t = samples["ended"] - start
    n = max(1, int(math.ceil(t.max() / bucket))) if t.size else 1
    idx = np.clip((t // bucket).astype(int), 0, n - 1)
    acks = (samples["endpoint"] == ENDPOINTS.index("report")) & (samples["status"] == 200)
    ok = answered(samples)
    out: dict[str, list[float]] = {
        "t": (bucket * (np.arange(n) + 0.5)).tolist(),
        "episodes_per_second": (np.bincount(idx[acks], minlength=n) / bucket).tolist(),
        "requests_per_second": (np.bincount(idx[ok], minlength=n) / bucket).tolist(),
        "errors_per_second": (np.bincount(idx[~ok], minlength=n) / bucket).tolist(),
    }
    for code, name in enumerate(ENDPOINTS):
        mask = samples["endpoint"] == code
        if not mask.any():
            continue
        for q in (50, 99):
            out[f"{name}_p{q}_ms"] = [_ms(samples["seconds"][mask & (idx == b)], q)
                                      for b in range(n)]
    return out


def swarm_report(parts: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """The JSON report of a finished swarm (`parts`: what every process sent back)."""
    sums = [p["summary"] for p in parts]
    samples = merge(parts)
    start = min(s["started_at"] for s in sums)
    seconds = max(s["ended_at"] for s in sums) - start
    errors: Counter[str] = Counter()
    for p in parts:
        errors.update(p["errors"])
    flow = {name: errors.pop(f"claim {code}", 0) for code, name in FLOW.items()}
    acked = sum(s["reported"] for s in sums)
    rate = (lambda n: n / seconds if seconds > 0 else math.nan)  # noqa: E731
    return {
        **settings,
        "run_id": sums[0]["run_id"],
        "acknowledged": acked,
        "duplicates": sum(s["duplicates"] for s in sums),
        "refused": sum(s["refused"] for s in sums),
        "finished": any(s["finished"] for s in sums),
        "seconds": seconds,
        "episodes_per_second": rate(acked),
        "requests": int(samples["ended"].size),
        "requests_per_second": rate(int(answered(samples).sum())),
        "latency_ms": {name: latency(samples["seconds"][samples["endpoint"] == code])
                       for code, name in enumerate(ENDPOINTS)
                       if (samples["endpoint"] == code).any()},
        "user_latency_ms": {
            name: latency(np.array([x for s in sums for x in s[f"{name}_seconds"]]))
            for name in ("claim", "report") if any(s.get(f"{name}_seconds") for s in sums)},
        "errors": sum(errors.values()),
        "errors_by_kind": dict(sorted(errors.items())),
        **flow,
        "retries": sum(s.get("retries", 0) for s in sums),
        "report_bytes_max": max((s["report_bytes_max"] for s in sums), default=0),
        "generator_cpu_seconds": sum(p.get("cpu_seconds", 0.0) for p in parts),
        "user_errors": [e for s in sums for e in s["errors"]][:20],
        "timeline": timeline(samples, start),
    }


def one_line(report: dict[str, Any]) -> str:
    """The report in one line (what `privrl users` prints at the end)."""
    def p50_99(v: dict[str, float]) -> str:
        return f"{v['p50_ms']:.1f}/{v['p99_ms']:.1f} ms"

    waited = ", ".join(f"{name} {p50_99(v)}" for name, v in report["user_latency_ms"].items())
    wire = ", ".join(f"{name} {p50_99(v)}" for name, v in report["latency_ms"].items())
    errors = ", ".join(f"{k}: {v}" for k, v in report["errors_by_kind"].items()) or "none"
    return (f"run {report['run_id']}: {report['acknowledged']} episodes acknowledged "
            f"({report['duplicates']} duplicates, {report['refused']} refused) in "
            f"{report['seconds']:.1f} s by {report['processes']} process(es): "
            f"{report['episodes_per_second']:.1f} episodes/s, "
            f"{report['requests_per_second']:.0f} answered requests/s; users waited p50/p99 "
            f"{waited or 'nothing'} ({report['retries']} retries, "
            f"{report['claim_waits_409']} claim waits 409); on the wire p50/p99 {wire};"
            f" errors: {errors}" + (", run finished" if report["finished"] else ""))


def plot_report(report: dict[str, Any], path: Path) -> Path:
    """Throughput over time, p50/p99 latency per endpoint over time, and one line of text."""
    tl = report["timeline"]
    fig = Figure(figsize=(11, 4.2))
    left, right = fig.subplots(1, 2)
    left.plot(tl["t"], tl["episodes_per_second"], color="C0", marker="o", ms=3,
              label="episodes acknowledged / s")
    left.plot(tl["t"], tl["requests_per_second"], color="C1", ls="--", marker="s", ms=3,
              label="answered requests / s")
    if any(tl.get("errors_per_second", ())):
        left.plot(tl["t"], tl["errors_per_second"], color="C3", ls=":", marker="x", ms=3,
                  label="refused or failed requests / s")
    left.set(xlabel="seconds since the start", ylabel="per second", title="throughput")
    left.legend(fontsize=8)
    for i, name in enumerate(n for n in report["latency_ms"] if n != "other"):
        for q, style in ((50, "-"), (99, ":")):
            key = f"{name}_p{q}_ms"
            if key in tl:
                right.plot(tl["t"], tl[key], color=f"C{i}", ls=style, marker="o", ms=2,
                           label=f"{name} p{q}")
    right.set(xlabel="seconds since the start", ylabel="ms (log scale)", yscale="log",
              title="latency per endpoint (each second's requests)")
    right.legend(fontsize=8)
    fig.suptitle(f"run {report['run_id']}: {report['concurrency']} concurrent users, "
                 f"{report['processes']} process(es); {report['acknowledged']} acknowledged, "
                 f"{report['errors']} errors", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
