"""Release schedules: which episodes release, and how many releases K episodes make."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from privrl.config import RunConfig
from privrl.privacy.schedules import Batches, EveryEpisode, Geometric, parse_schedule


def due(schedule, episodes: int) -> list[int]:
    return [e for e in range(1, episodes + 1) if schedule.release_due(e)]


def test_every_episode_releases_each_time():
    assert due(EveryEpisode(), 5) == [1, 2, 3, 4, 5]
    assert EveryEpisode().releases(50_000) == 50_000


def test_batches_release_at_multiples_and_drop_the_partial_batch():
    assert due(Batches(4), 14) == [4, 8, 12]
    assert Batches(4).releases(14) == 3 and Batches(1).releases(7) == 7
    with pytest.raises(ValueError):
        Batches(0)


@pytest.mark.slow  # a long test: 50,000 episodes one at a time
def test_geometric_releases_at_distinct_ceilings_of_powers():
    assert due(Geometric(2), 40) == [1, 2, 4, 8, 16, 32]
    # 1.5^j = 1, 1.5, 2.25, 3.375, 5.06, 7.59, 11.4, 17.1 -> ceil 1, 2, 3, 4, 6, 8, 12, 18
    assert due(Geometric(1.5), 20) == [1, 2, 3, 4, 6, 8, 12, 18]
    # 1.1^j: ceil repeats early on (1, 2, 2, 2, ...) and counts once
    assert due(Geometric(1.1), 3) == [1, 2, 3]
    for schedule, k in ((Geometric(2), 50_000), (Geometric(1.5), 1000), (Geometric(1.1), 500)):
        assert schedule.releases(k) == len(due(schedule, k))
    assert Geometric(2).releases(50_000) == 16
    with pytest.raises(ValueError):
        Geometric(1.0)


@pytest.mark.parametrize("ratio", [1.01, 1.1, 1.5, 3.7])
def test_geometric_release_episodes_match_a_direct_computation(ratio: float) -> None:
    """The cached powers, sliced per K, are the distinct ceil(r^j) <= K computed afresh, at K
    on either side of the cache's power-of-two bounds and where each release is due."""
    def direct(k: int) -> tuple[int, ...]:
        r, power, out = Fraction(str(ratio)), Fraction(1), []
        while (e := math.ceil(power)) <= k:
            out += [] if out and out[-1] == e else [e]
            power *= r
        return tuple(out)

    schedule = Geometric(ratio)
    for k in (0, 1, 2, 3, 1023, 1024, 1025, 2047, 2048, 50_000, 123_457):
        assert schedule.release_episodes(k) == direct(k)
        assert schedule.releases(k) == len(direct(k))
    due_at = set(direct(3000))
    assert [schedule.release_due(e) for e in range(1, 3001)] == [
        e in due_at for e in range(1, 3001)]


def test_parse_schedule():
    assert parse_schedule("every") == EveryEpisode()
    assert parse_schedule("batch:10") == Batches(10)
    assert parse_schedule("geometric:1.5") == Geometric(1.5)
    with pytest.raises(ValueError, match="unknown release schedule"):
        parse_schedule("hourly")


@pytest.mark.parametrize("text", ["every", "batch:1", "batch:10", "geometric:1.1", "geometric:2",
                                  "geometric:10.5", "geometric:1.05", "batch:0", "batch:007",
                                  "geometric:1", "geometric:1.0", "geometric:1.5e3", "every:1",
                                  "weekly", "batch:", "geometric:0.5"])
def test_the_served_pattern_admits_exactly_the_schedules_the_parser_reads(text: str) -> None:
    """A schedule the served JSON schema admits is never refused, and the other way round."""
    pattern = RunConfig.model_json_schema()["properties"]["schedule"]["pattern"]
    try:
        parse_schedule(text)
        parsed = True
    except ValueError:
        parsed = False
    assert bool(re.fullmatch(pattern, text)) == parsed
