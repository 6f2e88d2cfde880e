"""Matrix-factorization continual counter: the square-root factorization of the prefix-sum
matrix (Fichtenberger, Henzinger & Upadhyay 2023; Henzinger et al. 2023), on an integer lattice.

The T x T lower-triangular all-ones matrix A (prefix sums) equals L L, with L lower-triangular
Toeplitz of entries c_k = binom(2k, k) / 4^k (the series of 1 / sqrt(1 - x)). A factorization
A = D E releases D (E x + z): the encoder E x plus noise is the private object, the decoder D
is post-processing. Its l2 sensitivity, for one user changing one item by D2, is D2 times the
largest column norm of E (the first column: columns of a lower-triangular Toeplitz matrix are
truncations of it), and the release error D z has variance sigma^2 sum_{k<t} d_k^2 at step t.

The Mironov issue. With integer noise z and the real encoder L, the private object L x + z is
not on a lattice that the data leaves alone: L x has irrational-looking low parts, so x + z and
x' + z would have disjoint supports. Here the encoder is instead the public integer matrix
E = round(2^b L) (b = `ENCODER_BITS`), exact in int64: w = E x + z is an integer vector, the
discrete Gaussian (CKS Theorem 4) makes it rho-zCDP for sigma = D2 ||E e_1|| / sqrt(2 rho),
and no data-dependent float is ever formed. The decoder D = A E^{-1} (again lower-triangular
Toeplitz, computed in float) acts on w alone, so every float after it, and the randomized
rounding of D w onto the release grid, is post-processing of w: nothing of x beyond w reaches
the low bits. The release is unbiased, exactly A x + D z before rounding, and sits on the grid.

State: all T items and encoded values per cell (O(T) per cell, T = the number of releases);
a release costs O(t) per cell. Noise comes from the same samplers as `TreeCounter`'s, drawn
along the stable seed path ("matrix", family, t) when item t is added, never by a release.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np
from privrl.privacy.grid import exact_units, randomized_round
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.noise import INTEGER_NOISE, NoiseBackend, sample_seeded_rows
from privrl.privacy.tree import NoiseSampler, release_variance, tree_levels
from privrl.seeding import generator

ENCODER_BITS = 16  # E = round(2^16 L): the coefficients keep 16 bits below the unit

__all__ = ["ENCODER_BITS", "MatrixCounter", "decoder_coefficients", "encoder_coefficients",
           "encoder_column_norm", "matrix_noise", "matrix_release_variance", "sqrt_coefficients",
           "tree_column_norm", "tree_max_release_variance"]


@functools.cache
def sqrt_coefficients(max_items: int) -> np.ndarray:
    """c_0 .. c_{T-1} of L, c_k = binom(2k, k) / 4^k (c_k = c_{k-1} (2k - 1) / (2k))."""
    if max_items < 1:
        raise ValueError("a counter needs at least one item")
    k = np.arange(1, max_items, dtype=np.float64)
    out = np.concatenate([[1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))])
    out.flags.writeable = False
    return out


@functools.cache
def encoder_coefficients(max_items: int, bits: int = ENCODER_BITS) -> np.ndarray:
    """The public integer encoder E's first column, round(2^b c_k) (int64, E_0 = 2^b)."""
    out = np.rint(np.ldexp(sqrt_coefficients(max_items), bits)).astype(np.int64)
    out.flags.writeable = False
    return out


@functools.cache
def decoder_coefficients(max_items: int, bits: int = ENCODER_BITS) -> np.ndarray:
    """D = A E^{-1}'s first column d_0 .. d_{T-1} (item units per encoder unit): the partial
    sums of E's inverse power series, e_n = -(sum_{k=1}^n E_k e_{n-k}) / E_0."""
    enc = encoder_coefficients(max_items, bits).astype(np.float64)
    inv = np.zeros(max_items)
    inv[0] = 1.0 / enc[0]
    for n in range(1, max_items):
        inv[n] = -np.dot(enc[1:n + 1], inv[n - 1::-1]) / enc[0]
    out = np.cumsum(inv)
    out.flags.writeable = False
    return out


def encoder_column_norm(max_items: int, bits: int = ENCODER_BITS) -> float:
    """The largest l2 column norm of E in encoder units: ||(E_0, .., E_{T-1})||. One user who
    changes one item by D2 moves E x by at most D2 times this (the counter's sensitivity)."""
    return float(np.linalg.norm(encoder_coefficients(max_items, bits).astype(np.float64)))


def tree_column_norm(max_items: int) -> float:
    """The binary tree's largest encoder column norm: an item enters one node per level."""
    return math.sqrt(tree_levels(max_items))


