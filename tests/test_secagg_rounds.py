"""The server's rounds of one secure-aggregation cohort (`privrl.server.secagg_rounds`), in
process: a round closes when everyone it waits for is in or at its deadline, dropouts after key
agreement are unmasked away, too few inputs abort."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.algorithms import bind
from privrl.protocol import RunInfo
from privrl.server import secagg_rounds
from privrl.server.secagg_rounds import CohortRounds
from privrl.trust.secagg.protocol import CohortAggregator, CohortSetup, UserSession
from privrl.trust.secagg.wire import b64, cohort_setup, roster_of, unb64
from support.server import Apps, claim, create, spec, state

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
    assert rounds.frozen and rounds.total is None  # the caller rebuilds the sum, off the loop
    rounds.rebuilt(rounds.rebuild())
    assert rounds.total is not None and rounds.outcome is None
    assert rounds.round == 3  # until the run took the sum: its outcome is not known yet
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


class Member:
    """One honest member of a cohort over the routes (a TestClient), with a zero vector."""

    def __init__(self, client: TestClient, run_id: str, ticket: dict[str, Any]) -> None:
        info = RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json())
        calibration = bind(info.config).calibration()
        assert calibration.cohort is not None
        length = sum(int(np.prod(f.shape)) for f in calibration.families)
        size = calibration.cohort.size
        self.client, self.me = client, ticket["ticket"]
        self.cohort = ticket["episode"] // size
        self.user = UserSession(cohort_setup(run_id, calibration.cohort, self.cohort, length),
                                ticket["episode"] % size, np.zeros(length, dtype=np.int64))
        self.base = f"/v1/runs/{run_id}/cohorts/{self.cohort}"

    def post(self, what: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(f"{self.base}/{what}", json={"ticket": self.me, **body})

    def get(self, what: str) -> httpx.Response:
        return self.client.get(f"{self.base}/{what}", params={"ticket": self.me, "wait": 0})

    def join(self) -> httpx.Response:
        ad = self.user.advertise()
        return self.post("keys", {"cipher_key": b64(ad.cipher_key), "mask_key": b64(ad.mask_key)})

    def share(self) -> None:
        keys = self.get("roster").json()["keys"]
        roster = roster_of(keys)
        sealed = self.user.share_keys(roster)
        assert self.post("shares", {"shares": {str(v): b64(s) for v, s in sealed.items()}}
                         ).status_code == 200

    def mask(self) -> None:
        inbox = {int(u): unb64(s) for u, s in self.get("inbox").json()["shares"].items()}
        masked = self.user.masked_input(inbox)
        assert self.post("masked", {"masked": masked.tolist()}).status_code == 200

    def unmask(self) -> None:
        reveal = self.user.unmask(self.get("survivors").json()["survivors"])
        assert self.post("unmask", {"shares": {str(u): b64(s) for u, s in reveal.items()}}
                         ).status_code == 200


def secagg_run(client: TestClient, episodes: int) -> str:
    return create(client, spec("secagg", episodes=episodes, epsilon=1.0, mechanism="gaussian",
                               delta=1e-5, schedule="batch:4", dropout=0.25))


def outcome(client: TestClient, run_id: str, cohort: int) -> dict[str, Any]:
    resp = client.get(f"/v1/runs/{run_id}/cohorts/{cohort}", params={"wait": 5})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_a_members_claim_outlives_the_claim_timeout_while_its_cohort_runs(apps: Apps) -> None:
    client = apps(claim_timeout=1.0)
    run_id = secagg_run(client, episodes=4)
    members = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    for m in members:
        assert m.join().status_code == 200
    for m in members:
        m.share()
    time.sleep(1.5)  # longer than a claim lasts: the cohort holds its members' claims
    full = client.post(f"/v1/runs/{run_id}/claims")
    assert full.status_code == 409 and full.json()["code"] == "full"  # nothing lapsed
    for m in members:
        m.mask()
    for m in members:
        m.unmask()
    assert outcome(client, run_id, 0)["outcome"] == "released"
    status = state(client, run_id)["status"]
    assert status["reported"] == 4 and status["finished"]


def test_a_run_whose_last_cohort_is_too_small_reaches_its_end(apps: Apps) -> None:
    client = apps()
    run_id = secagg_run(client, episodes=6)  # cohorts of 4, releasing from 3 inputs
    first = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    for step in (Member.join, Member.share, Member.mask, Member.unmask):
        for m in first:
            step(m)
    assert outcome(client, run_id, 0)["outcome"] == "released"
    last = [Member(client, run_id, claim(client, run_id)) for _ in range(2)]
    assert {m.cohort for m in last} == {1}
    for m in last:
        assert m.join().status_code == 200
    # both episodes the run has left joined cohort 1, which nobody else can join: it closes
    # with 2 members, too few to ever release; its episodes count, nothing is released
    ended = outcome(client, run_id, 1)
    assert ended["outcome"] == "aborted" and ended["members"] == 2
    assert last[0].get("roster").status_code == 410
    status = state(client, run_id)["status"]
    assert status["reported"] == 6 and status["finished"]
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    notes = [c["note"] for c in ledger["charges"] if c["mechanism"] == "secagg:cohort"]
    assert len(notes) == 2 and "released by 1 of 1" in notes[0] and "released by 0" in notes[1]
    rho = sum(c["rho"] for c in ledger["charges"])
    again = apps.reopen(client)  # a replay counts the closed cohort again, once
    assert state(again, run_id)["status"]["reported"] == 6
    assert sum(c["rho"] for c in again.get(f"/v1/runs/{run_id}/ledger").json()["charges"]
               ) == pytest.approx(rho)


def test_an_aborted_cohort_hands_its_episodes_out_again(apps: Apps,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secagg_rounds, "ROUND_TIMEOUT", 2.0)  # a loaded CI between messages
    client = apps()
    run_id = secagg_run(client, episodes=4)
    members = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    for step in (Member.join, Member.share):
        for m in members:
            step(m)
    for m in members[:2]:  # two of four send their masked inputs: too few
        m.mask()
    assert outcome(client, run_id, 0)["outcome"] == "aborted"
    status = state(client, run_id)["status"]
    assert status["reported"] == 0 and not status["finished"]
    assert client.get(f"/v1/runs/{run_id}/ledger").json()["charges"] == []  # not charged
    again = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    assert {m.cohort for m in again} == {1}  # the episodes are handed out again, as cohort 1
    for step in (Member.join, Member.share, Member.mask, Member.unmask):
        for m in again:
            step(m)
    assert outcome(client, run_id, 1)["outcome"] == "released"
    status = state(client, run_id)["status"]
    assert status["reported"] == 4 and status["finished"]


def test_a_slow_round_that_still_hears_from_its_members_is_not_cut(
        apps: Apps, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secagg_rounds, "ROUND_TIMEOUT", 1.5)
    client = apps()
    run_id = secagg_run(client, episodes=4)
    members = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    for m in members:
        m.join()
    for m in members:  # 3.2 s in all, twice the round timeout, never 1.5 s without a message
        time.sleep(0.8)
        m.share()
    for m in members:
        assert len(m.get("inbox").json()["shares"]) == 3  # every member's shares are in
    for step in (Member.mask, Member.unmask):
        for m in members:
            step(m)
    ended = outcome(client, run_id, 0)
    assert ended["outcome"] == "released" and ended["survivors"] == 4


def test_a_cohort_too_small_waits_for_the_others_before_it_ends_the_run(apps: Apps) -> None:
    client = apps()
    run_id = secagg_run(client, episodes=5)  # cohorts of 4, releasing from 3 inputs
    first = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    late = Member(client, run_id, claim(client, run_id))
    assert late.cohort == 1 and late.join().status_code == 200
    # the run is full, cohort 1 holds one episode and cohort 0 the others: cohort 1 waits
    # (it would release nothing), rather than abort and hand its episode out again
    assert late.get("roster").status_code == 202
    for step in (Member.join, Member.share, Member.mask, Member.unmask):
        for m in first:
            step(m)
    assert outcome(client, run_id, 0)["outcome"] == "released"
    ended = outcome(client, run_id, 1)  # now it holds all the run has left: it ends the run
    assert ended["outcome"] == "aborted" and ended["members"] == 1
    status = state(client, run_id)["status"]
    assert status["reported"] == 5 and status["finished"]


def test_the_unmasking_runs_off_the_event_loop(apps: Apps, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebuild of a cohort's sum (about a second at B = 1,000) runs in a worker thread:
    here it blocks until the loop has answered other requests, which it could not do if it
    ran on the loop; meanwhile the cohort is still in round 3, refuses a late unmasking
    message, and nothing is counted."""
    served, threads = threading.Event(), []
    result = CohortAggregator.result

    def slow(self: CohortAggregator) -> np.ndarray:
        threads.append(threading.get_ident())
        assert served.wait(10), "the event loop served nothing while the sum was rebuilt"
        return result(self)

    monkeypatch.setattr(CohortAggregator, "result", slow)
    client = apps()
    run_id = secagg_run(client, episodes=4)
    members = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    for step in (Member.join, Member.share, Member.mask):
        for m in members:
            step(m)
    late = members[3].user.unmask(members[3].get("survivors").json()["survivors"])
    monkeypatch.setattr(secagg_rounds, "ROUND_TIMEOUT", 1.0)  # for the unmasking round only
    for m in members[:3]:
        m.unmask()
    time.sleep(1.2)  # the unmasking round closes at its deadline with three of four shares
    assert client.get(f"/v1/runs/{run_id}/cohorts/0", params={"wait": 0}).status_code == 202
    refused = members[3].post("unmask", {"shares": {str(u): b64(s) for u, s in late.items()}})
    assert refused.status_code == 422 and "has closed" in refused.json()["detail"]
    view = client.get(f"/v1/runs/{run_id}/cohorts").json()["cohorts"]
    assert [(c["round"], c["outcome"]) for c in view] == [("unmask", None)]
    assert state(client, run_id)["status"]["reported"] == 0
    served.set()
    ended = outcome(client, run_id, 0)
    assert ended["outcome"] == "released" and ended["survivors"] == 4
    assert client.portal is not None  # the test client's event loop runs in this thread:
    loop_thread = client.portal.call(threading.get_ident)
    assert len(threads) == 1 and threads[0] != loop_thread
    assert state(client, run_id)["status"]["reported"] == 4


