"""Prometheus metrics of one app (its own CollectorRegistry) and the request-latency middleware.

Labels carry run ids, route templates and refusal reasons only, never request contents, and
come from closed sets: a method outside METHODS is counted as `other`, a path no route matches
as `unmatched` (a client cannot make a series per request). No series moves by anything but a
count of requests (a series of body sizes would move with what a user did).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """Counters and gauges of reports, claims, policy versions and privacy spent."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reports_accepted = Counter(
            "privrl_reports_accepted", "Reports counted, per run", ["run"], registry=r
        )
        self.reports_duplicate = Counter(
            "privrl_reports_duplicate",
            "Retried reports answered with the stored Ack (not counted again), per run",
            ["run"],
            registry=r,
        )
        self.reports_refused = Counter(
            "privrl_reports_refused", "Reports refused, per reason", ["reason"], registry=r
        )
        self.claims = Counter("privrl_claims", "Claims handed out, per run", ["run"], registry=r)
        self.claims_refused = Counter(
            "privrl_claims_refused", "Claims refused, per reason", ["reason"], registry=r
        )
        self.commits = Counter(
            "privrl_store_commits", "SQLite transactions of grouped claims and reports",
            registry=r,
        )
        self.commit_groups = Counter(
            "privrl_store_commit_groups",
            "Claims and reports committed (divided by privrl_store_commits_total: the mean"
            " batch of one transaction)",
            registry=r,
        )
        self.latency = Histogram(
            "privrl_request_duration_seconds",
            "Request latency, per method and route template",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.responses = Counter(
            "privrl_responses",
            "HTTP answers, per method, route template and status (what an access log would"
            " count, without a log line per request)",
            ["method", "route", "status"],
            registry=r,
        )
        self._runs: dict[str, RunCounters] = {}

    def of_run(self, run_id: str) -> RunCounters:
        """One run's labelled counters, looked up once per run (prometheus_client's labels()
        validates and locks on every call: ~4 us, three times per episode)."""
        counters = self._runs.get(run_id)
        if counters is None:
            counters = self._runs[run_id] = RunCounters(
                **{name: getattr(self, name).labels(run_id) for name in RunCounters.names()})
        return counters

    def watch_runs(self, runs: Callable[[], Iterable[RunState]]) -> None:
        """Report the gauges of the runs `runs()` lists, read when /metrics is scraped."""
        self.registry.register(RunGauges(runs))

    def committed(self, groups: int) -> None:
        """Count one grouped commit of `groups` claims and reports."""
        self.commits.inc()
        self.commit_groups.inc(groups)

    def forget_run(self, run_id: str) -> None:
        """Drop a deleted run's labelled series."""
        self._runs.pop(run_id, None)
        for name in RunCounters.names():
            try:
                getattr(self, name).remove(run_id)
            except KeyError:
                pass

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)


@dataclass(frozen=True)
class RunCounters:
    """The labelled children of one run's counters (see `Metrics.of_run`): each field is named
    after the `Metrics` counter it is a child of, the one list of per-run series."""

    claims: Counter
    reports_accepted: Counter
    reports_duplicate: Counter

    @classmethod
    def names(cls) -> list[str]:
        """The per-run counters' attribute names on `Metrics`."""
        return [f.name for f in fields(cls)]


class RunState(Protocol):
    """What the run gauges read from a hosted run."""

    id: str
    version: int

    @property
    def reported(self) -> int:
        """Reports counted so far."""

    def epsilon_spent(self) -> float:
        """Total epsilon spent so far."""


class RunGauges(Collector):
    """Policy version, epsilon spent and reports counted per run, read at scrape time (setting
    gauges at every claim and report would cost each request an accountant's conversion)."""

    def __init__(self, runs: Callable[[], Iterable[RunState]]) -> None:
        self.runs = runs

    def collect(self) -> Iterator[Metric]:
        """The three gauge families, one sample per hosted run."""
        version = GaugeMetricFamily(
            "privrl_policy_version", "Newest policy version, per run", labels=["run"])
        epsilon = GaugeMetricFamily(
            "privrl_epsilon_spent", "Total epsilon spent so far, per run", labels=["run"])
        reported = GaugeMetricFamily(
            "privrl_episodes_reported", "Reports counted so far, per run", labels=["run"])
        for run in list(self.runs()):
            spent = run.epsilon_spent()
            version.add_metric([run.id], run.version)
            epsilon.add_metric([run.id], spent if not math.isnan(spent) else math.inf)
            reported.add_metric([run.id], run.reported)
        yield from (version, epsilon, reported)


class LatencyMiddleware:
    """Observe every HTTP request's duration and count its answer's status under its route
    template (e.g. /v1/runs/{run_id})."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        # each (method, template[, status])'s children, looked up once: prometheus_client's
        # labels() validates and locks on every call (~4 us, twice per request); these labels
        # are never removed, unlike a run's
        self.children: dict[tuple[str, ...], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]  # an app that raises without answering: what the server will send

        async def sent(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope["method"] if scope["method"] in METHODS else "other"
            key = (method, template, str(status[0]))
            children = self.children.get(key)
            if children is None:
                children = self.children[key] = (self.metrics.latency.labels(*key[:2]),
                                                 self.metrics.responses.labels(*key))
            children[0].observe(time.perf_counter() - start)
            children[1].inc()

