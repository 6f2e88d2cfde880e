"""Algorithms by name (gymnasium's registry): register once, make anywhere."""

from __future__ import annotations

import importlib

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


def names() -> list[str]:
    """Every registered algorithm name, sorted."""
    return sorted(_REGISTRY)


def load_plugins(modules: str) -> None:
    """Import third-party plug-in modules (comma-separated), which call `register` on import."""
    for module in filter(None, (m.strip() for m in modules.split(","))):
        importlib.import_module(module)
