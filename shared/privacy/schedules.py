"""Release schedules of a continual counter: after which episodes the billboard is refreshed.

* `EveryEpisode` (the papers'): a release after every episode, T = K releases.
* `Batches(B)`: a release after episodes B, 2B, ...; T = floor(K / B).
* `Geometric(r)`: a release after episodes ceil(r^j), j = 0, 1, ... (distinct values only);
  T is about log_r K.

Between two releases the counter takes one item: the sum of the episodes since the last release.
One user is in one episode, so it changes one item whatever the schedule, and the counter's
sensitivity is the same; only T (the encoder size, hence the per-release noise) changes.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

__all__ = ["SCHEDULE_PATTERN", "Batches", "EveryEpisode", "Geometric", "Schedule",
           "parse_schedule"]

# The schedules `parse_schedule` reads: B >= 1 without leading zeros, r > 1 as a plain decimal
# (the served JSON schema states the same pattern, so a request it admits is never refused).
SCHEDULE_PATTERN = (r"^(every|batch:[1-9][0-9]*"
                    r"|geometric:(([2-9][0-9]*|1[0-9]+)(\.[0-9]+)?|1\.[0-9]*[1-9][0-9]*))$")


class Schedule(Protocol):
    """When a counter releases: after episode e (1-based) iff `release_due(e)`."""

    def release_due(self, episode: int) -> bool: ...

    def releases(self, episodes: int) -> int: ...

    def release_episodes(self, episodes: int) -> Sequence[int]: ...


def _check_episode(episode: int) -> int:
    """Episodes are counted from 1."""
    if episode < 1:
        raise ValueError(f"episodes are counted from 1, got {episode}")
    return int(episode)


@dataclass(frozen=True)
class EveryEpisode:
    """A release after every episode (the papers' schedule)."""

    def release_due(self, episode: int) -> bool:
        """Always."""
        return _check_episode(episode) >= 1

    def releases(self, episodes: int) -> int:
        """K releases over K episodes."""
        return max(int(episodes), 0)

    def release_episodes(self, episodes: int) -> Sequence[int]:
        """1, 2, ..., K."""
        return range(1, max(int(episodes), 0) + 1)


@dataclass(frozen=True)
class Batches:
    """A release after every `size` episodes (B, 2B, ...); a last partial batch is not released."""

    size: int

    def __post_init__(self) -> None:
        """A batch holds at least one episode."""
        if self.size < 1:
            raise ValueError(f"a batch holds at least one episode, got {self.size}")

    def release_due(self, episode: int) -> bool:
        """Whether `episode` closes a batch."""
        return _check_episode(episode) % self.size == 0

    def releases(self, episodes: int) -> int:
        """floor(K / B)."""
        return max(int(episodes), 0) // self.size

    def release_episodes(self, episodes: int) -> Sequence[int]:
        """B, 2B, ... <= K."""
        return range(self.size, max(int(episodes), 0) + 1, self.size)


@dataclass(frozen=True)
class Geometric:
    """A release after episodes ceil(r^j), j = 0, 1, ...; `ratio` r > 1 is read exactly as
    written (Fraction of its decimal text), so ceil is exact."""

    ratio: float

    def __post_init__(self) -> None:
        """r > 1, or the episodes would not grow."""
        if not self.ratio > 1.0:
            raise ValueError(f"a geometric schedule needs a ratio above 1, got {self.ratio}")

    def _powers(self, episodes: int) -> tuple[tuple[int, ...], int]:
        """The cached ceil(r^j) up to a power of two past K, and how many of them are <= K."""
        bound = max(1024, 1 << max(int(episodes), 1).bit_length())
        powers = _ceil_powers(self.ratio, bound)
        return powers, bisect.bisect_right(powers, episodes)

    def release_episodes(self, episodes: int) -> tuple[int, ...]:
        """The distinct release episodes ceil(r^j) <= K, increasing."""
        powers, count = self._powers(episodes)
        return powers[:count]

    def release_due(self, episode: int) -> bool:
        """Whether `episode` is some ceil(r^j)."""
        powers, count = self._powers(_check_episode(episode))
        return count > 0 and powers[count - 1] == episode

    def releases(self, episodes: int) -> int:
        """How many distinct ceil(r^j) lie in 1..K (learners ask every episode: no copy)."""
        return self._powers(episodes)[1]


@functools.lru_cache(maxsize=64)
def _ceil_powers(ratio: float, bound: int) -> tuple[int, ...]:
    """The distinct ceil(r^j) <= bound, increasing, with r read exactly as written (a Fraction
    of its decimal text): computed once per (r, bound), since learners ask every episode."""
    r, power = Fraction(str(ratio)), Fraction(1)
    out: list[int] = []
    while (e := math.ceil(power)) <= bound:
        if not out or e != out[-1]:
            out.append(e)
        power *= r
    return tuple(out)


def parse_schedule(text: str) -> Schedule:
    """'every', 'batch:B' or 'geometric:r' as a schedule (only as SCHEDULE_PATTERN writes it)."""
    name, _, arg = text.partition(":")
    schedule: Schedule | None = None
    if name == "every" and not arg:
        schedule = EveryEpisode()
    elif name == "batch" and arg.isdigit():
        schedule = Batches(int(arg))
    elif name == "geometric" and re.fullmatch(r"[0-9]+(\.[0-9]+)?", arg):
        schedule = Geometric(float(arg))
    if schedule is None or not re.fullmatch(SCHEDULE_PATTERN, text):
        raise ValueError(f"unknown release schedule {text!r}: use every, batch:B or geometric:r"
                         " (B >= 1 and r > 1, plain decimals)")
    return schedule
