"""privrl: differentially private exploration in episodic RL, as a library, a server and users.

    import privrl
    res = privrl.simulate("dp-ucbvi", world="riverswim", epsilon=1.0,
                          mechanism="gaussian", episodes=20_000, seeds=5)

`privrl.worlds` makes and lists worlds (`make`, `list_worlds`; each also a `gymnasium.Env`),
`privrl.algorithms` holds the plug-in contract and the registry, `privrl.lab` the in-process
experiments. `privrl.server` and `privrl.client` are the two processes of the protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["Results", "__version__", "list_worlds", "make_world", "simulate"]

if TYPE_CHECKING:
    from .lab.results import Results, simulate
    from .worlds.registry import list_worlds
    from .worlds.registry import make as make_world


def __getattr__(name: str) -> Any:
    """Import the heavier parts (matplotlib, tqdm) only when they are used."""
    if name in ("simulate", "Results"):
        from .lab import results

        return getattr(results, name)
    if name in ("make_world", "list_worlds"):
        from .worlds import registry

        return registry.make if name == "make_world" else registry.list_worlds
    raise AttributeError(f"module 'privrl' has no attribute {name!r}")
