"""A user's local noise depends on nothing the server sends (issue 40): its nonces are its own,
never reused by any process with the same seed, and a replayed episode index is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from privrl.client.user_state import NONCE_BLOCK, STATE_DIR_ENV, UserState, seed_folder
from privrl.client.users import ReplayedEpisode, UserContext, UserError, play
from privrl.config import RunConfig
from privrl.protocol import NoisyReport, PolicyPayload, RandomizerParams, RunInfo, RunStatus, Ticket
from privrl.run import Run
from privrl.worlds import riverswim

MDP = riverswim(6)
SEED = 2**70 + 3


def config() -> RunConfig:
    return RunConfig(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=50,
                     privacy="ldp", epsilon=1.0, delta=0.0, mechanism="laplace")


def context(cfg: RunConfig) -> UserContext:
    status = RunStatus(episodes=cfg.episodes, claimed=0, outstanding=0, reported=0,
                       finished=False, policy_version=1)
    return UserContext.create(RunInfo(id="run-1", config=cfg, status=status, created_at=0.0),
                              MDP)


def ticket(cfg: RunConfig, episode: int) -> Ticket:
    """A ticket for `episode`, as a server (honest or not) would send it."""
    cal = context(cfg).calibration
    params = RandomizerParams(mechanism=cfg.mechanism, scale=cal.noise_scale,
                              families={f.name: list(f.shape) for f in cal.families})
    policy = Run(cfg, [3]).policy()[0]
    return Ticket(run_id="run-1", episode=episode, ticket=f"tk{episode:04d}" + "x" * 24,
                  policy=PolicyPayload(version=1, actions=policy.tolist()), randomizer=params,
                  expires_in=30.0)


def noisy(body: bytes) -> np.ndarray:
    report = NoisyReport.model_validate_json(body)
    return np.concatenate([report.array(name) for name in sorted(report.arrays)])


def test_a_given_seeds_nonces_are_never_reused_by_any_process(tmp_path: Path) -> None:
    """Two processes with one seed (two states on one folder) and a restarted one never take
    the same nonce; the folder's name does not contain the seed."""
    folder = seed_folder(SEED, tmp_path)
    assert str(SEED) not in str(folder) and hex(SEED)[2:] not in str(folder)
    first, second = UserState(SEED, folder), UserState(SEED, folder)
    taken = [first.take_nonce() for _ in range(3)] + [second.take_nonce() for _ in range(3)]
    taken += [first.take_nonce() for _ in range(NONCE_BLOCK)]  # past its first block
    restarted = UserState(SEED, folder)
    taken += [restarted.take_nonce() for _ in range(5)]
    assert len(set(taken)) == len(taken)
    assert taken[:3] == [0, 1, 2]  # a fresh folder starts at 0, as the in-process runner does


def test_a_corrupt_counter_fails_closed(tmp_path: Path) -> None:
    folder = seed_folder(SEED, tmp_path)
    folder.mkdir(parents=True)
    (folder / "nonce").write_text("garbage")
    with pytest.raises(RuntimeError, match="corrupt"):
        UserState(SEED, folder).take_nonce()


def test_the_state_folder_follows_the_environment(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    state = UserState.of(SEED)
    state.take_nonce()
    assert state.folder is not None and (state.folder / "nonce").is_file()
    assert state.folder.is_relative_to(tmp_path)
    own = UserState.of(None)  # no seed given: one of its own, nothing on disk
    assert own.folder is None and own.seed != SEED


@pytest.mark.parametrize("shared", [False, True])
def test_a_replayed_episode_is_refused(tmp_path: Path, shared: bool) -> None:
    """Played once, refused the second time, by this process or (a given seed) another one;
    another run's episode of the same index is played."""
    cfg = config()
    ctx = context(cfg)
    folder = seed_folder(SEED, tmp_path) if shared else None
    state = UserState(SEED, folder)
    play(ctx, ticket(cfg, 7), state)
    other = UserState(SEED, folder) if shared else state
    with pytest.raises(ReplayedEpisode, match="episode 7 of run run-1 again"):
        play(ctx, ticket(cfg, 7), other)
    assert other.first_play("run-2", 7)


def test_a_rewritten_episode_index_does_not_repeat_the_noise(tmp_path: Path) -> None:
    """The attack of issue 40: a proxy rewrites every claim's episode to 7 for 20 user
    processes. With one given seed (which used to make all 20 repeat one noise vector) the
    first plays and the other 19 refuse; with seeds of their own all 20 play, and no two reports
    share their noise: their differences are not the exact 0/±1 data differences."""
    cfg = config()
    ctx = context(cfg)
    folder = seed_folder(SEED, tmp_path)
    outcomes = []
    for _ in range(20):
        try:
            play(ctx, ticket(cfg, 7), UserState(SEED, folder))
            outcomes.append("played")
        except ReplayedEpisode:
            outcomes.append("refused")
    assert outcomes == ["played"] + ["refused"] * 19
    bodies = [noisy(play(ctx, ticket(cfg, 7), UserState(100 + i, None))[1]) for i in range(20)]
    diffs = np.concatenate([bodies[i] - bodies[j] for i in range(len(bodies))
                            for j in range(i + 1, len(bodies))])
    # Laplace noise at ε = 1: a difference of two reports lands in {-1, 0, 1} for a few % of
    # entries; reports that shared their noise would put every entry there
    assert np.mean(np.isin(diffs, (-1.0, 0.0, 1.0))) < 0.2


def test_the_noise_follows_the_nonce_not_the_episode() -> None:
    """Two different episode indices at one nonce carry the same noise draws; one episode at two
    nonces carries different ones: the server's index selects the rollout, never the noise."""
    cfg = config()
    ctx = context(cfg)

    def noise(episode: int, skip: int) -> np.ndarray:
        state = UserState(SEED, None)
        for _ in range(skip):
            state.take_nonce()
        traj, body = play(ctx, ticket(cfg, episode), state)
        clean = ctx.algorithm.user_statistics(traj, {"actions": ticket(cfg, episode).policy
                                                     .to_array()[None]})
        report = NoisyReport.model_validate_json(body)
        return np.concatenate([report.array(n) - np.ravel(clean[n][0])
                               for n in sorted(report.arrays)])

    np.testing.assert_array_equal(noise(3, 0), noise(9, 0))
    assert not np.array_equal(noise(3, 0), noise(3, 1))


def test_an_episode_outside_the_run_is_refused() -> None:
    """The played-episode record is a bitmap sized by the index: a server may not grow it past
    the run's public K and a bound on lapsed claims."""
    cfg = config()
    with pytest.raises(UserError, match="beyond the run's 50 episodes"):
        play(context(cfg), ticket(cfg, 10**12), UserState(SEED, None))
