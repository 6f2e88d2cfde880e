"""Server-side privatizers: turn accepted reports into the public billboard release.

  Identity  (privacy "none"): exact prefix sums; the non-private baseline (E = 0).
  Central   (JDP, trusted curator): raw count increments go into binary-tree counters; only the
            noisy prefix sums leave (the exact sums stay inside).
  Aggregator (LDP, untrusted server): sums of locally randomized reports; nothing raw ever arrives.

Each ingests one item per replica (arrays with leading axis R) and records what it spends in the
ledger, naming the noise backend that drew the release. The families and their shapes come
from the calibration (that is, from the algorithm's declaration); nothing here knows an
algorithm.

Only `Central` draws noise on the server; with an unseeded backend it hands out the node values
it drew (`take_drawn`) for the server to persist, and replays from them (`begin_replay`).

Under integer noise (`Calibration.integer`) every contribution enters in grid units
(checked, or randomized-rounded: in JDP from the server's seeded rows ("grid", family) of the
episode, `EpisodeRounding`; in LDP from the user's own generator,
`FamilyCalibration.rows_to_units`), sums and noise are integers, and a release is those integers
times the public grid step.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np
from privrl.privacy.accountant import Charge, Ledger
from privrl.privacy.calibration import Calibration, FamilyCalibration
from privrl.privacy.continual import CounterPlan
from privrl.privacy.grid import EpisodeRounding, exact_units
from privrl.privacy.matrix_counter import MatrixCounter
from privrl.privacy.noise import RowSampler, add_rows, noise_label, sample_rows
from privrl.privacy.schedules import EveryEpisode
from privrl.privacy.tree import NodeNoise, StoredNoiseError, TreeCounter, levels_released
from privrl.stats import Stats


def family_charges(calibration: Calibration, mechanism: str, note: str, at: int,
                   names: Iterable[str] | None = None, weight: float = 1.0) -> list[Charge]:
    """The charges of one node level / one local report / one release of every released family
    (or of the families `names`), each at its own scale; `weight` times a node's cost (a
    matrix counter's release)."""
    wanted = None if names is None else set(names)
    out = []
    for fam in calibration.families:
        if wanted is not None and fam.name not in wanted:
            continue
        amount = fam.cost * weight
        cost = {"rho": amount} if calibration.cost_kind == "zcdp" else {"epsilon": amount}
        sens = fam.l2 if calibration.cost_kind == "zcdp" else fam.l1
        out.append(Charge(f"{mechanism}:{fam.name}", sensitivity=sens, scale=fam.scale,
                          note=note, at=at, noise=noise_label(calibration.noise), **cost))
    return out


def charge_families(ledger: Ledger, calibration: Calibration, mechanism: str, note: str, at: int,
                    names: Iterable[str] | None = None) -> None:
    """Record one node level / one local report / one release of every released family (or of
    the families `names`) as one release: all of them, or none past the ledger's budget."""
    ledger.charge_all(family_charges(calibration, mechanism, note, at, names))


def tree_plan(calibration: Calibration, items: int, names: Iterable[str] | None = None
              ) -> list[Charge]:
    """The charges of every level a tree counter over `items` leaves ever releases."""
    return [c for level in range(levels_released(items))
            for c in family_charges(calibration, "tree", f"tree level {level} released",
                                    2**level, names)]


class NoServerNoise:
    """A privatizer that draws no noise itself: nothing to journal or replay."""

    def journal_noise(self) -> None:
        """Nothing is drawn here, so there is nothing to keep."""

    def take_drawn(self) -> list[NodeNoise]:
        """No node noise is ever drawn here."""
        return []

    def begin_replay(self, nodes: Iterable[NodeNoise]) -> None:
        """A replay needs no stored noise; any stored node is a broken store."""
        if any(True for _ in nodes):
            raise StoredNoiseError("node noise is stored for a run whose server draws none")

    def end_replay(self) -> None:
        """Nothing to check."""


class Identity(NoServerNoise):
    """Non-private baseline: the release is the exact prefix sum."""

    def __init__(self, calibration: Calibration, replicas: int):
        self.calibration = calibration
        self.items = 0
        self.sums = {f.name: np.zeros((replicas, *f.shape)) for f in calibration.families}

    def ingest(self, stats: Stats, ledger: Ledger) -> None:
        """Add exact increments (nothing is spent: nothing private is claimed)."""
        for name, total in self.sums.items():
            total += stats[name]
        self.record(ledger)

    def record(self, ledger: Ledger) -> None:
        """Count one ingested item (it spends nothing)."""
        self.items += 1

    def plan(self) -> list[Charge]:
        """Nothing is ever charged."""
        return []

    def release(self) -> Stats:
        """The exact sums."""
        return dict(self.sums)


