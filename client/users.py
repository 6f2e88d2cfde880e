"""Simulated users over HTTP: one user's episode, and a swarm of users C at a time.

A user claims an episode, plays the policy it received in its own private world (rollout
`user_generator(client_seed, episode)`), and reports what the run's algorithm asks for
(`Algorithm.report_kind`): the raw trajectory or its first-visit returns in JDP / non-private
runs, or in LDP runs only the locally randomized arrays, noised with the calibration the user
computes itself from the run's public configuration and drawn from its own noise stream at a
nonce it never reuses (`privrl.client.user_state.UserState`): nothing the server sends keys the
noise, and a user refuses an episode index it has already played. The numbers are those of
`privrl.run.user_episode` with one replica, so a sequential HTTP run from a fresh nonce counter
reproduces the in-process runner exactly.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from privrl.algorithms import bind
from privrl.algorithms.base import Algorithm
from privrl.client.api import (
    check_url,
    describe_status,
    describe_transport_error,
    error_detail,
    overload_delay,
    retry_after,
    run_path,
)
from privrl.client.cohort import CohortFailed, cohort_rounds, cohort_vector
from privrl.client.user_state import UserState
from privrl.config import RunConfig
from privrl.privacy.calibration import Calibration
from privrl.protocol import (
    API_VERSION,
    CLIENT_KEEPALIVE_SECONDS,
    NOT_VISITED,
    Ack,
    RandomizerParams,
    RunInfo,
    Ticket,
    TrajectoryReport,
    credential_run,
)
from privrl.run import user_episode
from privrl.seeding import generator
from privrl.stats import Stats
from privrl.wire import pack_floats
from privrl.worlds.first_visit import FirstVisits
from privrl.worlds.rollout import Trajectories
from privrl.worlds.tabular import TabularMDP
from pydantic import ValidationError
from tqdm import tqdm

SCALE_RTOL = 1e-9  # relative slack when comparing the ticket's noise scale with our own
# Episode indices count claims, lapsed ones too, so a run hands out more than its K; past this
# many more a ticket is refused (the record of played episodes is a bitmap sized by the index)
LAPSED_CLAIMS_MAX = 10_000_000


class UserError(Exception):
    """A permanent failure: the user refuses to go on (or cannot), with a one-line reason."""


class BudgetExhaustedError(UserError):
    """The run ended early: its privacy filter refused a release past its budget (409)."""


def _exhausted(resp: httpx.Response) -> bool:
    """Whether `resp` is the server's refusal of a run whose budget is exhausted."""
    if resp.status_code != 409:
        return False
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("code") == "budget_exhausted"


class ReplayedEpisode(UserError):
    """The server handed out an episode index this user has already played: a server (or a
    proxy) that replays an index can average a user's reports of one trajectory."""


class RunFinishedError(UserError):
    """The server answered 410: every episode of the run has been reported."""


class ReportRefused(UserError):
    """The server refused one report with a 4xx (e.g. an expired ticket); other users go on."""


class GaveUp(UserError):
    """Transient failures (network, 5xx, 'all claimed') outlasted the retry budget."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: bounded attempts for errors, bounded patience for 409.

    A claim asks the server to wait up to `claim_wait` seconds for a free slot (sequential runs,
    or all K episodes claimed) before it answers 409; 409s are retried until `patience` runs out.
    """

    attempts: int = 8
    base: float = 0.02
    factor: float = 2.0
    cap: float = 1.0
    patience: float = 120.0
    claim_wait: float = 10.0  # ?wait= of a claim: the server holds it until a slot frees

    def delay(self, attempt: int, rng: np.random.Generator) -> float:
        """Seconds to wait before retry number `attempt` (0-based), jittered in [50%, 100%]."""
        raw = min(self.cap, self.base * self.factor**attempt)
        return raw * (0.5 + 0.5 * rng.random())


@dataclass(frozen=True)
class UserContext:
    """What every user of one run knows: the public config, its own calibration, its world."""

    run_id: str
    config: RunConfig
    calibration: Calibration
    mdp: TabularMDP | Any  # the users' world (any world the run's algorithm can play in)
    algorithm: Algorithm

    @classmethod
    def create(cls, info: RunInfo, mdp: TabularMDP | Any) -> UserContext:
        """Check the world fits the run's public model class and calibrate from the config."""
        cfg = info.config
        algorithm = bind(cfg)
        try:
            algorithm.check_world(mdp)
        except ValueError as exc:
            raise UserError(f"run {info.id}: {exc}") from None
        return cls(info.id, cfg, algorithm.calibration(), mdp, algorithm)


