"""Noise backends: where a mechanism's Laplace and Gaussian draws come from.

* `IntegerNoise` (default, "numpy"): discrete Laplace / discrete Gaussian integers
  (`privrl.privacy.discrete`) from a seeded `numpy.random.Generator`. Releases live on a public
  integer grid and the noise is added in integer arithmetic, so nothing about the clean value
  hides in the low bits. Reproducible: the same seed path gives the same numbers, which lets a
  restarted server re-derive released tree noise.
* `OpenDPNoise` ("opendp"): OpenDP's exact discrete samplers on the operating system's CSPRNG,
  applied by OpenDP to the integer values themselves. Nothing is seeded, so the numbers cannot
  be reproduced (a server keeps what it drew, see `privrl.privacy.tree`). Needs the optional
  extra `privrl[secure]`.
* `FloatNoise` ("float"): numpy's continuous Laplace / Gaussian times the scale, added in
  floating point. Simulation only: an outsider can remove it from a release through the low
  bits of fl(c + noise) (Mironov 2012). Never a default.

A backend never changes the calibration: the mechanism passes it the same scale (Laplace b,
Gaussian sigma; in grid units for the integer backends) whichever backend draws the noise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from privrl.privacy.discrete import discrete_gaussian, discrete_laplace

Shape = int | tuple[int, ...]
NoiseName = Literal["numpy", "opendp", "float"]
NOISE_NAMES: tuple[str, ...] = ("numpy", "opendp", "float")
SECURE_EXTRA = "pip install 'privrl[secure]'"
SIMULATION_ONLY = "simulation only: an outsider can remove it (Mironov 2012)"

__all__ = [
    "FLOAT_NOISE",
    "INTEGER_NOISE",
    "NOISE_NAMES",
    "SIMULATION_ONLY",
    "FloatNoise",
    "IntegerNoise",
    "NoiseBackend",
    "NoiseName",
    "OpenDPNoise",
    "RowSampler",
    "SecureNoiseUnavailable",
    "Shape",
    "add_rows",
    "noise_backend",
    "noise_label",
    "sample_rows",
]


class SecureNoiseUnavailable(ImportError, ValueError):
    """The opendp backend was asked for but OpenDP is not installed (a configuration error)."""


class NoiseBackend(Protocol):
    """Draws zero-centred Laplace / Gaussian noise of a given shape at a given scale: integers
    (discrete Laplace / Gaussian) when `integer`, else floats."""

    @property
    def name(self) -> str: ...

    @property
    def reproducible(self) -> bool: ...

    @property
    def integer(self) -> bool: ...

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        ...

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        ...

    def add(self, kind: str, rng: np.random.Generator | None, scale: float,
            values: np.ndarray) -> np.ndarray:
        ...


def _seeded(rng: np.random.Generator | None) -> np.random.Generator:
    """The caller's generator; a seeded backend has no other source of randomness."""
    if rng is None:
        raise ValueError("a seeded noise backend draws from a seeded generator; none was given")
    return rng


class _Drawn:
    """`add` for a backend whose draws are added by numpy: values + draws of values' shape."""

    def add(self, kind: str, rng: np.random.Generator | None, scale: float,
            values: np.ndarray) -> np.ndarray:
        """`values` plus this backend's `kind` noise ("laplace" or "gaussian") at `scale`."""
        draw = self.laplace if kind == "laplace" else self.gaussian  # type: ignore[attr-defined]
        return values + draw(rng, scale, values.shape)


@dataclass(frozen=True)
class FloatNoise(_Drawn):
    """Continuous noise from the caller's seeded generator (standard draws times the scale),
    added in floating point: simulation only (Mironov 2012)."""

    name: ClassVar[str] = "float"
    reproducible: ClassVar[bool] = True
    integer: ClassVar[bool] = False

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        """Lap(0, b) draws; the same standard draws whatever b (common random numbers)."""
        return np.asarray(_seeded(rng).laplace(0.0, 1.0, size=shape) * scale, dtype=np.float64)

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        """N(0, sigma^2) draws; the same standard draws whatever sigma."""
        return np.asarray(_seeded(rng).standard_normal(size=shape) * sigma, dtype=np.float64)


