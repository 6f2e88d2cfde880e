"""The server's rounds of one secure-aggregation cohort (`privrl.server.secagg_rounds`), in
process: a round closes when everyone it waits for is in or at its deadline, dropouts after key
agreement are unmasked away, too few inputs abort."""

from __future__ import annotations

import numpy as np
from privrl.server import secagg_rounds
from privrl.server.secagg_rounds import CohortRounds
from privrl.trust.secagg.protocol import CohortSetup, UserSession
from privrl.trust.secagg.wire import b64
from support.server import Apps, claim, create, spec

SETUP = CohortSetup(b"test cohort", size=4, min_survivors=3, length=5, bits=32, degree=3)
T = secagg_rounds.ROUND_TIMEOUT


def cohort(drop_after_keys: set[int]
           ) -> tuple[CohortRounds, dict[int, np.ndarray], dict[int, UserSession]]:
    """A cohort whose users in `drop_after_keys` vanish after their shares, driven until it
    waits for their masked inputs (at time 3)."""
    rng = np.random.default_rng(0)
    vectors = {i: rng.integers(-50, 50, 5) for i in range(4)}
    users = {i: UserSession(SETUP, i, v) for i, v in vectors.items()}
    rounds = CohortRounds(0, SETUP, opened=0.0)
    for user in users.values():
        assert rounds.round == 0
        rounds.aggregator.advertise(user.advertise())
        rounds.tick(1.0)
    assert rounds.round == 1  # every member joined: closed at once
    roster = rounds.aggregator.roster()
    for i, user in users.items():
        rounds.aggregator.share(i, user.share_keys(roster))
    rounds.tick(2.0)
    assert rounds.round == 2
    for i, user in users.items():
        if i not in drop_after_keys:
            rounds.aggregator.submit(i, user.masked_input(rounds.aggregator.inbox(i)))
    rounds.tick(3.0)
    return rounds, vectors, users


def test_a_member_lost_after_key_agreement_is_unmasked_away_at_the_deadline() -> None:
    rounds, vectors, users = cohort({2})
    assert rounds.round == 2  # still waiting for user 2's masked input
    rounds.tick(2.0 + T)  # its deadline
    assert rounds.round == 3 and rounds.aggregator.survivors == {0, 1, 3}
    for i in sorted(rounds.aggregator.survivors):
        rounds.aggregator.reveal(i, users[i].unmask(rounds.aggregator.survivors))
    rounds.tick(2.0 + T)
    assert rounds.total is not None and rounds.outcome is None
    np.testing.assert_array_equal(rounds.total, vectors[0] + vectors[1] + vectors[3])


def test_too_few_inputs_abort_the_cohort_at_the_deadline() -> None:
    rounds, _, _ = cohort({1, 2})
    assert rounds.outcome is None
    rounds.tick(2.0 + T)
    assert rounds.outcome == "aborted" and "only 2 users sent masked inputs" in rounds.why
    assert rounds.total is None


def test_joining_waits_for_the_newest_member() -> None:
    rounds = CohortRounds(0, SETUP, opened=0.0)
    rounds.aggregator.advertise(UserSession(SETUP, 0, np.zeros(5)).advertise())
    rounds.tick(secagg_rounds.JOIN_TIMEOUT - 1)
    assert rounds.round == 0 and rounds.outcome is None
    rounds.tick(secagg_rounds.JOIN_TIMEOUT)  # one member after the join timeout: too few
    assert rounds.outcome == "aborted"


def test_the_routes_refuse_strangers_and_malformed_messages(apps: Apps) -> None:
    client = apps()
    config = spec("secagg", episodes=8, epsilon=1.0, mechanism="gaussian", delta=1e-5,
                  schedule="batch:4", dropout=0.25)
    run_id = create(client, config)
    ticket = claim(client, run_id)
    base = f"/v1/runs/{run_id}/cohorts/0"
    keys = UserSession(SETUP, 0, np.zeros(5)).advertise()
    good = {"cipher_key": b64(keys.cipher_key), "mask_key": b64(keys.mask_key)}
    stranger = client.post(f"{base}/keys", json={"ticket": "x" * 32, **good})
    assert stranger.status_code == 403 and stranger.json()["code"] == "not_member"
    elsewhere = client.post(f"/v1/runs/{run_id}/cohorts/1/keys",
                            json={"ticket": ticket["ticket"], **good})
    assert elsewhere.status_code == 403  # episode 0 is in cohort 0
    garbled = client.post(f"{base}/keys", json={"ticket": ticket["ticket"],
                                                "cipher_key": "%%%", "mask_key": "%%%"})
    assert garbled.status_code == 422
    short = client.post(f"{base}/keys", json={"ticket": ticket["ticket"], "cipher_key": "AAAA",
                                              "mask_key": "AAAA"})
    assert short.status_code == 422  # keys are 32 bytes
    joined = client.post(f"{base}/keys", json={"ticket": ticket["ticket"], **good})
    assert joined.status_code == 200 and joined.json() == {"index": ticket["episode"] % 4}
    waiting = client.get(f"{base}/roster", params={"ticket": ticket["ticket"], "wait": 0})
    assert waiting.status_code == 202  # three members have not joined
    early = client.post(f"{base}/masked", json={"ticket": ticket["ticket"], "masked": [1]})
    assert early.status_code == 422  # the cohort is in round 0
    unknown = client.get(f"/v1/runs/{run_id}/cohorts/5", params={"wait": 0})
    assert unknown.status_code == 404
