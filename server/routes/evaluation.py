"""Exact regret of a run in a public named world: the evaluator's computation, served.

Pure post-processing of public data (the run's policy log and a world from privrl's registry,
with its default parameters); the learner never sees it. The server does not know which world a
run's users live in: the caller names a public world, and a world whose (S, A) differs from the
run's model class is refused. Worlds read from files are never opened here.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from functools import lru_cache

from fastapi import Query, Request
from privrl.evaluation import regret_from_log
from privrl.protocol import PolicyLog, RegretView
from privrl.server.errors import Refusal, error_responses
from privrl.server.routes.common import in_thread, public_router, registry_of
from privrl.worlds import optimal_return, uniform_random_return
from privrl.worlds.registry import list_worlds, make
from privrl.worlds.tabular import TabularMDP, WorldError

router = public_router()
CACHED_RUNS = 64  # (run, world) pairs whose per-version regrets are kept between calls


@lru_cache(maxsize=1)
def public_worlds() -> tuple[str, ...]:
    """The concrete world names of the registry (no file paths, no gymnasium:<EnvId> pattern)."""
    return tuple(w.name for w in list_worlds() if "<" not in w.name and w.name != "FILE.npz")


@lru_cache(maxsize=32)
def _world(name: str, horizon: int) -> tuple[TabularMDP, float, float]:
    """A public world with its default parameters, V*_1 and the random policy's return."""
    mdp = make(name, horizon)
    if not isinstance(mdp, TabularMDP):
        raise WorldError(f"it is a {type(mdp).__name__}, not an MDP: it has no regret")
    return mdp, optimal_return(mdp), uniform_random_return(mdp)


class _VersionCache:
    """Per-version regrets already computed, for the most recently asked (run, world) pairs."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[tuple[str, str, int], dict[int, float]] = OrderedDict()

    def get(self, key: tuple[str, str, int]) -> dict[int, float]:
        """The known regrets of `key` (an empty dict the first time)."""
        known = self.data.pop(key, {})
        self.data[key] = known
        while len(self.data) > self.size:
            self.data.popitem(last=False)
        return known


_CACHE = _VersionCache(CACHED_RUNS)


def run_regret(run_id: str, created_at: float, world: str, horizon: int, states: int,
               actions: int, log: PolicyLog) -> RegretView:
    """The regret view of `log` in the public `world` (blocking: numpy)."""
    try:
        mdp, optimal, uniform = _world(world, horizon)
    except WorldError as exc:
        raise Refusal(422, "world", f"world {world!r}: {exc}") from None
    if (mdp.S, mdp.A) != (states, actions):
        raise Refusal(
            422,
            "world",
            f"the public world {world!r} has (S, A) = {(mdp.S, mdp.A)} but run {run_id} is for"
            f" {(states, actions)}: name the world its users live in",
        )
    known = _CACHE.get((run_id, world, int(created_at * 1e6)))
    try:
        evaluation = regret_from_log(mdp, log, known)
    except ValueError as exc:
        raise Refusal(422, "world", f"run {run_id} in world {world!r}: {exc}") from None
    return RegretView(
        run_id=run_id,
        world=world,
        horizon=horizon,
        regret=[round(float(x), 6) for x in evaluation.regret],
        cumulative=evaluation.cumulative,
        optimal_return=optimal,
        random_policy_per_episode=optimal - uniform,
    )


@router.get(
    "/{run_id}/regret",
    response_model=RegretView,
    responses=error_responses(
        404, 422, 503,
        described={422: "`world` is not a public world of the registry (`code` \"schema\"), or"
                   " its (S, A) differs from the run's (`code` \"world\"); or a query parameter"
                   " this route does not take"},
    ),
    summary="Exact regret of the run's served policies in a public named world",
)
async def regret(
    run_id: str,
    request: Request,
    world: str = Query(
        ...,
        description="a public world of privrl's registry with its default parameters, e.g."
        " 'riverswim' (`privrl worlds` lists them); the run's horizon is used",
        json_schema_extra={"enum": list(public_worlds())},
    ),
) -> RegretView:
    """Regret of every reported episode (V*_1 - V^pi_1 of the policy it was served), computed
    from the public policy log in the named world; nothing is fed back to the learner."""
    hosted = registry_of(request).get(run_id)
    if world not in public_worlds():
        raise Refusal(422, "schema", f"world {world!r} is not a public named world: use one of"
                      f" {', '.join(public_worlds())}")
    log = await in_thread(hosted.readable(time.time()).policy_log)  # the snapshot's: no lock
    cfg = hosted.config
    return await in_thread(run_regret, hosted.id, hosted.row.created_at, world, cfg.horizon,
                           cfg.n_states, cfg.n_actions, log)
