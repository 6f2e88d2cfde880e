"""The episode-replay attack on LDP users, for tests: a deliberately vulnerable user that keys its
local noise on the episode index the server sends (the flaw of issue 40: the noise generator
re-created from the user's seed and a server-chosen index). Behind the rewriting proxy
(`privrl.client.audit.replay`, `privrl audit replay-proxy`) every one of its reports carries the
same noise; `privrl audit proxy` and `privrl audit server` must catch it, and pass privrl's own
users (`privrl.client.users.play`) behind the same proxy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy.grid import bernoulli_rewards
from privrl.privacy.privatizers import randomize_locally
from privrl.protocol import PolicyPayload
from privrl.seeding import generator


def vulnerable_report(ticket: dict[str, Any], config: RunConfig, world: Any, client_seed: int,
                      nonce: int) -> tuple[dict[str, Any], tuple[list[int], list[int]]]:
    """What a vulnerable LDP user posts for `ticket` (the flaw of issue 40: its noise generator
    is re-created from its seed and the server's episode index, so a server that repeats the
    index gets the same noise again), and its true (states, actions). Its trajectory comes from
    its own stream (`nonce`: a number it never reuses), so the reports differ by their data."""
    algorithm = bind(config)
    calibration = algorithm.calibration()
    message = PolicyPayload.model_validate(ticket["policy"]).message()
    rng = generator(client_seed, "replay-test", "play", nonce)
    played = algorithm.play(world, message, [rng])
    if calibration.integer and algorithm.integer_rewards:
        played = bernoulli_rewards(played, [rng])
    stats = algorithm.user_statistics(played, message)
    noise = generator(client_seed, "replay-test", "episode", int(ticket["episode"]))
    noisy = randomize_locally(stats, calibration, [noise])
    body = {"kind": "noisy", "ticket": ticket["ticket"],
            "arrays": {name: np.asarray(arr[0]).ravel().tolist() for name, arr in noisy.items()}}
    return body, (played.states[0].tolist(), played.actions[0].tolist())

