"""Share of a claim's server-side latency spent planning, on an in-process server.

    python scripts/claim_planning_share.py [--episodes 300] [--privacy none jdp ldp]

Runs RiverSwim (H = 20) sequentially through the real FastAPI app and SQLite store (in-process
ASGI client: no network), one user at a time, and times every POST /claims and, inside it, the
learner's `plan` (the compiled planner: `privrl warmup` first, or the first plan compiles it).
The machine's load inflates both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from privrl.algorithms import bind
from privrl.algorithms.ucbvi import UCBVILearner
from privrl.config import RunConfig
from privrl.protocol import PolicyPayload, RunRequest
from privrl.run import user_episode
from privrl.server.app import create_app
from privrl.server.settings import Settings
from privrl.worlds.tabular import riverswim

ADMIN = "planning-share-admin-token-0123"


def main(argv: list[str]) -> int:
    """Print, per privacy mode, the median claim latency and the planning share of its sum."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--privacy", nargs="+", default=["none", "jdp", "ldp"])
    args = parser.parse_args(argv)
    mdp = riverswim(20)
    planned: list[float] = []
    original = UCBVILearner.plan

    def timed_plan(self, billboard, reported):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original(self, billboard, reported)
        finally:
            planned.append(time.perf_counter() - start)

    UCBVILearner.plan = timed_plan  # type: ignore[method-assign]
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(admin_token=ADMIN, db=Path(tmp) / "share.db", sequential=True)
        with TestClient(create_app(settings)) as client:
            while client.get("/readyz").status_code != 200:  # the store is being opened
                time.sleep(0.01)
            for privacy in args.privacy:
                request = RunRequest(n_states=6, n_actions=2, horizon=20, episodes=args.episodes,
                                     privacy=privacy, epsilon=1.0, delta=1e-5,
                                     mechanism="gaussian", preset="practical", seed=7)
                body = request.model_dump(mode="json", exclude_none=True)
                created = client.post("/v1/runs", json=body, headers=auth)
                assert created.status_code == 201, created.text
                run_id = created.json()["id"]
                config: RunConfig = request.public()
                algorithm = bind(config)
                calibration = algorithm.calibration()
                claims, plans = [], []
                for _ in range(args.episodes):
                    before = len(planned)
                    start = time.perf_counter()
                    ticket = client.post(f"/v1/runs/{run_id}/claims").json()
                    claims.append(time.perf_counter() - start)
                    plans.append(sum(planned[before:]))
                    message = PolicyPayload.model_validate(ticket["policy"]).message()
                    traj, noisy = user_episode(mdp, message, [11], ticket["episode"], algorithm,
                                               calibration)
                    report = ({"kind": "noisy", "ticket": ticket["ticket"], "arrays": {
                        k: v[0].ravel().tolist() for k, v in noisy.items()}} if noisy else {
                        "kind": "trajectory", "ticket": ticket["ticket"],
                        "states": traj.states[0].tolist(), "actions": traj.actions[0].tolist(),
                        "rewards": traj.rewards[0].tolist()})
                    assert client.post(f"/v1/runs/{run_id}/reports", json=report).status_code \
                        == 200
                claims, plans = claims[10:], plans[10:]  # past the first (kernel loading) claims
                print(f"{privacy:>4}: claim p50 {1e3 * statistics.median(claims):.2f} ms, planning"
                      f" p50 {1e3 * statistics.median(plans):.3f} ms, planning share"
                      f" {100 * sum(plans) / sum(claims):.1f}% of claim latency")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
