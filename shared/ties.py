"""Ties in a planner's greedy choice: when two planned values count as tied (one tolerance for
every planner), and how a tie is broken (the lowest action index, or uniformly at random from the
server's secret seed and the release the plan came from)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from .seeding import generator

TIE_TOL = 1e-9  # values this close (absolute; LSVI's scores: relative) are ties


def best_action(scores: np.ndarray, priority: np.ndarray | None = None) -> np.ndarray:
    """The action of highest `priority` (default: the lowest index) among those whose score is
    within TIE_TOL (relative) of the maximum on the last axis: ties in exact arithmetic
    (symmetric features) must not be broken by round-off."""
    best = scores.max(axis=-1, keepdims=True)
    ties = scores >= best - TIE_TOL * (1.0 + np.abs(best))
    if priority is None:
        return np.argmax(ties, axis=-1)
    return np.argmax(np.where(ties, priority, -1.0), axis=-1)


def tie_priorities(seeds: Sequence[int], stream: str, release: Sequence[np.ndarray],
                   shape: tuple[int, ...]) -> np.ndarray:
    """Uniform priorities (R, *shape) for random tie-breaking: replica r's come from its secret
    seed along (`stream`, "ties", a digest of its own release arrays `release[i][r]`), so a
    replay, or an HTTP run, of the same release draws the same ones."""
    rows = []
    for r, seed in enumerate(seeds):
        digest = hashlib.sha256(b"".join(a[r].tobytes() for a in release)).hexdigest()[:16]
        rows.append(generator(int(seed), stream, "ties", digest).random(shape))
    return np.stack(rows)
