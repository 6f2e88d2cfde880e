"""Prometheus metrics of one app (its own CollectorRegistry) and the request-latency middleware.

Labels carry run ids, route templates and refusal reasons only, never request contents.
"""

from __future__ import annotations

import math
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Receive, Scope, Send

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
        self.report_bytes = Counter(
            "privrl_report_bytes",
            "Bytes of the bodies of counted reports, per run (divided by"
            " privrl_reports_accepted_total: the size of one report)",
            ["run"],
            registry=r,
        )
        self.claims = Counter("privrl_claims", "Claims handed out, per run", ["run"], registry=r)
        self.claims_refused = Counter(
            "privrl_claims_refused", "Claims refused, per reason", ["reason"], registry=r
        )
        self.policy_version = Gauge(
            "privrl_policy_version", "Newest policy version, per run", ["run"], registry=r
        )
        self.epsilon_spent = Gauge(
            "privrl_epsilon_spent", "Total epsilon spent so far, per run", ["run"], registry=r
        )
        self.episodes_reported = Gauge(
            "privrl_episodes_reported", "Reports counted so far, per run", ["run"], registry=r
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

    def run_state(self, run_id: str, version: int, epsilon: float, reported: int) -> None:
        """Update a run's gauges."""
        self.policy_version.labels(run_id).set(version)
        self.epsilon_spent.labels(run_id).set(epsilon if not math.isnan(epsilon) else math.inf)
        self.episodes_reported.labels(run_id).set(reported)

    def committed(self, groups: int) -> None:
        """Count one grouped commit of `groups` claims and reports."""
        self.commits.inc()
        self.commit_groups.inc(groups)

    def forget_run(self, run_id: str) -> None:
        """Drop a deleted run's labelled series."""
        for metric in (
            self.reports_accepted,
            self.reports_duplicate,
            self.report_bytes,
            self.claims,
            self.policy_version,
            self.epsilon_spent,
            self.episodes_reported,
        ):
            try:
                metric.remove(run_id)
            except KeyError:
                pass

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)


class LatencyMiddleware:
    """Observe every HTTP request's duration under its route template (e.g. /v1/runs/{run_id})."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.latency.labels(scope["method"], template).observe(
                time.perf_counter() - start
            )

