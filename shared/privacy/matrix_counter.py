"""Matrix-factorization continual counter: the square-root factorization of the prefix-sum
matrix (Fichtenberger, Henzinger & Upadhyay 2023; Henzinger et al. 2023), on an integer lattice.

The T x T lower-triangular all-ones matrix A (prefix sums) equals L L, with L lower-triangular
Toeplitz of entries c_k = binom(2k, k) / 4^k (the series of 1 / sqrt(1 - x)). A factorization
A = D E releases D (E x + z): the encoder E x plus noise is the private object, the decoder D
is post-processing. Its l2 sensitivity, for one user changing one item by D2, is D2 times the
largest column norm of E (the first column: columns of a lower-triangular Toeplitz matrix are
truncations of it), and the release error D z has variance sigma^2 sum_{k<t} d_k^2 at step t.

The Mironov issue. With integer noise z and the real encoder L, the private object L x + z is
not private at all: L x lies on the grid 4^-(T-1), not on the integers, so for neighbours whose
shift L(x - x') is not an integer vector L x + z and L x' + z have disjoint supports, and the
fractional part of a release names x. (Float noise has the same gap, bit by bit.) Here the
encoder is instead the public integer matrix E = round(2^b L) (b = `ENCODER_BITS`), exact in
int64: w = E x + z is an integer vector, the discrete Gaussian (CKS Theorem 4) makes it rho-zCDP
for sigma = D2 ||E e_1|| / sqrt(2 rho), and no data-dependent float is ever formed. The decoder
D = A E^{-1} (again lower-triangular Toeplitz, computed in float) acts on w alone, so every
float after it, and the randomized rounding of D w onto the release grid, is post-processing of
w: nothing of x beyond w reaches the low bits. The release is unbiased, exactly A x + D z before
rounding, and sits on the grid.

Banded form (`bands` = b): E keeps only its first b diagonals (round(2^16 c_k), k < b), so
the sensitivity shrinks to the norm of those b coefficients while D = A E^{-1} grows; at
T = 1024 it beats the smoothed tree from about 64 bands (see the tests). Without bands it is
the full square root.

State per cell: the last min(b, T) items and decoded steps (O(T) for the full factorization,
T = the number of releases, O(b) banded) and the running release; a step costs as much. Noise
comes from the same samplers as `TreeCounter`'s, drawn along the stable seed path
("matrix", family, t) when item t is added, never by a release; items added in a noise epoch
e > 0 (after the server's store went back) draw from ("matrix", family, "epoch", e, t) instead,
so no published noise is reused over other data. Restart from a store (the
tree's journal and replay) is not implemented here yet: with a seeded backend a restarted
process re-derives the same noise by feeding the same items again.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from privrl.privacy.grid import exact_units, randomized_round
from privrl.privacy.noise import sample_rows
from privrl.privacy.tree import NoiseSampler, tree_levels
from privrl.seeding import generator

ENCODER_BITS = 16  # E = round(2^16 L): the coefficients keep 16 bits below the unit

__all__ = ["ENCODER_BITS", "MatrixCounter", "decoder_coefficients", "encoder_coefficients",
           "encoder_column_norm", "matrix_increment_coefficients", "matrix_increment_variance",
           "matrix_release_variance", "sqrt_coefficients", "tree_column_norm"]


@functools.cache
def sqrt_coefficients(max_items: int) -> np.ndarray:
    """c_0 .. c_{T-1} of L, c_k = binom(2k, k) / 4^k (c_k = c_{k-1} (2k - 1) / (2k))."""
    if max_items < 1:
        raise ValueError("a counter needs at least one item")
    k = np.arange(1, max_items, dtype=np.float64)
    out = np.concatenate([[1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))])
    out.flags.writeable = False
    return out


def _width(max_items: int, bands: int | None) -> int:
    """How many encoder coefficients are non-zero: min(bands, T) (T without bands)."""
    if bands is not None and bands < 1:
        raise ValueError(f"a banded encoder needs at least one band, got {bands}")
    return max_items if bands is None else min(bands, max_items)


@functools.cache
def encoder_coefficients(max_items: int, bands: int | None = None) -> np.ndarray:
    """The public integer encoder E's first column, round(2^b c_k) for k < bands, then 0
    (int64, E_0 = 2^b; b = `ENCODER_BITS`)."""
    out = np.zeros(max_items, dtype=np.int64)
    width = _width(max_items, bands)
    out[:width] = np.rint(np.ldexp(sqrt_coefficients(max_items)[:width], ENCODER_BITS))
    out.flags.writeable = False
    return out


def _inverse_step(enc: np.ndarray, past: np.ndarray, value: np.ndarray | float
                  ) -> np.ndarray:
    """v_t = (value - sum_{k>=1} E_k v_{t-k}) / E_0 (E as float64), `past` = (v_{t-1},
    v_{t-2}, ...) along axis 0, as many as E has non-zero lags: one step of E^{-1}."""
    lags = min(len(past), len(enc) - 1)
    carried = np.tensordot(enc[1:lags + 1], past[:lags], axes=(0, 0))
    return (value - carried) / enc[0]


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full convolution of two float series (by FFT when they are long)."""
    if min(len(a), len(b)) < 256:
        return np.convolve(a, b)
    size = len(a) + len(b) - 1
    nfft = 1 << (size - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(a, nfft) * np.fft.rfft(b, nfft), nfft)[:size]


