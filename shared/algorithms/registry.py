"""Algorithms by name (gymnasium's registry): register once, make anywhere."""

from __future__ import annotations

import importlib

from ..config import RunConfig
from .base import Algorithm

_REGISTRY: dict[str, type[Algorithm]] = {}


def register(algorithm: type[Algorithm]) -> type[Algorithm]:
    """Add an algorithm class under its `name` (usable as a class decorator)."""
    name = getattr(algorithm, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{algorithm!r} has no `name`")
    known = _REGISTRY.get(name)
    if known is not None and known is not algorithm:
        raise ValueError(f"an algorithm named {name!r} is already registered ({known!r})")
    _REGISTRY[name] = algorithm
    return algorithm


def get(name: str) -> type[Algorithm]:
    """The algorithm registered as `name` (a clear error listing the known ones otherwise)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}; registered: {', '.join(sorted(_REGISTRY))}"
        ) from None


def check(config: RunConfig) -> type[Algorithm]:
    """The algorithm `config` names, once it is known to have the privacy mode and knobs
    `config` asks for (what a run's schema states; `bind` refuses the rest); ValueError
    otherwise."""
    algorithm = get(config.algo)
    algorithm.check_mode(config.privacy)
    algorithm.resolve_knobs(config.preset, config.knobs)
    return algorithm


def effective(config: RunConfig) -> RunConfig:
    """The configuration `config`'s runs use (its preset's schedule and counter filled in),
    once `check`ed: what a server stores and shows."""
    return check(config).effective_config(config)


def bind(config: RunConfig) -> Algorithm:
    """The algorithm `config` names, bound to it; ValueError for an unknown algorithm, a privacy
    mode or knobs it does not have, or a configuration its own rules across fields refuse.
    Its `config` is `effective(config)`."""
    return get(config.algo)(config)


def names() -> list[str]:
    """Every registered algorithm name, sorted."""
    return sorted(_REGISTRY)


def load_plugins(modules: str) -> None:
    """Import third-party plug-in modules (comma-separated), which call `register` on import."""
    for module in filter(None, (m.strip() for m in modules.split(","))):
        importlib.import_module(module)
