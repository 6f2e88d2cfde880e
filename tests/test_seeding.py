"""Streams per role and block of episodes: one episode alone (a user over HTTP, the server's
learner) gets exactly the draws the in-process loop takes in bulk for a whole block."""

from __future__ import annotations

import numpy as np
from privrl.seeding import (
    LOCAL_NOISE,
    ROLLOUT,
    STREAM_EPISODES,
    SlotStream,
    UserStreams,
    episode_rows,
    generator,
    noise_generator,
    slot_generators,
    user_generator,
    user_uniforms,
)

FIRST, COUNT = STREAM_EPISODES - 3, 7  # a range that crosses from one block's stream to the next


def test_bulk_user_uniforms_are_each_users_own_first_draws() -> None:
    bulk = user_uniforms(2**70 + 5, FIRST, COUNT, 41)
    alone = np.array([user_generator(2**70 + 5, k).random(41) for k in range(FIRST, FIRST + COUNT)])
    np.testing.assert_array_equal(bulk, alone)
    assert len({row.tobytes() for row in bulk}) == COUNT  # every episode draws afresh


def test_slot_generators_are_the_roles_generators_slot_by_slot() -> None:
    """Each slot gives the same draws whatever came before it, however many were taken."""
    for role, alone in ((ROLLOUT, user_generator), (LOCAL_NOISE, noise_generator)):
        got = [rng.standard_normal(1 + k % 5) for k, rng in
               zip(range(FIRST, FIRST + COUNT), slot_generators(11, role, FIRST, COUNT),
                   strict=True)]
        for k, draws in zip(range(FIRST, FIRST + COUNT), got, strict=True):
            np.testing.assert_array_equal(draws, alone(11, k).standard_normal(1 + k % 5))


def test_local_noise_is_its_own_stream_not_the_rollouts() -> None:
    """A user's noise at nonce n shares no draws with its rollout of any episode: a server
    that chooses the episode index chooses nothing of the noise."""
    noise = noise_generator(11, 7).random(64)
    for k in (0, 7, 8):
        assert not np.isin(noise, user_generator(11, k).random(4096)).any()


def test_user_streams_give_each_users_generator_of_the_episode() -> None:
    """Kept streams, episode after episode (and back), draw what fresh generators draw."""
    seeds = [2**70 + 5, 9]
    users = UserStreams(seeds)
    for k in [*range(FIRST, FIRST + COUNT), 2, FIRST + 1]:
        got = [rng.random(3 + k % 4) for rng in users.at(k)]
        nonces = [k + 1, 3 * k]
        noise = [rng.random(2) for rng in users.noise(nonces)]
        for seed, draws, n, drawn in zip(seeds, got, nonces, noise, strict=True):
            np.testing.assert_array_equal(draws, user_generator(seed, k).random(3 + k % 4))
            np.testing.assert_array_equal(drawn, noise_generator(seed, n).random(2))


def test_episode_rows_are_rows_of_the_blocks_stream() -> None:
    rows = episode_rows(3, "tiebreak", FIRST, COUNT, 12)
    for i, k in enumerate(range(FIRST, FIRST + COUNT)):
        np.testing.assert_array_equal(rows[i], episode_rows(3, "tiebreak", k, 1, 12)[0])
    whole = generator(3, "tiebreak", 0).random((STREAM_EPISODES, 12))
    np.testing.assert_array_equal(rows[:3], whole[FIRST:])


def test_slots_depend_on_the_seed_the_path_and_the_slot() -> None:
    def first(seed: int, path: str, slot: int) -> float:
        return float(SlotStream(seed, path).at(slot).random())

    values = {first(1, "user", 0), first(2, "user", 0), first(1, "tree", 0), first(1, "user", 1),
              first(1, "user", STREAM_EPISODES)}
    assert len(values) == 5
    slots = SlotStream(1, "user")
    assert slots.at(4).random() == first(1, "user", 4)  # reached from another slot, or afresh
    assert slots.at(2).random() == first(1, "user", 2)
