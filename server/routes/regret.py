"""Exact regret of a run in a public named world: the evaluator's computation, served.

Pure post-processing of public data (the run's policy log and a world from privrl's registry,
with its default parameters); the learner never sees it. The server does not know which world a
run's users live in: the caller names a public world, and a world whose (S, A) differs from the
run's model class is refused. Worlds read from files are never opened here. A world's (S, A) is
read at a tiny horizon first, so one whose H*S*A*S exceeds PRIVRL_MAX_CELLS is refused before
anything of its size is built; the caches are bounded in bytes and build each key once at a time.
"""

from __future__ import annotations

import sys
import time
from functools import lru_cache

import numpy as np
from fastapi import Query, Request
from privrl.protocol import PolicyLog, RegretView
from privrl.regret import regret_from_log
from privrl.server.cache import ByteCache
from privrl.server.deps import run_table_of, settings_of
from privrl.server.errors import Refusal, error_responses
from privrl.server.routes.common import public_router
from privrl.server.service import in_thread
from privrl.verdict import judge
from privrl.worlds import optimal_return, uniform_random_return
from privrl.worlds.registry import list_worlds, make
from privrl.worlds.tabular import TabularMDP, WorldError

router = public_router()
WORLD_CACHE_BYTES = 64 * 2**20  # worlds kept between calls (their arrays' bytes)
REGRET_CACHE_BYTES = 16 * 2**20  # per-version regrets kept between calls (estimated bytes)
PROBE_HORIZONS = (1, 2)  # a world's (S, A) is read from its build at the first it accepts
World = tuple[TabularMDP, float, float]  # a world, V*_1 and the random policy's return


@lru_cache(maxsize=1)
def public_worlds() -> tuple[str, ...]:
    """The concrete world names of the registry (no file paths, no gymnasium:<EnvId> pattern)."""
    return tuple(w.name for w in list_worlds() if "<" not in w.name and w.name != "FILE.npz")


def _nbytes(value: object) -> int:
    """Bytes of the numpy arrays a value holds (a world's, or a tuple's members')."""
    if isinstance(value, tuple):
        return sum(_nbytes(v) for v in value)
    fields = getattr(value, "__dict__", {})
    return sum(a.nbytes for a in fields.values() if isinstance(a, np.ndarray))


def _probe(name: str) -> tuple[int, int]:
    """(S, A) of a public world at a tiny horizon: a stationary table's cost, never H times it
    (every public world's (S, A) is at most Taxi's (500, 6): a few MB here)."""
    error: WorldError | None = None
    for horizon in PROBE_HORIZONS:
        try:
            mdp = make(name, horizon)
        except WorldError as exc:
            error = exc
            continue
        return int(mdp.S), int(mdp.A)
    assert error is not None
    raise error


_SHAPES: ByteCache[str, tuple[int, int]] = ByteCache(2**16, lambda _: 64)
_WORLDS: ByteCache[tuple[str, int], World] = ByteCache(WORLD_CACHE_BYTES, _nbytes)
_REGRETS: ByteCache[tuple[str, str, int], dict[int, float]] = ByteCache(
    REGRET_CACHE_BYTES, lambda known: sys.getsizeof(known) + 64 * len(known)
)


def _world(run_id: str, name: str, horizon: int, states: int, actions: int,
           max_cells: int) -> World:
    """The public world `name` over `horizon` steps, refused (422) before it is built when
    H * S^2 * A of it would exceed `max_cells`, and after when its (S, A) is not the run's."""
    try:
        S, A = _SHAPES.get(name, lambda: _probe(name))
    except WorldError as exc:
        raise Refusal(422, "world", f"world {name!r}: {exc}") from None
    cells = horizon * S * S * A
    if cells > max_cells:
        raise Refusal(
            422, "world",
            f"the public world {name!r} has (S, A) = {(S, A)}: over run {run_id}'s horizon"
            f" {horizon} it has H*S*A*S = {cells} entries, more than this server builds"
            f" ({max_cells}, PRIVRL_MAX_CELLS); run {run_id} is for {(states, actions)}",
        )

    def check(mdp: TabularMDP) -> None:
        if (mdp.S, mdp.A) != (states, actions):
            raise Refusal(
                422,
                "world",
                f"the public world {name!r} has (S, A) = {(mdp.S, mdp.A)} but run {run_id} is"
                f" for {(states, actions)}: name the world its users live in",
            )

    def build() -> World:
        mdp = make(name, horizon)
        if not isinstance(mdp, TabularMDP):
            raise WorldError(f"it is a {type(mdp).__name__}, not an MDP: it has no regret")
        check(mdp)  # refused before it is kept
        return mdp, optimal_return(mdp), uniform_random_return(mdp)

    try:
        world = _WORLDS.get((name, horizon), build)
    except WorldError as exc:
        raise Refusal(422, "world", f"world {name!r}: {exc}") from None
    check(world[0])  # kept for another run of that shape
    return world


def run_regret(run_id: str, created_at: float, world: str, horizon: int, states: int,
               actions: int, log: PolicyLog, max_cells: int) -> RegretView:
    """The regret view of `log` in the public `world` (blocking: numpy)."""
    mdp, optimal, uniform = _world(run_id, world, horizon, states, actions, max_cells)
    key = (run_id, world, int(created_at * 1e6))
    known = _REGRETS.get(key, dict)
    try:
        served = regret_from_log(mdp, log, known)
    except ValueError as exc:
        raise Refusal(422, "world", f"run {run_id} in world {world!r}: {exc}") from None
    _REGRETS.put(key, known)  # re-measured: it grew by the versions computed now
    return RegretView(
        run_id=run_id,
        world=world,
        horizon=horizon,
        regret=[round(float(x), 6) for x in served.regret],
        cumulative=served.cumulative,
        optimal_return=optimal,
        random_policy_per_episode=optimal - uniform,
        verdict=judge(served.regret, optimal - uniform) if len(served.regret) else None,
    )


@router.get(
    "/{run_id}/regret",
    response_model=RegretView,
    responses=error_responses(
        404, 422, 503,
        described={422: "`world` is not a public world of the registry (`code` \"schema\"), or"
                   " its (S, A) differs from the run's, or its H*S*A*S exceeds PRIVRL_MAX_CELLS"
                   " (`code` \"world\"); or a query parameter"
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
    from the public policy log in the named world; nothing is fed back to the learner. A world
    whose H*S*A*S over the run's horizon exceeds PRIVRL_MAX_CELLS is refused unbuilt."""
    hosted = run_table_of(request).get(run_id)
    if world not in public_worlds():
        raise Refusal(422, "schema", f"world {world!r} is not a public named world: use one of"
                      f" {', '.join(public_worlds())}")
    log = await in_thread(hosted.readable(time.time()).policy_log)  # the snapshot's: no lock
    cfg = hosted.config
    return await in_thread(run_regret, hosted.id, hosted.row.created_at, world, cfg.horizon,
                           cfg.n_states, cfg.n_actions, log, settings_of(request).max_cells)
