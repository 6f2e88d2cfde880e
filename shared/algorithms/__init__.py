"""privrl's algorithms as plug-ins: the contract (`base`), the registry, and the built-ins.

Importing this package registers every built-in algorithm. A third-party algorithm subclasses
`Algorithm` and calls `register` (servers import such modules named in PRIVRL_PLUGINS).
"""

from . import policy_eval, ucbvi  # noqa: F401  (registers dp-lsw, dp-lsl and dp-ucbvi)
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