def check_randomizer(params: RandomizerParams | None, calibration: Calibration) -> None:
    """Refuse tickets whose randomizer is weaker than the public config's calibration.

    The user always noises with its own calibration; this only catches a server that asks for
    less noise, another mechanism or other arrays than the run's public configuration implies.
    """
    if not calibration.boundary.local_noise:
        return
    if params is None:
        raise UserError("the ticket of an LDP run carries no randomizer parameters")
    expected = calibration.mechanism_name
    if params.mechanism != expected:
        raise UserError(
            f"the ticket asks for the {params.mechanism} randomizer but the run's public "
            f"configuration calibrates {expected}: refusing to report"
        )
    ours = {f.name: list(f.shape) for f in calibration.families}
    if params.families != ours:
        raise UserError(
            f"the ticket asks for arrays {params.families} but the run's public configuration "
            f"releases {ours}: refusing to report"
        )
    scale = calibration.noise_scale
    if not params.scale >= scale * (1.0 - SCALE_RTOL):
        raise UserError(
            f"the ticket's noise scale {params.scale:.6g} is weaker than the calibration "
            f"{scale:.6g} of the run's public configuration: refusing to report"
        )
    for name, own in calibration.scales().items():
        asked = params.scales.get(name, params.scale)
        if not asked >= own * (1.0 - SCALE_RTOL):
            raise UserError(
                f"the ticket's noise scale {asked:.6g} for {name!r} is weaker than the calibration"
                f" {own:.6g} of the run's public configuration: refusing to report"
            )


def encode_noisy(ticket: str, noisy: Stats, families: Sequence[str]) -> bytes:
    """The LDP report body: fixed key order and every array packed (`privrl.wire.pack_floats`:
    base64 of its float64 bytes, lossless), so its size never depends on the trajectory
    (docs/how-to/audit.md, fixed-size reports). Only the noisy arrays and the ticket are in it."""
    parts = []
    for name in families:
        arr = np.asarray(noisy[name], dtype=np.float64).ravel()
        if not np.isfinite(arr).all():
            raise UserError(f"the local randomizer produced a non-finite value in {name!r}")
        parts.append(f'"{name}":"{pack_floats(arr)}"')
    head = '{"kind":"noisy","ticket":"' + ticket + '","arrays":{'
    return (head + ",".join(parts) + "}}").encode()


def encode_trajectory(ticket: str, traj: Trajectories) -> bytes:
    """The JDP / non-private report body: one raw trajectory (row 0 of `traj`) with fixed key
    order and every field packed (base64 of int32 / float64 bytes), so its size is a function of
    the run's public H alone (a reward 0.005 is as long as 0.0). Serialized without validating
    what the rollout just made (the server validates what it receives)."""
    report = TrajectoryReport.model_construct(
        kind="trajectory", ticket=ticket, states=traj.states[0].tolist(),
        actions=traj.actions[0].tolist(), rewards=traj.rewards[0].tolist(),
    )
    fields = ",".join(f'"{name}":"{text}"' for name, text in report.packed().items())
    return ('{"kind":"trajectory","ticket":"' + ticket + '",' + fields + "}").encode()


def encode_returns(ticket: str, visits: FirstVisits) -> bytes:
    """The policy-evaluation report body: row 0's first-visit returns, dense and packed (S
    float64s, NOT_VISITED where the trajectory did not go), so its size is a function of the
    run's public S alone, never of how many states the user visited."""
    dense = np.where(visits.visited[0], visits.returns[0], NOT_VISITED)
    return ('{"kind":"returns","ticket":"' + ticket + '","returns":"' + pack_floats(dense)
            + '"}').encode()


ENCODERS = {"trajectory": encode_trajectory, "returns": encode_returns}  # raw kinds, by name