class Central:
    """JDP: one continual counter per released family (the calibration's `CounterPlan`: tree,
    smoothed tree or matrix counter); the billboard sees only its noisy prefix sums.

    Under a sparse schedule the episodes between two releases are summed into one item, added
    (and charged) only when the schedule's release is due; until then the billboard keeps the
    last release.
    """

    def __init__(self, calibration: Calibration, seeds: Sequence[int], max_items: int) -> None:
        assert calibration.mechanism is not None
        self.calibration = calibration
        self.seeds = [int(s) for s in seeds]
        self.max_items = int(max_items)  # episodes K
        self.schedule = calibration.schedule
        self.counter_plan = calibration.plan or CounterPlan(
            "smoothed" if calibration.smooth else "tree",
            self.schedule.releases(self.max_items))
        self._release_episodes = self.schedule.release_episodes(self.max_items)
        # without noise (eps = inf) nothing is encoded: the exact tree releases the same sums
        building = self.counter_plan
        if building.kind == "matrix" and not calibration.integer:
            building = CounterPlan("tree", building.releases)
        self.trees: dict[str, TreeCounter | MatrixCounter] = {
            f.name: building.build(f.shape, calibration.counter_sampler(f.name), seeds, f.name,
                                   calibration.integer)
            for f in calibration.families
        }
        matrix = self.counter_plan.kind == "matrix"
        self._weights = self.counter_plan.release_weights() if matrix else None
        self._pending: dict[str, np.ndarray] | None = None  # episodes since the last release
        self.items = 0  # episodes ingested
        self.released = 0  # counter items (releases) so far
        self.noise_epoch = 0
        # the server's seeded rounding of each rounded family's items (integer noise)
        self._rounding = {f.name: EpisodeRounding(self.seeds, f.name, f.shape, f.grid,
                                                  f.symmetric)
                          for f in calibration.families if calibration.integer and f.rounded}

    @property
    def every_episode(self) -> bool:
        """Whether every episode is released (the papers' schedule)."""
        return isinstance(self.schedule, EveryEpisode)

    def start_noise_epoch(self, epoch: int) -> None:
        """Draw every counter's noise from now on afresh under noise epoch `epoch` (after the
        server's store went back: published noise is never reused over other data); the caller
        charges `noise_epoch_charges` first, and later releases charge nothing more."""
        self.noise_epoch = epoch
        for counter in self.trees.values():
            counter.noise_epoch = epoch

    def noise_epoch_charges(self, epoch: int, at: int, published: int | None,
                            first: bool) -> list[Charge]:
        """What starting noise epoch `epoch` costs once the store counts `at` episodes, the
        server having published `published` (None: unknown) and the run being in epoch 0
        (`first`): epoch 0's releases published after the store's count (all when unknown),
        then the whole counter again (server/ops/noise_epochs.py derives both)."""
        out: list[Charge] = []
        total = len(self._release_episodes)
        if first and at > 0:
            upto = total if published is None else self.calibration.counter_items(published)
            for item in range(self.calibration.counter_items(at) + 1, upto + 1):
                out += self._release_charges(item, at, "released before the store went back: ")
        for item in range(1, total + 1):
            out += self._release_charges(item, at, f"noise epoch {epoch}, drawn afresh: ")
        return out

    def ingest(self, stats: Stats, ledger: Ledger) -> None:
        """Add raw increments; at a release, add the episodes since the last one to each
        family's counter, charged first. Every family is converted and the charge admitted
        (BudgetExhausted past the budget) before any is added: a refused item changes nothing
        and draws no noise."""
        items = {name: self._items(name, stats[name]) for name in self.trees}
        if self._pending is not None:
            items = {name: self._pending[name] + items[name] for name in items}
        due = self.release_due(self.items + 1)
        self.record(ledger)
        if not due:
            self._pending = items
            return
        self._pending = None
        for name, tree in self.trees.items():
            tree.add(items[name])

    def release_due(self, episode: int) -> bool:
        """Whether the schedule releases after `episode` (1-based; none past K)."""
        if episode > self.max_items:
            return False
        if self.every_episode:
            return True
        return _contains(self._release_episodes, episode)

    def _items(self, name: str, values: np.ndarray) -> np.ndarray:
        """One item per replica as the tree adds it: grid units under integer noise."""
        if not self.calibration.integer:  # cached on the frozen calibration
            return values
        rounding = self._rounding.get(name)
        if rounding is None:
            return exact_units(values, self.calibration.family(name).grid)
        return rounding.units(values, self.items)

    def record(self, ledger: Ledger) -> None:
        """Count one ingested episode; at a release, charge what it adds to the worst-case
        user's spend (a tree: a node cost per family when a new level opens; a matrix counter:
        its encoder weight); first: a refused charge counts nothing."""
        episode = self.items + 1
        if self.release_due(episode):
            item = self.released + 1
            if self.noise_epoch == 0:
                ledger.charge_all(self._release_charges(item, episode))
            self.released = item
        self.items = episode

    def _release_charges(self, item: int, at: int, note: str = "") -> list[Charge]:
        """What counter item `item`'s release adds to the worst-case user's spend (a tree: a
        node cost when level j opens, at item 2^j; a matrix counter: its encoder weight),
        charged at episode `at`, its note prefixed by `note`."""
        if self._weights is None:
            weight = 1.0 if item & (item - 1) == 0 else 0.0
        else:
            weight = self._weights[item - 1]
        if weight == 0.0:
            return []
        if self.counter_plan.kind == "matrix":
            return family_charges(self.calibration, "matrix", f"{note}matrix release {item}",
                                  at, weight=weight)
        level = levels_released(item) - 1
        return family_charges(self.calibration, "tree", f"{note}tree level {level} released",
                              at)

    def plan(self) -> list[Charge]:
        """What the whole run charges: every release over its K episodes."""
        releases = len(self._release_episodes)
        if self._weights is None:  # only the items 2^j charge
            items: Iterable[int] = (1 << j for j in range(levels_released(releases)))
        else:
            items = (t for t, w in enumerate(self._weights, start=1) if w > 0.0)
        return [c for item in items
                for c in self._release_charges(item, self._release_episodes[item - 1])]

    def release(self) -> Stats:
        """Noisy prefix sums B(items) of every family (grid units times the grid step)."""
        return {name: from_units(self.calibration, name, tree.release())
                for name, tree in self.trees.items()}

    def _node_trees(self) -> dict[str, TreeCounter]:
        """The tree counters (a matrix counter's noise is always seeded: nothing to keep)."""
        return {name: c for name, c in self.trees.items() if isinstance(c, TreeCounter)}

    def journal_noise(self) -> None:
        """Keep every unseeded node value drawn until `take_drawn` (a server persists them)."""
        for tree in self._node_trees().values():
            tree.journal = True

    def take_drawn(self) -> list[NodeNoise]:
        """The unseeded node values drawn since the last call, every family."""
        return [node for tree in self._node_trees().values() for node in tree.take_drawn()]

    def begin_replay(self, nodes: Iterable[NodeNoise]) -> None:
        """Replay from stored node values: a needed node that is not stored is an error."""
        trees = self._node_trees()
        by_family: dict[str, list[NodeNoise]] = {name: [] for name in trees}
        for node in nodes:
            if node.family not in by_family:
                raise StoredNoiseError(f"node noise is stored for unknown family {node.family!r}")
            by_family[node.family].append(node)
        for name, tree in trees.items():
            tree.begin_replay(by_family[name])

    def end_replay(self) -> None:
        """Draw fresh noise again; refuse stored node values the replay never used."""
        for tree in self._node_trees().values():
            tree.end_replay()


