"""Noise epochs: continuing a run whose store went back, with fresh noise and an honest ledger.

When the store lost reports the server had published, the counts after the store's are about to
be published again over other data. A new noise epoch e draws every counter's noise from then on
afresh, from seed paths that include e (`Central.start_noise_epoch`: tree nodes, matrix-counter
items), so no published noise is reused over other data; what the counters already hold over the
store's data (its items and their noise) is kept. This works for every counter (tree, smoothed
tree, matrix) and every release schedule: a counter's items are its releases, each the sum of the
episodes since the previous one.

Its price (`Central.noise_epoch_charges`, charged to the run's ledger when the epoch starts and
again, identically, by every replay). Neighbours replace one user; a user's episode enters one
counter item; the ledger composes in zCDP (pure epsilon adds up alike, for Laplace trees). Say
the store counts `a` episodes (n_a releases among them) and the server had published `p` >= a
(n_p releases) in epoch 0. The run is then two
mechanisms with independent noise: epoch 0's releases 1..n_p over (the store's users, the lost
ones) and epoch e's releases over (the store's users, the new ones) (its releases up to n_a are
epoch 0's own: same data, same noise). A user is in one of them or both, so its spend is at
most the sum of:
  - epoch 0 up to n_p releases: the release weights w_1 + .. + w_{n_p} (`release_weights`, in
    node costs: a tree's w_t is 1 at t = 2^j, when level j opens, as a user is in one node per
    level; a matrix counter's is E_{t-1}^2, as the user of item s enters release t >= s with
    E_{t-s}, and the first item's user is the worst). The ledger holds w_1 .. w_{n_a}; the epoch
    adds w_{n_a+1} .. w_{n_p} (through w_T when p is not known), unless the store counts no
    episode (nobody is in both);
  - epoch e: a fresh counter over the new data, each user in one item, so at most its whole plan
    (w_1 + .. + w_T). Its later releases are then not charged again (`Central.record` charges in
    epoch 0 only), and a run already past epoch 0 pays only this for each further epoch.
A run the server draws no noise for (LDP, non-private) needs no epoch and pays nothing. A run
whose server draws noise outside these counters (an algorithm's own JDP privatizer: the LSVI
family's, policy evaluation's one-shot release) cannot start one. The admin is refused a
continuation whose total would exceed the run's budget.
"""

from __future__ import annotations

import math

from privrl.privacy.accountant import Charge, Ledger
from privrl.privacy.privatizers import Central
from privrl.run import Run

UNKNOWN = -1  # `published` when the store's epoch was left before the mark knew its count


def supported(run: Run) -> bool:
    """Whether `run` can continue under a fresh noise epoch: its server draws no noise (LDP,
    non-private) or its central counters are `Central`'s (any counter, any schedule)."""
    return not run.config.boundary.counters or isinstance(run.privatizer, Central)


def _charges(run: Run, epoch: int, published: int, first: bool) -> list[Charge]:
    """What starting `epoch` now costs (`first`: the run is in epoch 0)."""
    priv = run.privatizer
    if not isinstance(priv, Central):
        return []
    return priv.noise_epoch_charges(epoch, run.reported,
                                    None if published == UNKNOWN else published, first)


def start(run: Run, epoch: int, published: int) -> None:
    """Charge `epoch` and draw every counter's noise of `run` from now on under it."""
    priv = run.privatizer
    if isinstance(priv, Central):
        run.ledger.charge_all(_charges(run, epoch, published, priv.noise_epoch == 0))
        priv.start_noise_epoch(epoch)


def epsilon_after(run: Run, epochs: list[int], published: int) -> float:
    """The run's total epsilon if `epochs` started now (its ledger is left as it is)."""
    scratch = Ledger(run.ledger.entries)
    priv = run.privatizer
    if isinstance(priv, Central):
        for i, epoch in enumerate(epochs):
            scratch.charge_all(_charges(run, epoch, published,
                                        i == 0 and priv.noise_epoch == 0))
    return float(scratch.totals(run.config.accounting_delta).epsilon)


def fits(run: Run, epochs: list[int], published: int) -> tuple[bool, float]:
    """Whether starting `epochs` now keeps the run within its budget, and the total then."""
    total = epsilon_after(run, epochs, published)
    budget = float(run.config.epsilon)
    return math.isinf(budget) or total <= budget * (1 + 1e-9), total