def matrix_noise(rho: float, l2_sensitivity: float, max_items: int,
                 backend: NoiseBackend = INTEGER_NOISE, bits: int = ENCODER_BITS) -> Gaussian:
    """The Gaussian (in encoder units) that makes all T releases rho-zCDP when one user changes
    one item by `l2_sensitivity` (item units): sigma = D2 ||E e_1|| / sqrt(2 rho)."""
    mech = Gaussian.calibrate(rho, l2_sensitivity * encoder_column_norm(max_items, bits))
    return dataclasses.replace(mech, backend=backend)


def matrix_release_variance(t: int, max_items: int, bits: int = ENCODER_BITS) -> float:
    """Variance of each entry of the release after t items, in units of the encoder noise's
    variance (before rounding onto the grid): sum_{k<t} d_k^2."""
    d = decoder_coefficients(max_items, bits)[:t]
    return float(np.dot(d, d))


def tree_max_release_variance(max_items: int, smooth: bool) -> float:
    """The binary (or smoothed) tree's largest release variance over t <= T, in sigma^2."""
    return max(release_variance(t, smooth) for t in range(1, max_items + 1))


class MatrixCounter:
    """Continual prefix sums of array-valued streams by the square-root factorization, one
    independent counter per replica (arrays (R, *shape), items integers in grid units).

    `noise` draws the encoder noise in encoder units (`matrix_noise`); it must draw integers.
    `seeds[r]` seeds replica r's noise and rounding; `family` separates counters of one run.
    """

    def __init__(self, shape: tuple[int, ...], noise: NoiseSampler, seeds: Sequence[int],
                 family: str, max_items: int, bits: int = ENCODER_BITS) -> None:
        if not noise.integer:
            raise ValueError("the matrix counter needs integer noise (its encoder is exact)")
        self.shape = tuple(shape)
        self.noise = noise
        self.seeds = tuple(int(s) for s in seeds)
        self.family = family
        self.max_items = int(max_items)
        self.bits = bits
        self.t = 0
        self._enc = encoder_coefficients(self.max_items, bits)
        self._dec = decoder_coefficients(self.max_items, bits)
        rows = (self.max_items, len(self.seeds), *self.shape)
        self.items = np.zeros(rows, dtype=np.int64)  # grid units
        self.encoded = np.zeros(rows, dtype=np.int64)  # w = E x + z, encoder units
        self.exact = np.zeros(rows[1:], dtype=np.int64)
        # |w_t| <= max|x| sum E_k + |z|: refuse items that could overflow int64
        self._item_cap = (2**62 // int(self._enc.sum())) if self.max_items else 0

    def add(self, items: np.ndarray) -> None:
        """Append one item per replica (shape (R, *shape), integers in grid units) and draw its
        encoder noise; items beyond max_items, or off the grid, are refused."""
        if self.t >= self.max_items:
            raise ValueError(f"matrix counter '{self.family}' is full ({self.max_items} items)")
        if items.dtype != np.int64:
            items = exact_units(items, 1.0)
        if np.abs(items).max(initial=0) > self._item_cap:
            raise ValueError(f"an item of matrix counter '{self.family}' is too large for int64")
        t = self.t
        self.items[t] = items
        self.exact += items
        # (E x)_t = sum_{k<=t} E_k x_{t-k}, exact integers
        clean = np.tensordot(self._enc[t::-1], self.items[: t + 1], axes=(0, 0))
        noise = sample_seeded_rows(self.noise, self.seeds, ("matrix", self.family, t + 1),
                                   self.shape)
        self.encoded[t] = clean + noise.astype(np.int64)
        self.t += 1

    def decoded(self) -> np.ndarray:
        """(D w)_t after t items, item units, float: A x + D z up to float rounding."""
        if self.t == 0:
            return np.zeros(self.exact.shape)
        return np.tensordot(self._dec[self.t - 1::-1], self.encoded[: self.t].astype(np.float64),
                            axes=(0, 0))

    def noise_sum(self) -> np.ndarray:
        """The decoded noise D z in the current release (float; for tests and diagnostics)."""
        return self.decoded() - self.exact

    def release(self) -> np.ndarray:
        """The noisy prefix sum after the items so far (int64 grid units, 0 before the first):
        D w randomized-rounded onto the grid, replica r rounding from its own seeded stream
        (so a release read twice is the same)."""
        value = self.decoded()
        return np.stack([randomized_round(value[r], 1.0, generator(seed, "matrix", self.family,
                                                                    "round", self.t))
                         for r, seed in enumerate(self.seeds)])

    def release_std(self, t: int | None = None) -> float:
        """Standard deviation of each entry's release error after t items, before rounding
        (data-independent): the noise's std times sqrt(sum_{k<t} d_k^2)."""
        t = self.t if t is None else t
        return self.noise.std() * math.sqrt(matrix_release_variance(t, self.max_items, self.bits))
