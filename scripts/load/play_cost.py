"""What one simulated user's episode costs its process, without HTTP: parse the ticket, play it
(rollout, statistics, local randomizer in LDP), encode the report body.

    python scripts/load/play_cost.py [--calls 2000] [--rounds 5]

Claims one real ticket per mode from an in-process server (the real app over FastAPI's test
client, a temporary database), then times `Ticket.model_validate_json` + `privrl.client.users.play`
on it with a fresh user seed per call; prints the best of `--rounds` means in microseconds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from privrl.client.load.bench import bench_config
from privrl.client.user_state import UserState
from privrl.client.users import UserContext, play
from privrl.protocol import RunInfo, RunRequest, Ticket
from privrl.server.app import create_app
from privrl.server.settings import Settings
from privrl.worlds import riverswim

ADMIN = "play-cost-admin-token-0123456789"


def ticket_bytes(client: TestClient, privacy: str) -> tuple[UserContext, bytes]:
    """A fresh bench run of `privrl bench http` (RiverSwim H = 20, pooled) and one claim's body."""
    spec = RunRequest(**bench_config(privacy, 10.0).model_dump(), seed=5)
    resp = client.post("/v1/runs", json=spec.model_dump(mode="json", exclude_none=True),
                       headers={"Authorization": f"Bearer {ADMIN}"})
    resp.raise_for_status()
    info = RunInfo.model_validate_json(resp.content)
    claim = client.post(f"/v1/runs/{info.id}/claims", content=b"{}",
                        headers={"Content-Type": "application/json"})
    claim.raise_for_status()
    return UserContext.create(info, riverswim(20)), claim.content


def main() -> None:
    """Time every mode and print one line each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(db=Path(tmp) / "play.db", admin_token=ADMIN))
        with TestClient(app) as client:
            while client.get("/readyz").status_code != 200:  # the store's runs rebuilt
                time.sleep(0.05)
            for privacy in ("jdp", "ldp"):
                ctx, content = ticket_bytes(client, privacy)
                best, seed = float("inf"), 0
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    for _ in range(args.calls):
                        seed += 1
                        state = UserState(seed, None)  # in memory: a seed of its own
                        _, body = play(ctx, Ticket.model_validate_json(content), state)
                    best = min(best, (time.perf_counter() - start) / args.calls)
                print(f"{privacy}: {1e6 * best:.0f} us per episode (parse, play, encode),"
                      f" report body {len(body)} bytes")


if __name__ == "__main__":
    main()
