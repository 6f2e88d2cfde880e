"""Noisy Gram matrices made usable: symmetric noise, PSD shifts, eigenvalue floors, solves.

Everything here is post-processing of a release (it reads no raw data and draws no noise), so it
never changes the privacy of what it is given:

* `mirror_upper` makes a square array symmetric from its upper triangle (the symmetric Gaussian
  noise of Luyo et al.'s erratum 1, used for Zhou's Grams too: i.i.d. on and above the
  diagonal, mirrored below);
* `SymmetricNoise` wraps a mechanism so that its draws on the last two axes are such matrices;
* the tail bounds of Luyo's Claims 26/27 and Zhou's Lemmas B.4/B.5 size the PSD shifts, and
  `variance_norms` gives the noise's norm scales from its variance instead;
* `regularize` turns a noisy Gram release into lambda I + shift I + release, symmetrized, with
  the eigenvalues of every matrix floored at `floor` when the noise made one smaller (the
  "bad noise event", counted, never hidden);
* `cholesky_solve` gives ridge estimates and `||x||_{A^{-1}}` without forming an inverse.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from privrl.privacy.noise import Shape

__all__ = [
    "Regularized",
    "SymmetricNoise",
    "chi_norm_tail",
    "cholesky_solve",
    "inverse_norms",
    "mirror_upper",
    "regularize",
    "variance_norms",
    "wigner_norm_tail",
    "wigner_norm_tail_zhou",
]


def mirror_upper(z: np.ndarray) -> np.ndarray:
    """The symmetric array (last two axes) whose upper triangle, diagonal included, is z's."""
    out = np.array(z)  # a copy; float + 0.0 turns -0.0 into 0.0, as a sum of triangles did
    if out.dtype.kind == "f":
        out += 0.0
    low, high = _strict_lower(out.shape[-1])
    out[..., low, high] = out[..., high, low]
    return out


@functools.lru_cache(maxsize=64)
def _strict_lower(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the entries below the diagonal of a d x d matrix."""
    return np.tril_indices(d, -1)


@dataclass(frozen=True)
class SymmetricNoise:
    """A mechanism's noise on symmetric matrices: i.i.d. on the upper triangle (diagonal
    included) and mirrored, so every released matrix is exactly symmetric.

    The released coordinates are the d(d+1)/2 upper-triangle entries: a family released with it
    states its sensitivities on those coordinates (never larger than the Frobenius ones).
    """

    mechanism: Any  # Laplace | Gaussian (anything with sample, std, reproducible)

    @property
    def reproducible(self) -> bool:
        """Whether the draws are a function of the generator passed in."""
        return bool(self.mechanism.reproducible)

    @property
    def integer(self) -> bool:
        """Whether the draws are integers (grid units)."""
        return bool(self.mechanism.backend.integer)

    def add(self, rng: np.random.Generator | None, values: np.ndarray) -> np.ndarray:
        """`values` (symmetric) plus mirrored noise of their shape."""
        return values + self.sample(rng, values.shape)

    def std(self) -> float:
        """Std of each entry (diagonal and off-diagonal alike)."""
        return float(self.mechanism.std())

    def sample(self, rng: np.random.Generator | None, shape: Shape) -> np.ndarray:
        """Draw the full shape from the mechanism and keep the upper triangle, mirrored."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) < 2 or shape[-1] != shape[-2]:
            raise ValueError(f"symmetric noise needs square trailing axes, got shape {shape}")
        return mirror_upper(self.mechanism.sample(rng, shape))


def wigner_norm_tail(d: int, alpha: float) -> float:
    """Luyo's Claim 26: ||M|| < 4 sqrt(d) + 2 ln(1/alpha) w.p. >= 1 - alpha for a symmetric d x d
    matrix with i.i.d. N(0,1) entries on and above the diagonal (scale by the entries' std)."""
    return 4.0 * math.sqrt(d) + 2.0 * math.log(1.0 / alpha)


def wigner_norm_tail_zhou(d: int, alpha: float) -> float:
    """Zhou's Lemma B.4 with 2 exp(-t^2/2) = alpha: 4 sqrt(d) + sqrt(8 ln(2/alpha))."""
    return 4.0 * math.sqrt(d) + math.sqrt(8.0 * math.log(2.0 / alpha))


def chi_norm_tail(d: int, alpha: float) -> float:
    """Luyo's Claim 27: ||v|| <= sqrt(d) + 2 sqrt(ln(1/alpha)) w.p. >= 1 - alpha, v ~ N(0, I_d)."""
    return math.sqrt(d) + 2.0 * math.sqrt(math.log(1.0 / alpha))


@dataclass(frozen=True)
class Regularized:
    """Usable Gram matrices and how many needed the eigenvalue floor (the bad noise event)."""

    matrices: np.ndarray  # (..., d, d) symmetric positive definite
    floored: np.ndarray  # (...) bool: this matrix had an eigenvalue below the floor


def variance_norms(std_matrix: float, std_vector: float, d: int) -> tuple[float, float]:
    """Norm scales of one release's noise from its variance, not from a tail bound: 2 sqrt(d)
    s_m for a symmetric d x d matrix with i.i.d. entries of std s_m on and above the diagonal
    (the semicircle's edge; above the mean spectral norm for every d, e.g. 1.48 sqrt(d) s_m at
    d = 4), and sqrt(d) s_v = sqrt(E||v||^2) for a d-vector (above E||v|| by Jensen)."""
    root = math.sqrt(d)
    return 2.0 * root * std_matrix, root * std_vector


def regularize(release: np.ndarray, diagonal: np.ndarray | float, floor: float) -> Regularized:
    """diagonal * I + sym(release), with eigenvalues below `floor` raised to `floor` (the
    PD fallback of Zhou 2022): a pure function of the release and public numbers."""
    sym = 0.5 * (release + np.swapaxes(release, -1, -2))
    d = sym.shape[-1]
    diag = np.asarray(diagonal, dtype=np.float64)
    if diag.ndim:
        diag = diag.reshape(diag.shape + (1, 1))
    mats = sym + diag * np.eye(d)
    eig_min = np.linalg.eigvalsh(mats)[..., 0]
    bad = ~(eig_min >= floor)  # NaN-safe
    if bad.any():
        vals, vecs = np.linalg.eigh(mats[bad])
        vals = np.maximum(vals, floor)
        fixed = np.einsum("nij,nj,nkj->nik", vecs, vals, vecs)
        mats = mats.copy()
        mats[bad] = 0.5 * (fixed + np.swapaxes(fixed, -1, -2))
    return Regularized(mats, bad)


def cholesky_solve(matrices: np.ndarray, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A^{-1} b, L^{-1}) for positive definite A = L L^T (batched): the ridge estimate and the
    inverse Cholesky factor that `inverse_norms` uses."""
    chol = np.linalg.cholesky(matrices)
    inv_chol = np.linalg.inv(chol)
    half = np.einsum("...ij,...j->...i", inv_chol, vectors)
    return np.einsum("...ji,...j->...i", inv_chol, half), inv_chol


def inverse_norms(inv_chol: np.ndarray, x: np.ndarray) -> np.ndarray:
    """||x||_{A^{-1}} = ||L^{-1} x|| for x of shape (..., n, d) against L^{-1} (..., d, d)."""
    z = np.einsum("...ij,...nj->...ni", inv_chol, x)
    return np.sqrt(np.maximum(np.einsum("...ni,...ni->...n", z, z), 0.0))
