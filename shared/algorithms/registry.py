"""Algorithms by name (gymnasium's registry): register once, make anywhere.

Third-party algorithms come in two ways: the entry-point group `privrl.algorithms` (a name ->
an `Algorithm` subclass, or a module that registers its algorithms on import), loaded on first
use, or modules named in PRIVRL_PLUGINS (`load_plugins`), imported at start.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from .. import trust
from ..config import RunConfig
from .base import Algorithm

_REGISTRY: dict[str, type[Algorithm]] = {}
ENTRY_POINTS = "privrl.algorithms"
_entry_points_loaded = False


def _load_entry_points() -> None:
    """Register the algorithms installed packages offer through the entry-point group (once)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for point in entry_points(group=ENTRY_POINTS):
        if point.name in _REGISTRY:
            continue
        loaded = point.load()  # a module registers its algorithms as it is imported
        if inspect.isclass(loaded) and issubclass(loaded, Algorithm):
            register(loaded)
        elif not inspect.ismodule(loaded):
            raise TypeError(f"entry point {point.name!r} of {ENTRY_POINTS!r} is neither an"
                            f" Algorithm subclass nor a module: {loaded!r}")


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


VERSIONED = re.compile(r"(?P<name>.+)-v(?P<version>[0-9]+)")


def get(name: str) -> type[Algorithm]:
    """The algorithm registered as `name`, or as `name-vN` if N is its version (a clear error
    listing the known ones, or naming the version this privrl has, otherwise)."""
    _load_entry_points()
    if name in _REGISTRY:
        return _REGISTRY[name]
    versioned = VERSIONED.fullmatch(name)
    if versioned is not None and versioned["name"] in _REGISTRY:
        algorithm = _REGISTRY[versioned["name"]]
        if int(versioned["version"]) == algorithm.version:
            return algorithm
        raise ValueError(f"{name!r}: this privrl has {algorithm.versioned_id()!r}, whose numbers"
                         " differ (CHANGELOG.md says how); results of another version come"
                         " from the privrl that made them")
    raise ValueError(f"unknown algorithm {name!r}; registered: {', '.join(sorted(_REGISTRY))}")


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


def configure(fields: Mapping[str, Any]) -> RunConfig:
    """A RunConfig from `fields`, given neither mechanism nor delta the algorithm's mechanism
    across the run's boundary (`Algorithm.mechanism_for`, its delta then the population rule's):
    a run created without them is the frontier's row. A delta given alone keeps RunConfig's
    default (Laplace at delta 0, as the schema states). An unknown algorithm or boundary is
    left for `check` to refuse."""
    if "mechanism" not in fields and "delta" not in fields:
        default = RunConfig.model_fields
        algo, privacy = (fields.get(k, default[k].default) for k in ("algo", "privacy"))
        try:
            mechanism = get(algo).mechanism_for(trust.get(privacy))
        except (ValueError, TypeError):
            return RunConfig.model_validate(fields)
        fields = {**fields, "mechanism": mechanism}
    return RunConfig.model_validate(fields)


def names() -> list[str]:
    """Every registered algorithm name, sorted."""
    _load_entry_points()
    return sorted(_REGISTRY)


def load_plugins(modules: str) -> None:
    """Import third-party plug-in modules (comma-separated), which call `register` on import."""
    for module in filter(None, (m.strip() for m in modules.split(","))):
        importlib.import_module(module)
