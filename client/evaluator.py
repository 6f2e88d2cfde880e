"""The evaluator: exact regret of a run from the true world and the public policy log.

It reads only public data (the run's configuration and `GET /v1/runs/{id}/policies`) and never
feeds anything back: regret of episode k is d1 · (V*_1 - V^{pi_k}_1) for the policy version the
server served at episode k's claim, computed by backward induction in the true world.
"""

from __future__ import annotations

from privrl.client.api import ApiError, ServerAPI
from privrl.regret import RunRegret, regret_from_log
from privrl.worlds.tabular import TabularMDP


def evaluate(server: str, run_id: str, mdp: TabularMDP, api: ServerAPI | None = None) -> RunRegret:
    """Fetch the public policy log of `run_id` and compute the exact regret in `mdp`."""
    own = api is None
    api = api or ServerAPI(server)
    try:
        cfg = api.get_run(run_id).config
        if (mdp.S, mdp.A, mdp.H) != (cfg.n_states, cfg.n_actions, cfg.horizon):
            raise ApiError(
                f"the true world has (S, A, H) = {(mdp.S, mdp.A, mdp.H)} but run {run_id} is "
                f"for {(cfg.n_states, cfg.n_actions, cfg.horizon)}: pass matching world options"
            )
        log = api.policies(run_id)
    finally:
        if own:
            api.close()
    try:
        return regret_from_log(mdp, log)
    except ValueError as exc:
        raise ApiError(f"policy log of run {run_id}: {exc}") from None
