"""Noise backends: where a mechanism's Laplace and Gaussian draws come from.

* `NumpyNoise` (default, "numpy"): scale-free draws from a seeded `numpy.random.Generator`
  times the scale. Reproducible: the same seed path gives the same numbers, which is what a
  simulation wants and what lets a restarted server re-derive released tree noise. It is also
  predictable to anyone who learns the seed, and textbook floating-point Laplace/Gaussian
  sampling leaks through the low-order bits of its outputs (Mironov 2012).
* `OpenDPNoise` ("opendp"): OpenDP's exact samplers fed by the operating system's CSPRNG. The
  float output is the input rounded to a grid plus exactly sampled discrete noise, so there is
  no floating-point leak; nothing is seeded, so the numbers cannot be reproduced (a server keeps
  what it drew, see `privrl.privacy.tree`). Needs the optional extra `privrl[secure]`.

A backend never changes the calibration: the mechanism passes it the same scale (Laplace b,
Gaussian sigma) whichever backend draws the noise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from privrl import accel
from privrl.seeding import PathPart, entropy_rows, generator, spawn_words

Shape = int | tuple[int, ...]
NoiseName = Literal["numpy", "opendp"]
SECURE_EXTRA = "pip install 'privrl[secure]'"

__all__ = [
    "NUMPY_NOISE",
    "NoiseBackend",
    "NoiseName",
    "NumpyNoise",
    "OpenDPNoise",
    "RowSampler",
    "SecureNoiseUnavailable",
    "Shape",
    "noise_backend",
    "sample_rows",
    "sample_seeded_rows",
    "standard_form",
]


class SecureNoiseUnavailable(ImportError, ValueError):
    """The opendp backend was asked for but OpenDP is not installed (a configuration error)."""


class NoiseBackend(Protocol):
    """Draws zero-centred Laplace / Gaussian noise of a given shape at a given scale."""

    @property
    def name(self) -> str: ...

    @property
    def reproducible(self) -> bool: ...

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        ...

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        ...


def _seeded(rng: np.random.Generator | None) -> np.random.Generator:
    """The caller's generator; the numpy backend has no other source of randomness."""
    if rng is None:
        raise ValueError("the numpy noise backend draws from a seeded generator; none was given")
    return rng


@dataclass(frozen=True)
class NumpyNoise:
    """Reproducible noise from the caller's seeded generator (scale-free draws times the scale)."""

    name: ClassVar[str] = "numpy"
    reproducible: ClassVar[bool] = True

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        """Lap(0, b) draws; the same standard draws whatever b (common random numbers)."""
        return np.asarray(_seeded(rng).laplace(0.0, 1.0, size=shape) * scale, dtype=np.float64)

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        """N(0, sigma^2) draws; the same standard draws whatever sigma."""
        return np.asarray(_seeded(rng).standard_normal(size=shape) * sigma, dtype=np.float64)


def standard_form(backend: NoiseBackend, kind: str, scale: float) -> tuple[str, float] | None:
    """(kind, scale) when a mechanism's draws are numpy's standard draws of `kind` times `scale`
    (the numpy backend, a finite scale): what the compiled draws reproduce; else None."""
    return (kind, scale) if isinstance(backend, NumpyNoise) and math.isfinite(scale) else None


@functools.cache
def _opendp() -> Any:
    """`opendp.prelude` with the "contrib" features on, imported only when first needed."""
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        raise SecureNoiseUnavailable(
            f"the 'opendp' noise backend needs OpenDP, which is not installed: {SECURE_EXTRA}"
        ) from exc
    dp.enable_features("contrib")
    return dp


@functools.lru_cache(maxsize=256)
def _measurement(kind: str, scale: float) -> Callable[[list[float]], list[float]]:
    """OpenDP's vector Laplace (l1) or Gaussian (l2) measurement of this scale on float vectors."""
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if kind == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale)