def _contains(episodes: Sequence[int], episode: int) -> bool:
    """Whether the increasing `episodes` hold `episode` (bisection: a range or a tuple)."""
    i = bisect.bisect_left(episodes, episode)
    return i < len(episodes) and episodes[i] == episode


def from_units(calibration: Calibration, name: str, units: np.ndarray) -> np.ndarray:
    """A release in the family's own units: grid units times the grid step (exact below 2^53)."""
    if not calibration.integer:
        return units
    return units.astype(np.float64) * calibration.family(name).grid


class Aggregator(NoServerNoise):
    """LDP: sums of locally randomized reports (already private when they arrive)."""

    def __init__(self, calibration: Calibration, replicas: int) -> None:
        self.calibration = calibration
        dtype = np.int64 if calibration.integer else np.float64
        self.sums = {f.name: np.zeros((replicas, *f.shape), dtype=dtype)
                     for f in calibration.families}
        self.items = 0

    def ingest(self, stats: Stats, ledger: Ledger) -> None:
        """Add noisy reports; each user is charged once (one report per user, at its own cost).
        Under integer noise a report off its families' grids is refused, and nothing changes."""
        reports = stats
        if self.calibration.integer:
            reports = {f.name: _on_grid(f, stats[f.name]) for f in self.calibration.families}
        self.record(ledger)
        for name, total in self.sums.items():
            total += reports[name]

    def record(self, ledger: Ledger) -> None:
        """Count one ingested report; each user is charged once, at the first (first: a refused
        charge counts nothing)."""
        if self.items == 0:
            ledger.charge_all(self.plan())
        self.items += 1

    def plan(self) -> list[Charge]:
        """What the whole run charges: each user's one local report."""
        return family_charges(self.calibration, "local", "each user's one local report", 1)

    def release(self) -> Stats:
        """The running noisy sums."""
        return {name: from_units(self.calibration, name, total)
                for name, total in self.sums.items()}


