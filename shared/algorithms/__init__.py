"""privrl's algorithms as plug-ins: the contract (`base`), the registry, and the built-ins.

Importing this package registers every built-in algorithm. A third-party algorithm subclasses
`Algorithm` and calls `register` (servers import such modules named in PRIVRL_PLUGINS).
"""

from . import (  # noqa: F401  (importing a module registers its algorithms)
    linmdp,  # lsvi-ucb-batched, lsvi-ucb-switching
    linmix,  # ucrl-vtr, linopt-vi, linopt-po
    policy_eval,  # dp-lsw, dp-lsl
    ucbvi,  # dp-ucbvi
)
from .base import Algorithm, Family, Learner, NoKnobs, PolicyMessage
from .registry import bind, check, configure, effective, get, load_plugins, names, register

__all__ = [
    "Algorithm",
    "Family",
    "Learner",
    "NoKnobs",
    "PolicyMessage",
    "bind",
    "check",
    "configure",
    "effective",
    "get",
    "load_plugins",
    "names",
    "register",
]