def play(ctx: UserContext, ticket: Ticket, state: UserState
         ) -> tuple[Trajectories | FirstVisits, Any]:
    """Roll out the ticket's policy with the user's own stream and build the report body.

    Exactly `privrl.run.user_episode` with one replica: the rollout comes from
    `user_generator(state.seed, ticket.episode)`, an LDP report's noise from
    `noise_generator(state.seed, state.take_nonce())`; an episode `state` has played already
    is refused (`ReplayedEpisode`). The trajectory stays with the caller. A
    secure-aggregation user gets its integer vector instead of a body (`cohort_vector`).
    """
    cfg = ctx.config
    policy = ticket.policy.to_array()
    if policy.shape != (cfg.horizon, cfg.n_states) or (
        policy.size and (policy.min() < 0 or policy.max() >= cfg.n_actions)
    ):
        raise UserError(
            f"the ticket's policy has shape {policy.shape} or actions outside [0, {cfg.n_actions})"
        )
    check_randomizer(ticket.randomizer, ctx.calibration)
    try:
        message = ticket.policy.message()
    except ValueError as exc:
        raise UserError(f"the ticket's policy arrays are malformed: {exc}") from None
    want = ctx.algorithm.message_arrays()
    got = {k: tuple(v.shape[1:]) for k, v in message.items() if k != "actions"}
    if got != want:
        raise UserError(f"the ticket's policy carries arrays {got}, the run's algorithm sends"
                        f" {want}: refusing to play it")
    if not 0 <= ticket.episode < cfg.episodes + LAPSED_CLAIMS_MAX:
        raise UserError(f"the ticket's episode {ticket.episode} is beyond the run's"
                        f" {cfg.episodes} episodes and {LAPSED_CLAIMS_MAX:,} lapsed claims:"
                        " refusing to play it")
    if not state.first_play(ctx.run_id, ticket.episode):
        raise ReplayedEpisode(
            f"the server handed out episode {ticket.episode} of run {ctx.run_id} again, which"
            " this user has already played: refusing it (a replayed episode would report the"
            " same trajectory twice)")
    nonces = [state.take_nonce()] if ctx.calibration.boundary.local_noise else None
    traj, noisy = user_episode(ctx.mdp, message, [state.seed], ticket.episode, ctx.algorithm,
                               ctx.calibration, nonces=nonces)
    if ctx.calibration.cohort is not None:  # secure aggregation: masked in the cohort's rounds
        assert noisy is not None
        return traj, cohort_vector(ctx.calibration, noisy)
    if noisy is None:
        kind = ctx.algorithm.report_kind(cfg.privacy)
        return traj, ENCODERS[kind](ticket.ticket, traj)  # type: ignore[operator]
    families = list(ticket.randomizer.families) if ticket.randomizer else []
    return traj, encode_noisy(ticket.ticket, {k: v[0] for k, v in noisy.items()}, families)


@dataclass
class Outcome:
    """One user's episode as seen from outside: what the user waited for its claim and its
    report (retries and the pauses between them included), body size, the server's answer."""

    episode: int
    claim_seconds: float
    report_seconds: float
    report_bytes: int
    duplicate: bool
    trajectory: Trajectories | FirstVisits | None = None
    retries: int = 0  # requests the user sent again (409, 429/503, 5xx, transport errors)


def _transient(resp: httpx.Response) -> bool:
    return resp.status_code >= 500 or resp.status_code == 429


