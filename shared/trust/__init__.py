"""Trust boundaries, registered by name as algorithms are (docs/explanation/trust.md).

A boundary says who must be trusted with what, and owns every part of a run that depends on it:
its name, label and colour; the users' side (nothing, or local noise); the report kind it turns
an algorithm's raw report into; the server's privatizer (exact sums, central counters, or the
aggregator of noisy reports); how a release's noise variance grows with the items it sums, which
learners read; how far an accepted noisy entry may lie outside its clean range; and its cohort
(1 user: no exchange between users). Nothing else branches on a boundary's name.

Built in: `none` (non-private), `jdp` (`privrl.trust.central`: a trusted server noises what it
publishes), `ldp` (`privrl.trust.local`: users noise their reports) and `secagg`
(`privrl.trust.secagg`: users add shares of the noise and mask their reports; the server learns
only cohort sums). Others come from the
entry-point group `privrl.trust` (a name -> a `TrustBoundary` instance), loaded on first use.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from privrl.trust.base import TrustBoundary

__all__ = ["BUILTIN", "DEFAULT", "TrustBoundary", "baseline", "by_exposure", "central_boundary",
           "cohort_boundary", "default", "find", "get", "local_boundary", "names", "register"]

# the built-in boundaries and the modules that define them, imported on first use (they sit
# above the privacy layer, which reads the registry: a module-level import would be a cycle)
BUILTIN = {"none": "privrl.trust.none", "jdp": "privrl.trust.central",
           "ldp": "privrl.trust.local", "secagg": "privrl.trust.secagg.boundary"}
ENTRY_POINTS = "privrl.trust"
# the boundary a run takes when it names none: the papers' joint DP (a trusted server); a name,
# so that the configuration's schema can state it before any boundary is imported
DEFAULT = "jdp"

_registry: dict[str, TrustBoundary] = {}
_loaded = False


def register(boundary: TrustBoundary) -> TrustBoundary:
    """Add `boundary` under its name (a name is registered once; the built-ins come first)."""
    _load()
    old = _registry.get(boundary.name)
    if old is not None and old is not boundary:
        raise ValueError(f"a trust boundary named {boundary.name!r} is registered already")
    _registry[boundary.name] = boundary
    return boundary


def _load() -> None:
    """Import the built-in boundaries, then the entry points' (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN.values():
        importlib.import_module(module)
    for point in entry_points(group=ENTRY_POINTS):
        if point.name not in _registry:
            register(point.load())


def get(name: str) -> TrustBoundary:
    """The boundary registered as `name`; a ValueError names the known ones."""
    _load()
    try:
        return _registry[name]
    except KeyError:
        raise ValueError(f"unknown trust boundary {name!r}: known are"
                         f" {', '.join(names())}") from None


def names() -> tuple[str, ...]:
    """Every registered boundary's name, the built-ins first."""
    _load()
    return tuple(_registry)


def default() -> TrustBoundary:
    """The boundary a run takes when it names none (`DEFAULT`)."""
    return get(DEFAULT)


def find(**declared: object) -> TrustBoundary | None:
    """The first registered boundary (the built-ins first) whose attributes have the
    `declared` values, e.g. `find(private=False)`; None if there is none. Code that needs
    "the local boundary" asks for what it declares, never for its name."""
    _load()
    for boundary in _registry.values():
        if all(getattr(boundary, key) == value for key, value in declared.items()):
            return boundary
    return None


def baseline() -> TrustBoundary:
    """The non-private boundary: users send raw reports, nothing is spent."""
    found = find(private=False)
    assert found is not None, "the built-in non-private boundary is always registered"
    return found


def central_boundary() -> TrustBoundary:
    """The boundary whose trusted server noises sums through its central counters (JDP)."""
    found = find(private=True, counters=True)
    assert found is not None, "the built-in central boundary is always registered"
    return found


def local_boundary() -> TrustBoundary | None:
    """The boundary whose every user noises its own report alone (LDP): local noise, no
    cohort; None if there is none."""
    return find(private=True, local_noise=True, cohort_size=1)


def cohort_boundary() -> TrustBoundary | None:
    """The boundary whose users noise shares and mask them, the server summing cohorts
    (secure aggregation); None if there is none."""
    return find(private=True, cohorts=True)


def exposure(boundary: TrustBoundary) -> tuple[bool, bool, bool]:
    """A sort key from what the server is trusted with most to least: nothing private; raw
    reports it noises itself; only cohort sums of noisy shares; each user's noisy report."""
    return boundary.private, boundary.local_noise, not boundary.cohorts


def by_exposure() -> tuple[TrustBoundary, ...]:
    """Every registered boundary, from the one that trusts the server most to the one that
    trusts it least (`exposure`; the registry's order among equals): the order of the demo's
    runs, side by side."""
    _load()
    return tuple(sorted(_registry.values(), key=exposure))
