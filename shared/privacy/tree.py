"""Binary-tree (Chan-Shi-Song) continual counter over many streams and replicas at once.

Only the noise goes through the tree (as in TensorFlow Privacy's tree aggregation): exact prefix
sums are kept apart, and the release after t items is

    B(t) = exact_sum(t) + sum_{j : bit j of t is 1} node_noise(level=j, index=t >> j)

Node noise is drawn from a counter-based seed path (seed, family, level, index), so a restarted
process rebuilds exactly the values it already published (contract 2) from the exact sums alone.
State is O(log T) noise arrays. Each item enters at most `levels` noisy nodes over the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from shared.seeding import generator


class NoiseSampler(Protocol):
    """Anything that draws calibrated noise of a given shape (Laplace, Gaussian, symmetric...)."""

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray: ...

    def std(self) -> float: ...


def tree_levels(max_items: int) -> int:
    """Number of tree levels an item can touch over `max_items` items: floor(log2 T) + 1."""
    if max_items < 1:
        raise ValueError("a tree counter needs at least one item")
    return int(max_items).bit_length()


def levels_released(t: int) -> int:
    """How many distinct levels have produced a node after t items (0 before the first)."""
    return int(t).bit_length()


class TreeCounter:
    """Continual prefix sums of array-valued streams, one independent tree per replica.

    `seeds[r]` seeds replica r's node noise; `family` names the statistic so different counters
    of one run draw independent noise. Arrays have shape (R, *shape).
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        noise: NoiseSampler,
        seeds: Sequence[int],
        family: str,
        max_items: int,
    ) -> None:
        self.shape = tuple(shape)
        self.noise = noise
        self.seeds = [int(s) for s in seeds]
        self.family = family
        self.levels = tree_levels(max_items)
        self.max_items = int(max_items)
        self.t = 0
        self.exact = np.zeros((len(self.seeds), *self.shape))
        self._nodes: dict[int, tuple[int, np.ndarray]] = {}

    def node_noise(self, level: int, index: int) -> np.ndarray:
        """The noise of tree node (level, index) for every replica; a pure function of the seed."""
        cached = self._nodes.get(level)
        if cached is not None and cached[0] == index:
            return cached[1]
        value = np.stack(
            [
                self.noise.sample(generator(seed, "tree", self.family, level, index), self.shape)
                for seed in self.seeds
            ]
        )
        self._nodes[level] = (index, value)
        return value

    def add(self, items: np.ndarray) -> None:
        """Append one item per replica (shape (R, *shape)); items beyond max_items are refused."""
        if self.t >= self.max_items:
            raise ValueError(f"tree counter '{self.family}' is full ({self.max_items} items)")
        self.exact += items
        self.t += 1

    def noise_sum(self, t: int | None = None) -> np.ndarray:
        """Total noise in the release after t items: the nodes of t's binary representation."""
        t = self.t if t is None else t
        total = np.zeros_like(self.exact)
        for level in range(levels_released(t)):
            if (t >> level) & 1:
                total += self.node_noise(level, t >> level)
        return total

    def release(self) -> np.ndarray:
        """The noisy prefix sum B(t) after the items added so far (B(0) = 0)."""
        return self.exact + self.noise_sum()

    def release_std(self, t: int | None = None) -> float:
        """Standard deviation of each entry's release error after t items (data-independent)."""
        t = self.t if t is None else t
        return self.noise.std() * float(np.sqrt(int(t).bit_count()))