def _series_inverse(f: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of 1 / f(x) (f_0 != 0), by Newton's iteration
    g <- g (2 - f g) mod x^{2m}: O(n log n)."""
    f = np.concatenate([f[:n], np.zeros(max(0, n - len(f)))])
    g, m = np.array([1.0 / f[0]]), 1
    while m < n:
        m = min(2 * m, n)
        correction = -_convolve(f[:m], g)[:m]
        correction[0] += 2.0
        g = _convolve(g, correction)[:m]
    return g


@functools.cache
def decoder_coefficients(max_items: int, bands: int | None = None) -> np.ndarray:
    """D = A E^{-1}'s first column d_0 .. d_{T-1} (item units per encoder unit): the partial
    sums of E's inverse power series (float; the decoder is post-processing)."""
    enc = encoder_coefficients(max_items, bands)[: _width(max_items, bands)].astype(np.float64)
    out = np.cumsum(_series_inverse(enc, max_items))
    out.flags.writeable = False
    return out


def encoder_column_norm(max_items: int, bands: int | None = None) -> float:
    """The largest l2 column norm of E in encoder units: ||(E_0, .., E_{T-1})||. One user who
    changes one item by D2 moves E x by at most D2 times this (the counter's sensitivity)."""
    return float(np.linalg.norm(encoder_coefficients(max_items, bands).astype(np.float64)))


def tree_column_norm(max_items: int) -> float:
    """The binary tree's largest encoder column norm: an item enters one node per level."""
    return math.sqrt(tree_levels(max_items))


def matrix_release_variance(t: int, max_items: int, bands: int | None = None) -> float:
    """Variance of each entry of the release after t items, in units of the encoder noise's
    variance (before rounding onto the grid): sum_{k<t} d_k^2."""
    d = decoder_coefficients(max_items, bands)[:t]
    return float(np.dot(d, d))


def matrix_increment_coefficients(t1: int, t2: int, max_items: int,
                                  bands: int | None = None) -> np.ndarray:
    """The noise moved between the releases after t1 and t2 items, (D z)_{t2} - (D z)_{t1}, as
    coefficients on the encoder noise z_1 .. z_{t2}: d_{t2-s} - d_{t1-s} (0 past t1)."""
    if not 0 <= t1 < t2 <= max_items:
        raise ValueError(f"need 0 <= t1 < t2 <= {max_items}, got {t1}, {t2}")
    d = decoder_coefficients(max_items, bands)
    out = d[:t2][::-1].copy()
    out[:t1] -= d[:t1][::-1]
    return out


def matrix_increment_variance(t1: int, t2: int, max_items: int,
                              bands: int | None = None) -> float:
    """Variance of each entry's noise increment between the releases after t1 and t2 items, in
    units of the encoder noise's variance (before rounding onto the grid): sum_s (D[t2, s] -
    D[t1, s])^2; at t1 = 0 the release variance."""
    coeffs = matrix_increment_coefficients(t1, t2, max_items, bands)
    return float(np.dot(coeffs, coeffs))


class MatrixCounter:
    """Continual prefix sums of array-valued streams by the square-root factorization (or its
    banded form), one independent counter per replica (arrays (R, *shape), items integers in
    grid units). State per cell: the last `bands` items and decoded steps (all T without
    bands), and the running release.

    `noise` draws the encoder noise in encoder units (`CounterPlan.noise`, same `bands`); it must
    draw integers. `seeds[r]` seeds replica r's noise and rounding; `family` separates counters
    of one run.
    """

    def __init__(self, shape: tuple[int, ...], noise: NoiseSampler, seeds: Sequence[int],
                 family: str, max_items: int, bands: int | None = None) -> None:
        if not noise.integer:
            raise ValueError("the matrix counter needs integer noise (its encoder is exact)")
        self.shape = tuple(shape)
        self.noise = noise
        self.seeds = tuple(int(s) for s in seeds)
        self.family = family
        self.max_items = int(max_items)
        self.bands = bands
        self.t = 0
        self.noise_epoch = 0  # > 0 after a store went back: items added from now on draw afresh
        width = _width(self.max_items, bands)
        self._enc = encoder_coefficients(self.max_items, bands)[:width]
        self._enc_float = self._enc.astype(np.float64)
        rows = (width, len(self.seeds), *self.shape)
        self._items = np.zeros(rows, dtype=np.int64)  # x_t, x_{t-1}, ... (grid units)
        self._steps = np.zeros(rows)  # (E^{-1} w)_t, (E^{-1} w)_{t-1}, ... (float)
        self._sum = np.zeros(rows[1:])  # D w = sum of the steps: the release before rounding
        self.last_encoded = np.zeros(rows[1:], dtype=np.int64)  # w_t = (E x)_t + z_t
        self.exact = np.zeros(rows[1:], dtype=np.int64)
        # |w_t| <= max|x| sum E_k + |z|: refuse items that could overflow int64
        self._item_cap = 2**62 // int(self._enc.sum())

    def add(self, items: np.ndarray) -> None:
        """Append one item per replica (shape (R, *shape), integers in grid units) and draw its
        encoder noise; items beyond max_items, or off the grid, are refused."""
        if self.t >= self.max_items:
            raise ValueError(f"matrix counter '{self.family}' is full ({self.max_items} items)")
        if items.dtype != np.int64:
            items = exact_units(items, 1.0)
        if np.abs(items).max(initial=0) > self._item_cap:
            raise ValueError(f"an item of matrix counter '{self.family}' is too large for int64")
        self._items = np.roll(self._items, 1, axis=0)
        self._items[0] = items
        self.exact += items
        self.t += 1
        # (E x)_t = sum_{k < bands} E_k x_{t-k}, exact integers
        clean = np.tensordot(self._enc, self._items, axes=(0, 0))
        path = (("matrix", self.family, "epoch", self.noise_epoch, self.t) if self.noise_epoch
                else ("matrix", self.family, self.t))
        noise = sample_rows(self.noise, lambda r: generator(self.seeds[r], *path),
                            len(self.seeds), self.shape)
        self.last_encoded = clean + noise.astype(np.int64)
        step = _inverse_step(self._enc_float, self._steps[: self.t - 1], self.last_encoded)
        self._steps = np.roll(self._steps, 1, axis=0)
        self._steps[0] = step
        self._sum += step

    def noise_sum(self) -> np.ndarray:
        """The decoded noise D z in the current release (float; for tests and diagnostics)."""
        return self._sum - self.exact

    def release(self) -> np.ndarray:
        """The noisy prefix sum after the items so far (int64 grid units, 0 before the first):
        D w randomized-rounded onto the grid, replica r rounding from its own seeded stream
        (so a release read twice is the same)."""
        return np.stack([randomized_round(self._sum[r], 1.0, generator(seed, "matrix",
                                                                        self.family, "round",
                                                                        self.t))
                         for r, seed in enumerate(self.seeds)])

    def release_std(self, t: int | None = None) -> float:
        """Standard deviation of each entry's release error after t items, before rounding
        (data-independent): the noise's std times sqrt(sum_{k<t} d_k^2)."""
        t = self.t if t is None else t
        return self.noise.std() * math.sqrt(matrix_release_variance(t, self.max_items,
                                                                    self.bands))
