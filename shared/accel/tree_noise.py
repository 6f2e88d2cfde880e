"""The binary tree's noise for a block of releases, compiled (`TreeCounter.noise_block`).

Same nodes, same order of operations as `privrl.privacy.tree.TreeCounter`: node (level, index)
of replica r is drawn from generator(seed_r, "tree", family, level, index) (compiled draws,
`privrl.accel.distributions`); a plain tree keeps the latest node of each level, a smooth tree
improves each completed node bottom-up (Honaker's upward pass) and keeps the odd-indexed ones;
the noise of the release after t items is the sum, level by level upwards, of the nodes of t's
binary representation.
"""

from __future__ import annotations

import numba
import numpy as np

from .arrays import START, copy_rows
from .distributions import seeded_rows


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _draw(entropy: np.ndarray, entropy_len: np.ndarray, spawn: np.ndarray, level: int,
          index: int, kind: int, scale: float, out: np.ndarray) -> None:
    """Node (level, index)'s noise for every replica into `out` (R, n); spawn ends in the
    node's two words (level and index < 2^32)."""
    spawn[spawn.shape[0] - 2] = np.uint32(level)
    spawn[spawn.shape[0] - 1] = np.uint32(index)
    seeded_rows(entropy, entropy_len, spawn, kind, scale, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def noise_block(t0: int, smooth: bool, weights: np.ndarray, entropy: np.ndarray,
                entropy_len: np.ndarray, spawn: np.ndarray, kind: int, scale: float,
                node_index: np.ndarray, node_value: np.ndarray, out: np.ndarray) -> None:
    """out[i] = the release noise after t0 + i items, then one more item, for every i.

    node_index / node_value (levels, R, n) hold each level's kept node (index -1: none) and are
    updated in place; spawn is the node path's words with two slots left for (level, index).
    """
    n_rep, n = out.shape[1], out.shape[2]
    own = np.empty((n_rep, n))
    best = np.empty((n_rep, n))
    right = np.empty((n_rep, n))
    for i in range(out.shape[0]):
        t = t0 + i
        for r in range(n_rep):  # noise_sum
            for c in range(n):
                out[i, r, c] = 0.0
        level = START
        while (t >> level) > 0:
            if (t >> level) & 1:
                for r in range(n_rep):
                    for c in range(n):
                        out[i, r, c] += node_value[level, r, c]
            level += 1
        t += 1  # _advance
        if not smooth:
            level = START
            while (t >> level) > 0:
                index = t >> level
                if index & 1 and node_index[level] != index:
                    _draw(entropy, entropy_len, spawn, level, index, kind, scale,
                          node_value[level])
                    node_index[level] = index
                level += 1
            continue
        level = START
        while True:  # _complete_nodes
            index = t >> level
            _draw(entropy, entropy_len, spawn, level, index, kind, scale, own)
            if level == 0:
                copy_rows(own, best)
            else:
                w = weights[level]
                for r in range(n_rep):
                    for c in range(n):
                        best[r, c] = w * own[r, c] + (1.0 - w) * (node_value[level - 1, r, c]
                                                                  + right[r, c])
                node_index[level - 1] = -1
            if index & 1:
                copy_rows(best, node_value[level])
                node_index[level] = index
                break
            copy_rows(best, right)
            level += 1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def improve(w: float, own: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """w * own + (1 - w) * (left + right), elementwise in one pass (`TreeCounter`'s smoothing)."""
    out = np.empty_like(own)
    a, b, c, d = own.reshape(-1), left.reshape(-1), right.reshape(-1), out.reshape(-1)
    for i in range(d.shape[0]):
        d[i] = w * a[i] + (1.0 - w) * (b[i] + c[i])
    return out
