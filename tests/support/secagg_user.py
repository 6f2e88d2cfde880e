"""A faulty member of a secure-aggregation cohort, as a process of its own (the fault drills of
tests/test_secagg_http.py): `python -m support.secagg_user URL RUN MODE [N]`.

It claims an episode (N episodes: N members in one process) and takes part in its cohort up
to its shares (round 1), then
  die        prints SHARED and waits to be killed (users lost after key agreement, all N at
             once as when a process dies with its users);
  malformed  posts a masked input of the wrong length, prints the status it got, and leaves.
"""

from __future__ import annotations

import sys
import time

import httpx
import numpy as np
from privrl.algorithms import bind
from privrl.protocol import RunInfo
from privrl.trust.secagg.protocol import UserSession
from privrl.trust.secagg.wire import b64, cohort_setup, roster_of


def _await(http: httpx.Client, path: str, ticket: str) -> dict:
    while True:
        resp = http.get(path, params={"ticket": ticket, "wait": 5})
        if resp.status_code == 200:
            return resp.json()
        assert resp.status_code == 202, resp.text


class Member:
    """One member's claim, session and cohort path."""

    def __init__(self, http: httpx.Client, run_id: str, info: RunInfo) -> None:
        calibration = bind(info.config).calibration()
        spec = calibration.cohort
        assert spec is not None
        ticket = http.post(f"/v1/runs/{run_id}/claims").json()
        episode, self.me = ticket["episode"], ticket["ticket"]
        length = sum(int(np.prod(f.shape)) for f in calibration.families)
        cohort = episode // spec.size
        self.user = UserSession(cohort_setup(run_id, spec, cohort, length), episode % spec.size,
                                np.zeros(length, dtype=np.int64))
        self.path = f"/v1/runs/{run_id}/cohorts/{cohort}"

    def join(self, http: httpx.Client) -> None:
        ad = self.user.advertise()
        http.post(f"{self.path}/keys", json={"ticket": self.me, "cipher_key": b64(ad.cipher_key),
                                             "mask_key": b64(ad.mask_key)}).raise_for_status()

    def share(self, http: httpx.Client) -> None:
        keys = _await(http, f"{self.path}/roster", self.me)["keys"]
        roster = roster_of(keys)
        sealed = self.user.share_keys(roster)
        http.post(f"{self.path}/shares", json={"ticket": self.me, "shares": {
            str(v): b64(s) for v, s in sealed.items()}}).raise_for_status()


def main(url: str, run_id: str, mode: str, count: str = "1") -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        info = RunInfo.model_validate(http.get(f"/v1/runs/{run_id}").json())
        members = [Member(http, run_id, info) for _ in range(int(count))]
        for member in members:
            member.join(http)
        for member in members:
            member.share(http)
        if mode == "die":
            print("SHARED", flush=True)
            time.sleep(600)
            return
        first = members[0]
        _await(http, f"{first.path}/inbox", first.me)
        bad = http.post(f"{first.path}/masked", json={"ticket": first.me, "masked": [1, 2, 3]})
        print(f"MALFORMED {bad.status_code}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
