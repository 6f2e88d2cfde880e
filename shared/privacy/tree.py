"""Binary-tree (Chan-Shi-Song) continual counter over many streams and replicas at once.

Only the noise goes through the tree (as in TensorFlow Privacy's tree aggregation): exact prefix
sums are kept apart, and the release after t items is

    B(t) = exact_sum(t) + sum_{j : bit j of t is 1} node_noise(level=j, index=t >> j)

With a reproducible (numpy) backend, node noise is drawn from a counter-based seed path, in bulk:
the nodes of a level come `nodes_per_draw(level)` at a time, the m-th group (indices
m L + 1 .. m L + L) one draw of slot m of the stream (seed, family, level)
(`privrl.seeding.SlotStream`), so a restarted process rebuilds exactly the values it already
published (contract 2) from the exact sums alone. A group's nodes that are never released are
never published. With an
unseeded backend (OpenDP on the OS CSPRNG) nothing can be re-derived: a counter that journals keeps
every node it draws for its owner to persist, and a replay takes node values from that store and
refuses to draw any (`StoredNoiseError`), so a published value is never re-drawn. Nodes are drawn
only when an item is added, never by a release, so a read-only path draws nothing.
State is O(log T) noise arrays. Each item enters at most `levels` noisy nodes over the run.

With `smooth=True` every node of the full dyadic tree is noised (each item still enters exactly
one node per level) and each completed node's value is replaced by the minimum-variance
combination of its own noisy value and the sum of its children's improved values (the upward
pass of Honaker's tree estimator). That is post-processing of the node values, so it costs no
privacy, and it lowers a node's noise variance from sigma^2 towards sigma^2 / 2. Because the
weights sum to one, the improvement again acts on the noise alone.

With integer noise (the default backends) items, exact sums and node noise are int64 in grid
units, and everything is integer arithmetic: a release is exact sum + integer noise, and a
smoothed node is its weighted combination rounded to the nearest integer,
floor((2^j own + (2^j - 1)(left + right)) / (2^(j+1) - 1) + 1/2), computed exactly. Because the
exact part of a node is an integer, rounding the combination of noisy nodes equals the exact
part plus the rounded combination of their noise: the release stays a function of the noisy
node values alone (post-processing), with nothing of the clean values in its low bits.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from privrl.privacy.grid import exact_units
from privrl.privacy.noise import RowSampler, sample_rows
from privrl.seeding import SlotStream


class NoiseSampler(RowSampler, Protocol):
    """Anything that draws calibrated noise of a given shape (Laplace, Gaussian, symmetric...);
    `integer` samplers draw int64 noise in grid units."""

    @property
    def integer(self) -> bool: ...

    def std(self) -> float: ...


class StoredNoiseError(RuntimeError):
    """A replay needs node noise that was not stored, or stored noise does not fit the replay."""


@dataclass(frozen=True)
class NodeNoise:
    """The noise of one tree node for every replica, as drawn: what a server persists."""

    family: str
    level: int
    index: int
    value: np.ndarray  # (R, *shape) when drawn; any layout of that many float64s when loaded


NODE_BLOCK = 32  # level-0 nodes drawn in one call; level j draws NODE_BLOCK >> j (at least 1)


def nodes_per_draw(level: int) -> int:
    """How many consecutive nodes of `level` one seeded draw makes (one slot of its stream)."""
    return max(1, NODE_BLOCK >> level)


def tree_levels(max_items: int) -> int:
    """Number of tree levels an item can touch over `max_items` items: floor(log2 T) + 1."""
    if max_items < 1:
        raise ValueError("a tree counter needs at least one item")
    return int(max_items).bit_length()


def levels_released(t: int) -> int:
    """How many distinct levels have produced a node after t items (0 before the first)."""
    return int(t).bit_length()


@functools.cache
def smoothed_variance(level: int) -> float:
    """Noise variance (in units of sigma^2) of an improved node: v_0 = 1, v_j = 2v/(1 + 2v)."""
    v = 1.0
    for _ in range(level):
        v = 2.0 * v / (1.0 + 2.0 * v)
    return v


def release_variance(t: int, smooth: bool) -> float:
    """Variance (in units of sigma^2) of each entry of the release after t items."""
    bits = [j for j in range(levels_released(t)) if (t >> j) & 1]
    return float(sum(smoothed_variance(j) for j in bits)) if smooth else float(len(bits))


def _improve(w: float, own: np.ndarray, left: np.ndarray, right: np.ndarray,
             out: np.ndarray | None = None) -> np.ndarray:
    """A smoothed node: w * own + (1 - w) * (left + right) (summed in place: the same sums),
    into `out` if given."""
    out = np.add(left, right, out=out, dtype=np.float64)
    out *= 1.0 - w
    out += w * own
    return out


def improve_integer(level: int, own: np.ndarray, left: np.ndarray, right: np.ndarray
                    ) -> np.ndarray:
    """A smoothed node of integer noise, exactly: the nearest integer (halves up) to
    (2^j own + (2^j - 1)(left + right)) / (2^(j+1) - 1), j = `level` (weights of
    `smoothed_variance`). Python integers take over where int64 could overflow."""
    top, den = 1 << level, (2 << level) - 1
    big = max(max(int(a.max(initial=0)), -int(a.min(initial=0))) for a in (own, left, right))
    if (4 * big + 2) << (level + 1) >= 2**62:
        own, left, right = (a.astype(object) for a in (own, left, right))
    num = top * own + (top - 1) * (left + right)
    return ((2 * num + den) // (2 * den)).astype(np.int64)


class TreeCounter:
    """Continual prefix sums of array-valued streams, one independent tree per replica.

    `seeds[r]` seeds replica r's node noise; `family` names the statistic so different counters
    of one run draw independent noise. Arrays have shape (R, *shape). An `integer` tree keeps
    int64 sums and noise (grid units).
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        noise: NoiseSampler,
        seeds: Sequence[int],
        family: str,
        max_items: int,
        smooth: bool = False,
        integer: bool | None = None,
    ) -> None:
        self.shape = tuple(shape)
        self.noise = noise
        self.seeds = tuple(int(s) for s in seeds)
        self.family = family
        self.levels = tree_levels(max_items)
        self.max_items = int(max_items)
        self.t = 0
        # integer items and noise (grid units); default: whether the sampler draws integers
        self.integer = bool(getattr(noise, "integer", False)) if integer is None else integer
        self.exact = np.zeros((len(self.seeds), *self.shape),
                              dtype=np.int64 if self.integer else np.float64)
        self.smooth = smooth
        # plain tree: the latest node of each level, (index, noise)
        self._nodes: dict[int, tuple[int, np.ndarray]] = {}
        # smooth: the completed node of each level whose index is odd, (index, improved noise):
        # it is in the release and waits for its right sibling; nothing else is kept
        self._done: dict[int, tuple[int, np.ndarray]] = {}
        self.journal = False  # keep unseeded draws in `_drawn` until taken (a server persists)
        self._drawn: list[NodeNoise] = []
        self._stored: dict[tuple[int, int], np.ndarray] = {}
        self._replaying = False
        self.noise_epoch = 0  # > 0 after a store went back: nodes drawn from now on are fresh
        self._slot_streams: dict[tuple[int, int], list[SlotStream]] = {}  # (epoch, level)
        # seeded noise: the group of nodes drawn last at each (epoch, level), (group, (R, L, ...))
        self._groups: dict[tuple[int, int], tuple[int, np.ndarray]] = {}

    def node_noise(self, level: int, index: int) -> np.ndarray:
        """The noise of tree node (level, index) for every replica: stored, seeded or fresh.

        A reproducible backend makes it a pure function of the seed. An unseeded one draws it
        once (journalled if asked); during a replay it must come from the stored values.
        """
        cached = self._nodes.get(level)
        if cached is not None and cached[0] == index:
            return cached[1]
        value = self._stored.pop((level, index), None)
        if value is None:
            value = self._draw(level, index)
        if not self.smooth:  # a smooth tree asks for each node once, then keeps its improvement
            self._nodes[level] = (index, value)
        return value

    def _draw(self, level: int, index: int) -> np.ndarray:
        """Fresh noise for node (level, index); refused while replaying unseeded noise."""
        if self.noise.reproducible:
            return self._seeded(level, index)
        if self._replaying:
            raise StoredNoiseError(
                f"tree '{self.family}' needs the noise of node (level {level}, index {index}),"
                " which is not stored; unseeded noise is never re-drawn"
            )
        value = self.noise.sample(None, (len(self.seeds), *self.shape))
        if self.journal:
            self._drawn.append(NodeNoise(self.family, level, index, value))
        return value

    def _seeded(self, level: int, index: int) -> np.ndarray:
        """Seeded node (level, index) (index >= 1): row (index - 1) % L of its group's draw
        (L = `nodes_per_draw(level)`), the group drawn once from each replica's stream."""
        if index < 1:
            raise ValueError(f"tree node indices start at 1, got {index}")
        group, row = divmod(index - 1, nodes_per_draw(level))
        return self._group(level, group)[:, row]

    def _group(self, level: int, group: int) -> np.ndarray:
        """Seeded nodes group L + 1 .. group L + L of `level`, (R, L, *shape): slot `group` of
        each replica's stream, drawn once (the group drawn last at each level is kept)."""
        key = (self.noise_epoch, level)
        kept = self._groups.get(key)
        if kept is None or kept[0] != group:
            streams = self._streams(level)
            value = sample_rows(self.noise, lambda r: streams[r].at(group), len(self.seeds),
                                (nodes_per_draw(level), *self.shape))
            self._groups[key] = kept = (group, value)
        return kept[1]

    def _stream_path(self, level: int) -> tuple[str | int, ...]:
        """The seed path of level `level`'s node streams: node (level, index) is in slot
        (index - 1) // `nodes_per_draw(level)` of `SlotStream(seed, *path)` (counter-based, so
        never re-drawn); a noise epoch > 0
        gives every node independent noise."""
        if self.noise_epoch > 0:
            return ("tree", self.family, "epoch", self.noise_epoch, level)
        return ("tree", self.family, level)

    def _streams(self, level: int) -> list[SlotStream]:
        """Each replica's node stream at `level` (kept: the next node of a level is usually in
        the same block of its stream)."""
        key = (self.noise_epoch, level)
        streams = self._slot_streams.get(key)
        if streams is None:
            path = self._stream_path(level)
            streams = self._slot_streams[key] = [SlotStream(seed, *path) for seed in self.seeds]
        return streams

    def take_drawn(self) -> list[NodeNoise]:
        """The unseeded node values drawn since the last call (journal on), oldest first."""
        drawn, self._drawn = self._drawn, []
        return drawn

    def begin_replay(self, nodes: Iterable[NodeNoise]) -> None:
        """Serve these stored node values, and draw no unseeded node, until `end_replay`."""
        rows = (len(self.seeds), *self.shape)
        for node in nodes:
            value = np.asarray(node.value, dtype=self.exact.dtype)
            if value.size != int(np.prod(rows)) or node.family != self.family:
                raise StoredNoiseError(
                    f"stored noise of node (level {node.level}, index {node.index}) does not fit"
                    f" tree '{self.family}' of shape {rows}"
                )
            self._stored[(node.level, node.index)] = value.reshape(rows)
        self._replaying = True

    def end_replay(self) -> None:
        """Draw fresh noise again; stored nodes the replay never used mean a broken store."""
        self._replaying = False
        unused, self._stored = sorted(self._stored), {}
        if unused:
            raise StoredNoiseError(
                f"tree '{self.family}' has stored noise the replay never used: nodes"
                f" (level, index) {unused[:5]}{' ...' if len(unused) > 5 else ''}"
            )

    def add(self, items: np.ndarray) -> None:
        """Append one item per replica (shape (R, *shape)); items beyond max_items are refused,
        and so are non-integer items of an integer tree (grid units).

        Every node the new release needs is drawn here, so `release` never draws.
        """
        if self.t >= self.max_items:
            raise ValueError(f"tree counter '{self.family}' is full ({self.max_items} items)")
        if self.integer and items.dtype != np.int64:
            items = exact_units(items, 1.0)  # grid units: integers only
        self.exact += items
        self._advance()

    def _advance(self) -> None:
        """One more item: draw (and, if smooth, improve) the nodes it completes."""
        self.t += 1
        if self.smooth:
            self._complete_nodes(self.t)
        else:
            for level in range(levels_released(self.t)):
                if (self.t >> level) & 1:
                    self.node_noise(level, self.t >> level)

    def _complete_nodes(self, t: int) -> None:
        """Improve the nodes that complete with item t, bottom-up (levels 0 .. ctz(t)).

        A node with an even index is a right child: its parent completes with it and it is
        not released, so it is dropped at once; one with an odd index waits in `_done`.
        """
        level, right = 0, None
        while True:
            index = t >> level
            own = self.node_noise(level, index)
            if level == 0:
                best = own
            else:
                left_index, left = self._done.pop(level - 1)
                assert left_index == 2 * index - 1 and right is not None
                if self.integer:
                    best = improve_integer(level, own, left, right)
                else:  # the weight of the node's own value
                    best = _improve(smoothed_variance(level), own, left, right)
            if index & 1:
                self._done[level] = (index, best)
                return
            right = best
            level += 1

    def _node_for_release(self, level: int, t: int) -> np.ndarray:
        """The (improved, if smooth) noise of node (level, t >> level), drawn when added."""
        index, value = self._done[level] if self.smooth else self._nodes[level]
        assert index == t >> level
        return value

    def noise_sum(self, out: np.ndarray | None = None) -> np.ndarray:
        """Total noise in the current release: the nodes of t's binary representation (into
        `out`, shaped and typed as the exact sums, when given)."""
        levels = [j for j in range(levels_released(self.t)) if (self.t >> j) & 1]
        total = np.empty_like(self.exact) if out is None else out
        if not levels:
            total[...] = 0
            return total
        total[...] = self._node_for_release(levels[0], self.t)  # not zeros plus it: one pass
        for level in levels[1:]:
            total += self._node_for_release(level, self.t)
        return total

    def release(self) -> np.ndarray:
        """The noisy prefix sum B(t) after the items added so far (B(0) = 0)."""
        return self.exact + self.noise_sum()

    def release_std(self, t: int | None = None) -> float:
        """Standard deviation of each entry's release error after t items (data-independent)."""
        t = self.t if t is None else t
        return self.noise.std() * float(np.sqrt(release_variance(t, self.smooth)))
