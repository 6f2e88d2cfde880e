"""Locust users that play real privrl episodes (`locust -f "$(privrl locustfile)" ...`).

Each Locust user claims an episode, plays the ticket's policy in its own private world with
`privrl.client.users.play` (the user-episode code of `privrl users`: rollout, statistics, and in
LDP the local randomizer calibrated from the run's public configuration) and reports it, over
Locust's FastHttpUser (geventhttpclient). One task = one episode, so `--stop-timeout` lets every
started episode finish. A claim's 409 (every episode claimed: retry) and 410 (run finished) are
flow control, counted as successes; the first 410 ends a local test; in distributed mode it stops
that user, and the master ends the test once the run is finished and the workers have sent their
last statistics. Only Locust imports this file; nothing in privrl imports Locust.

Options: --privrl-run ID (or $PRIVRL_RUN), --privrl-env NAME and --privrl-world-params JSON
(the users' world; default: the algorithm's own world at the run's horizon). The users' seed is
$PRIVRL_CLIENT_SEED (never a command-line flag: seeds are secrets), else drawn from the OS CSPRNG
once per process; user k plays from (seed, 'user', k) whichever worker plays episode k, and
randomizes at the process's own nonces (`privrl.client.user_state.UserState`).
"""

from __future__ import annotations

import functools
import json
import os

import gevent
import gevent.lock
import httpx
from locust import FastHttpUser, between, events, task
from locust.exception import StopUser
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner, WorkerRunner
from privrl import algorithms
from privrl.client.api import run_path
from privrl.client.load import locust_common  # --privrl-samples, last CSV rows
from privrl.client.user_state import UserState
from privrl.client.users import UserContext, UserError, play
from privrl.protocol import API_VERSION, Ack, RunInfo, Ticket
from privrl.worlds.registry import make

SEED_ENV = "PRIVRL_CLIENT_SEED"
CLAIM_WAIT = 2.0  # seconds the server may hold a claim while every episode is claimed
JSON = {"Content-Type": "application/json"}
QUITTING: list[gevent.Greenlet] = []  # the one greenlet that ends this process's test


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    parser.add_argument("--privrl-run", env_var="PRIVRL_RUN", default="",
                        help="id of the privrl run to play (required)")
    parser.add_argument("--privrl-env", default="",
                        help="the users' world (default: the run's algorithm's own world)")
    parser.add_argument("--privrl-world-params", default="{}",
                        help="the world's parameters as a JSON object (default: {})")


@events.test_start.add_listener
def _watch_run(environment, **_kw) -> None:
    """On a distributed test's master: end the test once the run is finished and the workers
    have sent their last statistics (they report every WORKER_REPORT_INTERVAL seconds)."""
    runner, opts = environment.runner, environment.parsed_options
    if not isinstance(runner, MasterRunner) or not opts.privrl_run:
        return
    url = f"{environment.host.rstrip('/')}/{API_VERSION}{run_path(opts.privrl_run)}"

    def watch() -> None:
        while True:
            gevent.sleep(2.0)
            try:
                info = RunInfo.model_validate_json(httpx.get(url, timeout=10).content)
            except (httpx.HTTPError, ValueError):
                continue
            if info.status.finished:
                gevent.sleep(WORKER_REPORT_INTERVAL + 1.5)
                runner.quit()
                return

    QUITTING.append(gevent.spawn(watch))


def _state() -> UserState:
    text = os.environ.get(SEED_ENV, "").strip()
    return UserState.of(int(text) if text else None)


STATE = _state()


CONTEXT_LOCK = gevent.lock.BoundedSemaphore()


def context(host: str, run_id: str, env: str, params: str) -> UserContext:
    """The run's public configuration and the users' world, fetched once per process."""
    with CONTEXT_LOCK:
        return _context(host, run_id, env, params)


@functools.lru_cache(maxsize=8)
def _context(host: str, run_id: str, env: str, params: str) -> UserContext:
    resp = httpx.get(f"{host.rstrip('/')}/{API_VERSION}{run_path(run_id)}", timeout=30)
    resp.raise_for_status()
    info = RunInfo.model_validate_json(resp.content)
    cfg = info.config
    world = make(env or algorithms.get(cfg.algo).default_world, cfg.horizon, **json.loads(params))
    return UserContext.create(info, world)


class EpisodeUser(FastHttpUser):
    """One simulated user at a time: claim, play privately, (randomize,) report, repeat."""

    wait_time = between(0, 0)

    def on_start(self) -> None:
        """Load the run's context (once per process) and the routes; no cookie jar."""
        locust_common.without_cookies(self)
        opts = self.environment.parsed_options
        if not opts.privrl_run:
            raise StopUser("no run: pass --privrl-run ID or set PRIVRL_RUN")
        self.ctx = context(self.host, opts.privrl_run, opts.privrl_env, opts.privrl_world_params)
        base = f"/{API_VERSION}{run_path(self.ctx.run_id)}"
        self.claim_path = f"{base}/claims?wait={CLAIM_WAIT:g}"
        self.report_path = f"{base}/reports"

    @task
    def episode(self) -> None:
        """One user = one episode, with the project's own user logic."""
        with self.client.post(self.claim_path, data=b"{}", headers=JSON, name="claim",
                              catch_response=True) as resp:
            status = resp.status_code
            if status in (409, 410):
                resp.success()
            elif status != 200:
                resp.failure(f"claim: HTTP {status}: {resp.text[:200]}")
            else:
                ticket = Ticket.model_validate_json(resp.content)
        if status == 410:  # finished: stop this user; a local test also stops (once)
            if isinstance(self.environment.runner, WorkerRunner):
                raise StopUser()  # the master ends a distributed test (`_watch_run`)
            if not QUITTING:
                QUITTING.append(gevent.spawn(self.environment.runner.quit))
            return
        if status != 200:
            return
        try:
            _, body = play(self.ctx, ticket, STATE)
        except UserError as exc:
            self.environment.events.request.fire(
                request_type="PLAY", name="play", response_time=0, response_length=0,
                exception=exc, context={})
            return
        with self.client.post(self.report_path, data=body, headers=JSON, name="report",
                              catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"report: HTTP {resp.status_code}: {resp.text[:200]}")
            else:
                Ack.model_validate_json(resp.content)
