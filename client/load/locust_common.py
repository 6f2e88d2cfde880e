"""What both locustfiles share (imported only by them, so only under Locust): --privrl-seconds
(a test length counted from the test's start, not from Locust's), --privrl-samples (every
request's timing to a JSON file when Locust quits), and one more round of the CSV writer before
it exits (Locust writes the CSV every CSV_STATS_INTERVAL_SEC, not at exit,
so the last requests would be missing from it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gevent
import locust.stats
from locust import events

SAMPLES: list[tuple[float, str, float, str]] = []  # (ended, name, ms, error or "")


def without_cookies(user: Any) -> None:
    """Drop a FastHttpUser's cookie jar: privrl's server sets no cookies, and the jar's work on
    every request was ~5% of a generator process's CPU (py-spy). Both bench phases' users call
    it, so the ceiling and the episodes keep the same generator."""
    user.client.client.cookiejar = None  # geventhttpclient's UserAgent: None = no cookie handling


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument("--privrl-seconds", type=float, default=0.0, include_in_web_ui=False,
                        help="stop the test this many seconds after it started, or once a"
                        " first request is in if none is by then (default: 0, only --run-time,"
                        " which also counts Locust's own start-up)")
    parser.add_argument("--privrl-samples", default="", include_in_web_ui=False,
                        help="write every request's (end time, name, ms, error) to this JSON"
                        " file when Locust quits (default: none)")


@events.request.add_listener
def _sample(name: str, response_time: float, exception: Any = None, **_kw: Any) -> None:
    SAMPLES.append((time.time(), name, response_time, "" if exception is None
                    else f"{type(exception).__name__}: {exception}"[:120]))


@events.test_start.add_listener
def _timer(environment: Any, **_kw: Any) -> None:
    seconds = getattr(environment.parsed_options, "privrl_seconds", 0.0)
    runner = environment.runner
    if seconds <= 0 or runner is None:
        return

    def stop_later() -> None:
        """Quit after `seconds`, or once a first request is in if none is yet (a loaded
        machine can take longer than a short test to start a user: at most 30 s more)."""
        gevent.sleep(seconds)
        deadline = time.time() + 30.0
        while not SAMPLES and time.time() < deadline:
            gevent.sleep(0.1)
        runner.quit()

    gevent.spawn(stop_later)


@events.quitting.add_listener
def _flush(environment: Any, **_kw: Any) -> None:
    opts = environment.parsed_options
    if getattr(opts, "csv_prefix", None):
        gevent.sleep(locust.stats.CSV_STATS_INTERVAL_SEC + 0.25)
    if getattr(opts, "privrl_samples", ""):
        Path(opts.privrl_samples).write_text(json.dumps(SAMPLES))