@dataclass(frozen=True)
class OpenDPNoise:
    """Unseeded noise from OpenDP's exact samplers on the OS CSPRNG; `rng` is ignored."""

    name: ClassVar[str] = "opendp"
    reproducible: ClassVar[bool] = False

    def __post_init__(self) -> None:
        """Fail at configuration time, with the extra to install, when OpenDP is missing."""
        _opendp()

    def _draw(self, kind: str, scale: float, shape: Shape) -> np.ndarray:
        """Noise of `shape`: OpenDP's measurement applied to zeros (0 lies on every grid)."""
        size = int(np.prod(shape, dtype=np.int64))
        if scale == 0.0 or size == 0:
            return np.zeros(shape, dtype=np.float64)
        values = _measurement(kind, float(scale))([0.0] * size)
        return np.asarray(values, dtype=np.float64).reshape(shape)

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        """Lap(0, b) draws from OpenDP's `make_laplace` (exact discrete sampling, CSPRNG)."""
        return self._draw("laplace", scale, shape)

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        """N(0, sigma^2) draws from OpenDP's `make_gaussian` (exact discrete sampling, CSPRNG)."""
        return self._draw("gaussian", sigma, shape)


NUMPY_NOISE = NumpyNoise()


def noise_backend(name: NoiseName) -> NoiseBackend:
    """The backend a run configuration names ("numpy" or "opendp")."""
    if name == "numpy":
        return NUMPY_NOISE
    if name == "opendp":
        return OpenDPNoise()
    raise ValueError(f"unknown noise backend {name!r}: choose 'numpy' or 'opendp'")


class RowSampler(Protocol):
    """A mechanism as `sample_rows` sees it: a sampler that knows whether it is seeded.

    A sampler may also have a `standard` attribute, (kind, scale) when its draws are numpy's
    standard draws times a scale (`standard_form`): `sample_seeded_rows` then draws compiled.
    """

    @property
    def reproducible(self) -> bool: ...

    def sample(self, rng: np.random.Generator | None, shape: Shape) -> np.ndarray: ...


def sample_rows(
    sampler: RowSampler,
    streams: Callable[[int], np.random.Generator],
    rows: int,
    shape: tuple[int, ...],
) -> np.ndarray:
    """Noise of shape (rows, *shape): row r from seeded stream r, or one unseeded bulk draw.

    `streams(r)` is only called for a reproducible sampler, so an unseeded backend never builds
    generators it would not use.
    """
    if sampler.reproducible:
        return np.stack([sampler.sample(streams(r), shape) for r in range(rows)])
    return sampler.sample(None, (rows, *shape))


def sample_seeded_rows(
    sampler: RowSampler, seeds: Sequence[int], path: tuple[PathPart, ...], shape: tuple[int, ...]
) -> np.ndarray:
    """Noise of shape (rows, *shape): row r from `generator(seeds[r], *path)`, or one unseeded
    bulk draw. A numpy-backend Laplace or Gaussian draws in compiled code (`privrl.accel`):
    the same numbers, without building a Generator per row."""
    form = getattr(sampler, "standard", None)
    if not (form is not None and sampler.reproducible and accel.enabled()):
        return sample_rows(sampler, lambda r: generator(seeds[r], *path), len(seeds), shape)
    kinds, seeded_rows = _compiled_rows()
    entropy, lengths = entropy_rows(seeds if isinstance(seeds, tuple) else tuple(map(int, seeds)))
    out = np.empty((len(seeds), math.prod(shape)))
    kind, scale = form
    seeded_rows(entropy, lengths, spawn_words(*path), kinds[kind], float(scale), out)
    return out.reshape((len(seeds), *shape))


@functools.cache
def _compiled_rows() -> tuple[dict[str, int], Callable[..., None]]:
    """`privrl.accel.distributions`' (KINDS, seeded_rows), imported on first use only (a server
    draws a node per counter and report: the import statement each time was a tenth of it)."""
    from privrl.accel.distributions import KINDS, seeded_rows

    return KINDS, seeded_rows