def test_claimed_counts_claims_not_the_indices_a_short_cohort_skips(apps: Apps) -> None:
    """A cohort closed short of B skips its unused episode indices (episode e stays in cohort
    e // B, and that cohort takes no more members), but `claimed` counts the claims handed
    out: here every episode was claimed once and reported once, so claimed = K, not the 8
    indices the schedule spans."""
    client = apps()
    run_id = secagg_run(client, episodes=6)  # cohorts of 4: cohort 1 holds episodes 4 and 5
    members = [Member(client, run_id, claim(client, run_id)) for _ in range(6)]
    for step in (Member.join, Member.share, Member.mask, Member.unmask):
        for m in members[:4]:
            step(m)
    for m in members[4:]:
        assert m.join().status_code == 200
    assert outcome(client, run_id, 1)["members"] == 2  # closed short: indices 6, 7 unused
    status = state(client, run_id)["status"]
    assert status["finished"] and status["reported"] == 6
    assert status["claimed"] == 6 == status["episodes"]
    log = client.get(f"/v1/runs/{run_id}/policies").json()
    assert sum(s["claimed"] for s in log["served"].values()) == 6
    again = apps.reopen(client)
    assert state(again, run_id)["status"]["claimed"] == 6


def test_a_restart_never_reopens_a_cohort_closed_short(apps: Apps,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Cohort 1 closes with three of four members (the run has no episode left to hand out)
    and releases; then cohort 0 aborts, so its episodes are handed out again: as cohort 2,
    episode 8 on, also after a restart (episode 7 would join cohort 1 a second time)."""
    monkeypatch.setattr(secagg_rounds, "ROUND_TIMEOUT", 2.0)
    client = apps(claim_timeout=3.0)
    run_id = secagg_run(client, episodes=7)
    first = [Member(client, run_id, claim(client, run_id)) for _ in range(4)]
    short = [Member(client, run_id, claim(client, run_id)) for _ in range(3)]
    for m in first + short:
        assert m.join().status_code == 200
    roster = client.get(f"{short[0].base}/roster", params={"ticket": short[0].me, "wait": 5})
    assert roster.status_code == 200  # round 0 closed with three: no episode left to join
    for step in (Member.share, Member.mask, Member.unmask):
        for m in short:
            step(m)
    assert outcome(client, run_id, 1)["outcome"] == "released"
    for m in first:
        m.share()
    for m in first[:2]:  # two of four send their masked inputs: too few
        m.mask()
    assert outcome(client, run_id, 0)["outcome"] == "aborted"
    status = state(client, run_id)["status"]
    assert status["reported"] == 3 and status["claimed"] == 7
    again = apps.reopen(client, claim_timeout=3.0)
    assert state(again, run_id)["status"]["claimed"] == 7
    # the aborted cohort's claims, restored open by the restart, lapse first (?wait=)
    assert [claim(again, run_id, wait=10)["episode"] for _ in range(4)] == [8, 9, 10, 11]
    assert state(again, run_id)["status"]["claimed"] == 11
