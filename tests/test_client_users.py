"""Simulated users without a server: report encoding, randomizer checks, retries, evaluator."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.algorithms.ucbvi.counts import tabular_counts
from privrl.client.user_state import UserState
from privrl.client.users import (
    Backoff,
    UserContext,
    UserError,
    check_randomizer,
    play,
    run_users,
)
from privrl.config import RunConfig
from privrl.protocol import (
    Ack,
    NoisyReport,
    PolicyLog,
    PolicyPayload,
    RandomizerParams,
    RunInfo,
    RunStatus,
    Ticket,
    TrajectoryReport,
    VersionServed,
)
from privrl.regret import regret_from_log
from privrl.run import Run, user_episode
from privrl.worlds import episode_regret, riverswim

MDP = riverswim(20)
FAST = Backoff(attempts=4, base=0.001, cap=0.005, patience=5.0)


def make_config(privacy: str = "ldp", mechanism: str = "gaussian", episodes: int = 60) -> RunConfig:
    delta = 1e-5 if mechanism == "gaussian" and privacy != "none" else 0.0
    return RunConfig(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=episodes,
                     privacy=privacy, mechanism=mechanism, delta=delta)


def run_info(config: RunConfig, reported: int = 0) -> RunInfo:
    status = RunStatus(episodes=config.episodes, claimed=reported, outstanding=0,
                       reported=reported, finished=reported >= config.episodes, policy_version=1)
    return RunInfo(id="run-1", config=config, status=status, created_at=0.0)


def params_of(config: RunConfig, scale_factor: float = 1.0) -> RandomizerParams | None:
    cal = bind(config).calibration()
    if not cal.boundary.local_noise:
        return None
    return RandomizerParams(
        mechanism=config.mechanism, scale=cal.noise_scale * scale_factor,
        families={f.name: list(f.shape) for f in cal.families},
    )


def ticket_for(config: RunConfig, episode: int, policy: np.ndarray, **params) -> Ticket:
    return Ticket(run_id="run-1", episode=episode, ticket=f"tk{episode:04d}" + "x" * 24,
                  policy=PolicyPayload(version=1, actions=policy.tolist()),
                  randomizer=params_of(config, **params), expires_in=30.0)


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_ldp_report_is_exactly_user_episode_and_fixed_size(mechanism: str) -> None:
    config = make_config("ldp", mechanism)
    ctx = UserContext.create(run_info(config), MDP)
    policy = Run(config, [3]).policy()[0]
    sizes = set()
    states = {seed: UserState(seed, None) for seed in (0, 1, 2)}  # fresh counters: nonce = k
    for episode in range(8):
        for seed in (0, 1, 2):
            traj, body = play(ctx, ticket_for(config, episode, policy), states[seed])
            report = NoisyReport.model_validate_json(body)  # the server's parser, bit-exact
            ref_traj, noisy = user_episode(MDP, {"actions": policy[None]}, [seed], episode,
                                           ctx.algorithm, ctx.calibration, nonces=[episode])
            np.testing.assert_array_equal(traj.states, ref_traj.states)
            assert set(report.arrays) == set(noisy) == set(ctx.calibration.released)
            for name, arr in noisy.items():
                np.testing.assert_array_equal(report.array(name), arr[0].ravel())
            raw = tabular_counts(traj, MDP.S, MDP.A)
            for name in report.arrays:
                assert not np.isin(report.array(name), (0.0, 1.0)).all()
                # a zero integer draw leaves an entry clean: rare, never most of them
                assert np.mean(report.array(name) == raw[name][0].ravel()) < 0.05
            keys = set(json.loads(body))
            assert keys == {"kind", "ticket", "arrays"}
            sizes.add(len(body))
    assert len(sizes) == 1, "the LDP body size must not depend on the trajectory"


def test_jdp_report_is_the_raw_trajectory() -> None:
    config = make_config("jdp")
    ctx = UserContext.create(run_info(config), MDP)
    policy = Run(config, [3]).policy()[0]
    traj, body = play(ctx, ticket_for(config, 4, policy), UserState(9, None))
    report = TrajectoryReport.model_validate_json(body)
    ref, _ = user_episode(MDP, {"actions": policy[None]}, [9], 4, ctx.algorithm, ctx.calibration)
    assert report.states == ref.states[0].tolist()
    assert report.actions == ref.actions[0].tolist()
    assert report.rewards == ref.rewards[0].tolist()


def test_weaker_or_different_randomizer_is_refused() -> None:
    config = make_config("ldp", "gaussian")
    cal = bind(config).calibration()
    check_randomizer(params_of(config), cal)
    check_randomizer(params_of(config, scale_factor=2.0), cal)  # more noise is fine
    with pytest.raises(UserError, match="weaker"):
        check_randomizer(params_of(config, scale_factor=0.5), cal)
    with pytest.raises(UserError, match="no randomizer"):
        check_randomizer(None, cal)
    laplace = params_of(make_config("ldp", "laplace"))
    with pytest.raises(UserError, match="laplace"):
        check_randomizer(laplace, cal)
    fewer = params_of(config)
    assert fewer is not None
    fewer = fewer.model_copy(update={"families": {"r": fewer.families["r"]}})
    with pytest.raises(UserError, match="arrays"):
        check_randomizer(fewer, cal)


def test_world_must_match_the_run() -> None:
    config = RunConfig(n_states=MDP.S, n_actions=MDP.A, horizon=10, episodes=5)
    with pytest.raises(UserError, match="matching world"):
        UserContext.create(run_info(config), MDP)


class FakeServer:
    """A scripted server behind httpx.MockTransport: failures first, then correct answers."""

    def __init__(self, config: RunConfig, claim_script: list, report_script: list,
                 randomizer_factor: float = 1.0) -> None:
        self.config, self.claim_script, self.report_script = config, claim_script, report_script
        self.factor = randomizer_factor
        self.policy = Run(config, [3]).policy()[0]
        self.episode, self.reports, self.reported = 0, [], 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == "/v1/runs/run-1":
            return httpx.Response(200, json=run_info(self.config).model_dump(mode="json"))
        if path.endswith("/claims"):
            step = self.claim_script.pop(0) if self.claim_script else None
            if step == "connect":
                raise httpx.ConnectError("refused", request=request)
            if isinstance(step, int):
                return httpx.Response(step, json={"detail": f"scripted {step}"})
            if self.reported >= self.config.episodes:
                return httpx.Response(410, json={"detail": "run finished"})
            tk = ticket_for(self.config, self.episode, self.policy, scale_factor=self.factor)
            self.episode += 1
            return httpx.Response(200, json=tk.model_dump(mode="json"))
        if path.endswith("/reports"):
            step = self.report_script.pop(0) if self.report_script else None
            if step == "connect":
                raise httpx.ConnectError("reset", request=request)
            if isinstance(step, int):
                return httpx.Response(step, json={"detail": f"scripted {step}"})
            self.reports.append(request.content)
            self.reported += 1
            ack = Ack(run_id="run-1", episode=self.reported - 1, reported=self.reported)
            return httpx.Response(200, json=ack.model_dump(mode="json"))
        return httpx.Response(404, json={"detail": "no such route"})


def swarm(fake: FakeServer, n_users: int | None, concurrency: int = 1):
    return asyncio.run(run_users("http://fake", "run-1", n_users, concurrency, 5, MDP,
                                 backoff=FAST, progress=False,
                                 transport=httpx.MockTransport(fake)))


def test_retries_transient_failures_and_waits_on_409() -> None:
    fake = FakeServer(make_config("jdp", "laplace", episodes=3),
                      claim_script=["connect", 503, 409, 409], report_script=[502, "connect"])
    result = swarm(fake, None, concurrency=1)
    assert result.reported == 3 and result.finished and fake.reported == 3
    assert len(result.claim_seconds) == len(result.report_seconds) == 3


def test_bounded_attempts_then_gives_up() -> None:
    fake = FakeServer(make_config("jdp", "laplace"), claim_script=[503] * 10, report_script=[])
    with pytest.raises(UserError, match="after 4 attempts"):
        swarm(fake, 1)


def test_weaker_ticket_is_refused_before_anything_is_sent() -> None:
    fake = FakeServer(make_config("ldp", "laplace"), [], [], randomizer_factor=0.25)
    with pytest.raises(UserError, match="weaker"):
        swarm(fake, 2)
    assert fake.reports == []


def test_refused_report_is_counted_and_others_go_on() -> None:
    fake = FakeServer(make_config("ldp", "gaussian", episodes=4), [], [422])
    result = swarm(fake, 4)
    assert result.refused == 1 and result.reported == 3 and result.errors


def test_expired_claim_is_counted_and_the_swarm_goes_on() -> None:
    fake = FakeServer(make_config("jdp", "laplace", episodes=3), [], [410])
    result = swarm(fake, None)
    assert result.refused == 1 and result.reported == 3 and result.finished


def test_regret_from_policy_log() -> None:
    """Versions serve contiguous episode ranges; only reported episodes have a regret, in
    episode order (an expired claim is not one of the run's episodes)."""
    rng = np.random.default_rng(0)
    pols = {v: rng.integers(0, MDP.A, size=(MDP.H, MDP.S)) for v in (1, 2, 5)}
    served = {1: VersionServed(first_episode=0, claimed=3, reported=2, expired=1),
              2: VersionServed(first_episode=3, claimed=1, reported=1, expired=0),
              5: VersionServed(first_episode=4, claimed=3, reported=2, expired=0)}
    log = PolicyLog(run_id="r", versions={v: p.tolist() for v, p in pols.items()}, served=served)
    ev = regret_from_log(MDP, log)
    expected = [float(episode_regret(MDP, pols[v])) for v in (1, 1, 2, 5, 5)]
    np.testing.assert_allclose(ev.regret, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ev.policies[int(ev.versions[3])], pols[5])
    assert [log.version_of(k) for k in range(7)] == [1, 1, 1, 2, 5, 5, 5]
    bad = PolicyLog(run_id="r", versions={1: pols[1].tolist()},
                    served={7: VersionServed(first_episode=0, claimed=1, reported=1, expired=0)})
    with pytest.raises(ValueError, match="does not list"):
        regret_from_log(MDP, bad)


def test_claims_present_the_runs_credentials_in_turn() -> None:
    config = make_config("jdp", "laplace", episodes=4)
    fake = FakeServer(config, claim_script=[], report_script=[])
    seen: list[str | None] = []
    info = run_info(config).model_copy(update={"credentials": True})

    async def server(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.001)  # both users get their turn
        if request.method == "GET":
            return httpx.Response(200, json=info.model_dump(mode="json"))
        if request.url.path.endswith("/claims"):
            seen.append(request.headers.get("Authorization"))
        else:
            assert "Authorization" not in request.headers  # a report needs only its ticket
        return fake(request)

    mine = [f"privrl-cred-v1.run-1.{i}.tag" for i in ("a", "b")]
    other = "privrl-cred-v1.run-2.c.tag"
    result = asyncio.run(run_users("http://fake", "run-1", None, 2, 5, MDP, backoff=FAST,
                                   progress=False, transport=httpx.MockTransport(server),
                                   credentials=[other, *mine]))
    assert result.finished and result.reported == 4
    assert set(seen) <= {f"Bearer {c}" for c in mine} and len(set(seen)) == 2
    with pytest.raises(UserError, match="requires user credentials"):
        asyncio.run(run_users("http://fake", "run-1", None, 1, 5, MDP, backoff=FAST,
                              progress=False, transport=httpx.MockTransport(server),
                              credentials=[other]))
