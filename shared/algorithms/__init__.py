"""privrl's algorithms as plug-ins: the contract (`base`), the registry, and the built-ins.

Importing this package registers every built-in algorithm. A third-party algorithm subclasses
`Algorithm` and calls `register` (servers import such modules named in PRIVRL_PLUGINS).
"""

from . import (
    linmix,  # noqa: F401  (registers ucrl-vtr, linopt-vi, linopt-po)
    ucbvi,  # noqa: F401  (registers dp-ucbvi)
)
from .base import PRIVACY_MODES, Algorithm, Family, Learner, NoKnobs, PolicyMessage
from .registry import get, load_plugins, names, register

__all__ = [
    "PRIVACY_MODES",
    "Algorithm",
    "Family",
    "Learner",
    "NoKnobs",
    "PolicyMessage",
    "get",
    "load_plugins",
    "names",
    "register",
]