class User:
    """Claims, plays and reports one episode at a time against one server, with retries."""

    def __init__(
        self, http: httpx.AsyncClient, ctx: UserContext, state: UserState,
        backoff: Backoff = Backoff(), jitter: np.random.Generator | None = None,  # noqa: B008
        keep_trajectory: bool = False, credential: str | None = None,
    ) -> None:
        """Use `http` (base_url = the server) for the run of `ctx`; `state`: the user's seed,
        nonces and played episodes (shared by the users of a swarm); `credential`: the user
        credential its claims present (runs that require one)."""
        self.http, self.ctx, self.state = http, ctx, state
        self.credential = credential
        self.backoff, self.jitter = backoff, jitter or generator(state.seed, "backoff")
        self.keep_trajectory = keep_trajectory
        self.base = f"/{API_VERSION}{run_path(ctx.run_id)}"

    async def _post(
        self, path: str, what: str, content: bytes | None
    ) -> tuple[httpx.Response, float, int]:
        """POST with retries on transport errors and 5xx; 409 on claims, and 429/503 with a
        Retry-After (overload, `privrl.client.api.overload_delay`), wait with patience.

        Returns the final answer, the seconds the user waited for it (every attempt and every
        pause between them) and how many times it retried."""
        errors, waits, started = 0, 0, time.monotonic()
        sent, t_start = 0, time.perf_counter()
        headers = {"Content-Type": "application/json"}
        if content is None and self.credential is not None:  # a claim: who asks
            headers["Authorization"] = f"Bearer {self.credential}"
        while True:
            sent += 1
            try:
                resp = await self.http.post(path, content=content or b"{}", headers=headers)
            except httpx.HTTPError as exc:
                if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
                    msg = describe_transport_error(str(self.http.base_url), exc)
                    raise UserError(msg) from None
                if errors + 1 >= self.backoff.attempts:
                    msg = describe_transport_error(str(self.http.base_url), exc)
                    raise GaveUp(f"{what}: {msg} (after {errors + 1} attempts)") from None
                await asyncio.sleep(self.backoff.delay(errors, self.jitter))
                errors += 1
                continue
            if retry_after(resp) is not None:  # overload: wait as asked, within patience
                if time.monotonic() - started > self.backoff.patience:
                    raise GaveUp(f"{what}: the server stayed overloaded for "
                                 f"{self.backoff.patience:g}s ({error_detail(resp)})")
                await asyncio.sleep(overload_delay(resp, self.jitter))
                continue
            if _exhausted(resp):  # the run has ended: no point waiting
                return resp, time.perf_counter() - t_start, sent - 1
            if resp.status_code == 409 and content is None:
                if time.monotonic() - started > self.backoff.patience:
                    raise GaveUp(f"{what}: every episode stayed claimed for "
                                 f"{self.backoff.patience:g}s ({error_detail(resp)})")
                await asyncio.sleep(self.backoff.delay(min(waits, 6), self.jitter))
                waits += 1
                continue
            if _transient(resp):
                if errors + 1 >= self.backoff.attempts:
                    raise GaveUp(f"{describe_status(resp, what)} (after {errors + 1} attempts)")
                await asyncio.sleep(self.backoff.delay(errors, self.jitter))
                errors += 1
                continue
            return resp, time.perf_counter() - t_start, sent - 1

    async def claim(self) -> tuple[Ticket, float, int]:
        """POST a claim; return the ticket, the seconds the user waited for it (retries
        included) and its retries."""
        path = f"{self.base}/claims?wait={self.backoff.claim_wait:g}"
        resp, seconds, retries = await self._post(path, "claiming an episode", None)
        if _exhausted(resp):
            raise BudgetExhaustedError(error_detail(resp))
        if resp.status_code == 410:
            raise RunFinishedError(f"run {self.ctx.run_id} is finished ({error_detail(resp)})")
        if resp.status_code >= 400:
            raise UserError(describe_status(resp, "claiming an episode"))
        try:
            ticket = Ticket.model_validate_json(resp.content)
        except ValidationError as exc:
            raise UserError(f"the server sent an invalid ticket: {exc.errors()[:1]}") from None
        if ticket.run_id != self.ctx.run_id:
            raise UserError(
                f"the server sent a ticket of run {ticket.run_id}, not {self.ctx.run_id}"
            )
        return ticket, seconds, retries

    async def report(self, body: bytes) -> tuple[Ack, float, int]:
        """POST the report (idempotent on the ticket, so retrying is safe); the ack, the
        seconds waited for it (retries included) and its retries."""
        resp, seconds, retries = await self._post(f"{self.base}/reports", "reporting", body)
        if _exhausted(resp):
            raise BudgetExhaustedError(error_detail(resp))
        if resp.status_code >= 400:  # 410 here: the claim expired (or the run just finished)
            raise ReportRefused(describe_status(resp, "the report was refused"))
        try:
            ack = Ack.model_validate_json(resp.content)
        except ValidationError as exc:
            msg = f"the server sent an invalid acknowledgement: {exc.errors()[:1]}"
            raise UserError(msg) from None
        return ack, seconds, retries

    async def episode(self) -> Outcome:
        """One user = one episode: claim, roll out privately, (randomize,) report; in a
        secure-aggregation run the report is its cohort's rounds (`privrl.client.cohort`)."""
        ticket, claim_s, claim_retries = await self.claim()
        traj, body = play(self.ctx, ticket, self.state)
        if self.ctx.calibration.cohort is not None:
            started = time.perf_counter()
            try:
                await cohort_rounds(self.http, self.base, self.ctx.run_id, self.ctx.calibration,
                                    ticket, body)
            except CohortFailed as exc:
                raise ReportRefused(f"episode {ticket.episode}: {exc}") from None
            return Outcome(ticket.episode, claim_s, time.perf_counter() - started,
                           8 * len(body), False, traj if self.keep_trajectory else None,
                           claim_retries)
        ack, report_s, report_retries = await self.report(body)
        return Outcome(ticket.episode, claim_s, report_s, len(body), ack.duplicate,
                       traj if self.keep_trajectory else None, claim_retries + report_retries)


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (NaN when empty)."""
    return float(np.percentile(samples, q)) if len(samples) else math.nan


@dataclass
class SwarmResult:
    """Counts, timings and body sizes of a swarm of users."""

    run_id: str
    reported: int = 0
    duplicates: int = 0
    refused: int = 0
    finished: bool = False
    already_finished: bool = False  # the run was finished before the first user started
    ended: str | None = None  # why the run ended early (its privacy budget was exhausted)
    started_at: float = 0.0
    ended_at: float = 0.0
    claim_seconds: list[float] = field(default_factory=list)
    report_seconds: list[float] = field(default_factory=list)
    report_bytes: list[int] = field(default_factory=list)
    retries: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """Wall time of the swarm."""
        return self.ended_at - self.started_at

    def add(self, out: Outcome, keep: bool) -> None:
        """Record one finished episode."""
        self.reported += 1
        self.duplicates += int(out.duplicate)
        self.claim_seconds.append(out.claim_seconds)
        self.report_seconds.append(out.report_seconds)
        self.report_bytes.append(out.report_bytes)
        self.retries += out.retries
        if keep:
            self.outcomes.append(out)

    def summary(self) -> dict[str, Any]:
        """JSON-ready counts and latency percentiles (milliseconds)."""
        ms = 1e3
        return {
            "run_id": self.run_id,
            "reported": self.reported,
            "duplicates": self.duplicates,
            "refused": self.refused,
            "finished": self.finished,
            "already_finished": self.already_finished,
            "ended": self.ended,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "seconds": self.seconds,
            "episodes_per_second": self.reported / self.seconds if self.seconds > 0 else math.nan,
            "claim_ms_p50": ms * percentile(self.claim_seconds, 50),
            "claim_ms_p99": ms * percentile(self.claim_seconds, 99),
            "report_ms_p50": ms * percentile(self.report_seconds, 50),
            "report_ms_p99": ms * percentile(self.report_seconds, 99),
            "report_bytes_min": min(self.report_bytes, default=0),
            "report_bytes_max": max(self.report_bytes, default=0),
            "claim_seconds": self.claim_seconds,
            "report_seconds": self.report_seconds,
            "report_bytes": self.report_bytes,
            "retries": self.retries,
            "errors": self.errors[:20],
        }


async def fetch_context(http: httpx.AsyncClient, run_id: str, mdp: TabularMDP) -> tuple[
        UserContext, RunInfo]:
    """GET the run's public info and build the users' context from it."""
    try:
        resp = await http.get(f"/{API_VERSION}{run_path(run_id)}")
    except httpx.HTTPError as exc:
        raise UserError(describe_transport_error(str(http.base_url), exc)) from None
    if resp.status_code >= 400:
        raise UserError(describe_status(resp, f"run {run_id!r}"))
    try:
        info = RunInfo.model_validate_json(resp.content)
    except ValidationError as exc:
        raise UserError(f"run {run_id!r}: unexpected answer: {exc.errors()[:1]}") from None
    return UserContext.create(info, mdp), info


def credentials_of(run_id: str, credentials: Sequence[str]) -> list[str]:
    """The credentials issued for `run_id` (each names its run)."""
    return [c for c in credentials if credential_run(c) == run_id]


async def run_users(
    server: str, run_id: str, n_users: int | None, concurrency: int, seed: int | None,
    mdp: TabularMDP, *, backoff: Backoff = Backoff(), progress: bool = True,  # noqa: B008
    event_hooks: dict[str, list[Callable]] | None = None, keep_outcomes: bool = False,
    timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None,
    progress_every: float | None = None, stop_at: float | None = None,
    jitter_seed: int | None = None, credentials: Sequence[str] = (),
    user_state: UserState | None = None,
) -> SwarmResult:
    """Simulate `n_users` users (None: until the run is finished), `concurrency` at a time.

    Every user plays from `user_generator(seed, episode)` and randomizes from
    `noise_generator(seed, nonce)` with nonces it never reuses (`UserState`), where `seed` is
    the users' own secret (None: drawn from the OS CSPRNG, the default for anything but
    reproducible simulation; a known seed lets anyone subtract the users' local noise; a given
    seed keeps its nonces and played episodes in the state directory). A user handed an
    episode it already played refuses it (`ReplayedEpisode`). A user that meets a finished run
    stops the swarm. Permanent refusals (a weaker randomizer, a mismatched world) raise
    `UserError`; a report refused with a 4xx is counted and the others go on. `event_hooks`
    and `transport` are passed to httpx (tests record or fake the traffic with them).
    `progress_every`: print a plain progress line to stderr every so many seconds (for logs),
    instead of the bar.
    `stop_at`: a Unix time after which no user starts another episode (the started ones end).
    `jitter_seed`: the seed of the retries' jitter (default `seed`; one per process of a swarm).
    `credentials`: user credentials (`privrl runs credentials`); those of this run are dealt out
    to the concurrent users in turn, and a run that requires them is refused without any.
    `user_state`: the users' `UserState` (default `UserState.of(seed)`; its seed then rules).
    """
    if concurrency < 1:
        raise UserError("concurrency must be >= 1")
    user_state = UserState.of(seed) if user_state is None else user_state
    seed = user_state.seed
    server = check_url(server)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency,
                          keepalive_expiry=CLIENT_KEEPALIVE_SECONDS)
    timeout = max(timeout, backoff.claim_wait + 10.0)  # a claim may be held claim_wait seconds
    async with httpx.AsyncClient(base_url=server, timeout=timeout, limits=limits,
                                 event_hooks=event_hooks or {}, transport=transport) as http:
        ctx, info = await fetch_context(http, run_id, mdp)
        cohort = ctx.calibration.cohort
        if cohort is not None and concurrency < cohort.size:
            print(f"users {info.id}: secure aggregation sums cohorts of {cohort.size} users in"
                  f" flight together; --concurrency {concurrency} fills one only with other"
                  " users' help (else it aborts after its join timeout)", file=sys.stderr)
        mine = credentials_of(info.id, credentials)
        if info.credentials and not mine:
            raise UserError(f"run {info.id} requires user credentials and none of this run was"
                            " given: pass --credentials FILE (the admin issues them with"
                            f" `privrl runs credentials {info.id}`)")
        result = SwarmResult(run_id=info.id, started_at=time.time())
        remaining = max(0, info.status.episodes - info.status.reported)
        total = remaining if n_users is None else min(n_users, remaining)
        bar = tqdm(total=total, desc=f"users {info.id}", unit="ep", mininterval=0.5,
                   disable=not progress or bool(progress_every))  # the lines replace the bar
        state = {"started": 0}
        done = asyncio.Event()
        if info.status.finished:
            result.finished = result.already_finished = True
            result.ended = info.status.budget_exhausted
            done.set()

        async def worker(index: int) -> None:
            jitter = generator(seed if jitter_seed is None else jitter_seed, "backoff", index)
            credential = mine[index % len(mine)] if info.credentials else None
            user = User(http, ctx, user_state, backoff, jitter, keep_trajectory=keep_outcomes,
                        credential=credential)
            while not done.is_set() and (stop_at is None or time.time() < stop_at):
                if n_users is not None:
                    if state["started"] >= n_users:
                        return
                    state["started"] += 1
                try:
                    out = await user.episode()
                except RunFinishedError:
                    result.finished = True
                    done.set()
                    return
                except BudgetExhaustedError as exc:
                    result.finished, result.ended = True, str(exc)
                    done.set()
                    return
                except ReportRefused as exc:
                    result.refused += 1
                    result.errors.append(str(exc))
                    continue
                result.add(out, keep_outcomes)
                bar.update()

        async def report_progress(every: float) -> None:
            while not done.is_set():
                try:
                    await asyncio.wait_for(done.wait(), every)
                except TimeoutError:
                    elapsed = time.time() - result.started_at
                    print(f"users {info.id}: {result.reported} episodes played by this process"
                          f" in {elapsed:.0f} s ({result.reported / max(elapsed, 1e-9):.1f}/s)",
                          file=sys.stderr, flush=True)

        ticker = (asyncio.create_task(report_progress(progress_every))
                  if progress_every else None)
        try:
            tasks = [asyncio.create_task(worker(i)) for i in range(concurrency)]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
        finally:
            done.set()
            if ticker is not None:
                await ticker
            bar.close()
            result.ended_at = time.time()
    return result