@dataclass(frozen=True)
class IntegerNoise(_Drawn):
    """Discrete Laplace / Gaussian integers from the caller's seeded generator (the default)."""

    name: ClassVar[str] = "numpy"
    reproducible: ClassVar[bool] = True
    integer: ClassVar[bool] = True

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        """Discrete Laplace draws of scale `scale` (grid units), int64."""
        return discrete_laplace(_seeded(rng), scale, shape)

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        """Discrete Gaussian draws of parameter `sigma` (grid units), int64."""
        return discrete_gaussian(_seeded(rng), sigma, shape)


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
def _measurement(kind: str, scale: float) -> Callable[[list[int]], list[int]]:
    """OpenDP's vector discrete Laplace (l1) or discrete Gaussian (l2) measurement of this scale
    on 64-bit integer vectors."""
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    if kind == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=scale)
    return dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=scale)


@dataclass(frozen=True)
class OpenDPNoise:
    """Unseeded integer noise from OpenDP's exact samplers on the OS CSPRNG; `rng` is ignored."""

    name: ClassVar[str] = "opendp"
    reproducible: ClassVar[bool] = False
    integer: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """Fail at configuration time, with the extra to install, when OpenDP is missing."""
        _opendp()

    def add(self, kind: str, rng: np.random.Generator | None, scale: float,
            values: np.ndarray) -> np.ndarray:
        """OpenDP's measurement applied to the integer `values` themselves (int64 out)."""
        values = np.asarray(values)
        ints = values.astype(np.int64)
        if not np.array_equal(ints, values):
            raise ValueError("the opendp backend noises integers (grid units) only")
        if scale == 0.0 or ints.size == 0:
            return ints
        noisy = _measurement(kind, float(scale))(ints.ravel().tolist())
        return np.asarray(noisy, dtype=np.int64).reshape(ints.shape)

    def laplace(self, rng: np.random.Generator | None, scale: float, shape: Shape) -> np.ndarray:
        """Discrete Laplace draws (OpenDP's `make_laplace` on zeros, exact, CSPRNG), int64."""
        return self.add("laplace", rng, scale, np.zeros(shape, dtype=np.int64))

    def gaussian(self, rng: np.random.Generator | None, sigma: float, shape: Shape) -> np.ndarray:
        """Discrete Gaussian draws (OpenDP's `make_gaussian` on zeros, exact, CSPRNG), int64."""
        return self.add("gaussian", rng, sigma, np.zeros(shape, dtype=np.int64))


INTEGER_NOISE = IntegerNoise()
FLOAT_NOISE = FloatNoise()


def noise_backend(name: NoiseName) -> NoiseBackend:
    """The backend a run configuration names ("numpy", "opendp" or "float")."""
    if name == "numpy":
        return INTEGER_NOISE
    if name == "opendp":
        return OpenDPNoise()
    if name == "float":
        return FLOAT_NOISE
    raise ValueError(f"unknown noise backend {name!r}: choose one of {', '.join(NOISE_NAMES)}")


def noise_label(name: str) -> str:
    """A backend's name as the CLI and the ledger show it: 'float' says it is simulation only."""
    return f"{name} ({SIMULATION_ONLY})" if name == "float" else name


class RowSampler(Protocol):
    """A mechanism as `sample_rows` sees it: a sampler that knows whether it is seeded."""

    @property
    def reproducible(self) -> bool: ...

    def sample(self, rng: np.random.Generator | None, shape: Shape) -> np.ndarray: ...

    def add(self, rng: np.random.Generator | None, values: np.ndarray) -> np.ndarray: ...


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
    if not sampler.reproducible:
        return sampler.sample(None, (rows, *shape))
    first = sampler.sample(streams(0), shape)
    out = np.empty((rows, *first.shape), first.dtype)  # filled row by row: no list to stack
    out[0] = first
    for r in range(1, rows):
        out[r] = sampler.sample(streams(r), shape)
    return out


def add_rows(sampler: RowSampler, rngs: Sequence[np.random.Generator],
             values: np.ndarray) -> np.ndarray:
    """`values` (rows, ...) plus noise, row r's from `rngs[r]` in one addition (a seeded
    sampler's `add` is the row plus `sample` of its shape), or, unseeded, each row noised by the
    backend itself (`sampler.add`: OpenDP applies its measurement to the values)."""
    if not sampler.reproducible:
        return np.stack([sampler.add(None, row) for row in values])
    return values + sample_rows(sampler, rngs.__getitem__, len(values), values.shape[1:])