def _on_grid(family: FamilyCalibration, report: np.ndarray) -> np.ndarray:
    """A noisy report in grid units; off the grid it is refused (ValueError)."""
    try:
        return exact_units(report, family.grid)
    except ValueError:
        raise ValueError(f"the report's {family.name!r} values must lie on the public grid of"
                         f" step {family.grid!r} (integer noise)") from None


class Privatizer(Protocol):
    """What a run needs from its privacy layer (the three above, or an algorithm's own, e.g.
    policy evaluation's one-shot smoothed-sensitivity release)."""

    items: int

    def ingest(self, stats: Stats, ledger: Ledger) -> None: ...

    def plan(self) -> list[Charge]: ...

    def release(self) -> Stats: ...

    def journal_noise(self) -> None: ...

    def take_drawn(self) -> list[NodeNoise]: ...

    def begin_replay(self, nodes: Iterable[NodeNoise]) -> None: ...

    def end_replay(self) -> None: ...


def randomize_locally(
    stats: Stats, calibration: Calibration, rngs: Sequence[np.random.Generator],
    rounding: Sequence[np.random.Generator] | None = None,
    samplers: Callable[[FamilyCalibration], RowSampler] | None = None,
) -> Stats:
    """The local randomizer: noise on every entry of every released family (zeros included;
    symmetric families get mirrored upper-triangle noise, so the report stays symmetric).

    Row r is user r's report, noised from user r's own generator `rngs[r]` (seeded backends) or
    from OpenDP's CSPRNG (opendp backend) in the user's process; only the output leaves. Under
    integer noise each row is first put on its family's grid (randomized rounding from
    `rounding[r]`, default `rngs[r]`), then noised in integer arithmetic. Families that are not
    released are not sent at all. The generators serve family after family (its rounding
    uniforms, then its noise); the arithmetic runs on all rows at once. `samplers` replaces
    the calibration's sampler of a family (secure aggregation's Skellam shares).
    """
    if calibration.mechanism is None:  # nothing is released
        return {}
    out = {}
    for f in calibration.families:
        sampler = calibration.sampler(f.name) if samplers is None else samplers(f)
        if calibration.integer:  # a row broadcasts to the family's shape (an audit's batch)
            units = f.rows_to_units(_rows(stats[f.name], len(rngs), f.shape),
                                    rngs if rounding is None else rounding)
            out[f.name] = from_units(calibration, f.name, add_rows(sampler, rngs, units))
        else:
            noise = sample_rows(sampler, rngs.__getitem__, len(rngs), f.shape)
            out[f.name] = stats[f.name] + noise
    return out


def _rows(values: np.ndarray, n: int, shape: tuple[int, ...]) -> np.ndarray:
    """Rows 0 .. n-1 of `values`, each broadcast to `shape` (n, *shape)."""
    rows = np.asarray(values)
    if len(rows) < n:
        raise ValueError(f"{n} users but only {len(rows)} rows of statistics")
    rows = rows[:n]
    if rows.shape[1:] == shape:
        return rows
    extra = (1,) * (len(shape) - rows.ndim + 1)  # a lower-rank row gains leading axes
    return np.broadcast_to(rows.reshape(n, *extra, *rows.shape[1:]), (n, *shape))
