"""A faulty member of a secure-aggregation cohort, as a process of its own (the fault drills of
tests/test_secagg_http.py): `python -m support.secagg_user URL RUN MODE`.

It claims an episode and takes part in its cohort up to its shares (round 1), then
  die        prints SHARED and waits to be killed (a user lost after key agreement);
  malformed  posts a masked input of the wrong length, prints the status it got, and leaves.
"""

from __future__ import annotations

import sys
import time

import httpx
import numpy as np
from privrl.algorithms import bind
from privrl.protocol import RunInfo
from privrl.trust.secagg.protocol import Advertisement, UserSession
from privrl.trust.secagg.wire import b64, cohort_setup, unb64


def _await(http: httpx.Client, path: str, ticket: str) -> dict:
    while True:
        resp = http.get(path, params={"ticket": ticket, "wait": 5})
        if resp.status_code == 200:
            return resp.json()
        assert resp.status_code == 202, resp.text


def main(url: str, run_id: str, mode: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        info = RunInfo.model_validate(http.get(f"/v1/runs/{run_id}").json())
        calibration = bind(info.config).calibration()
        spec = calibration.cohort
        assert spec is not None
        ticket = http.post(f"/v1/runs/{run_id}/claims").json()
        episode, me = ticket["episode"], ticket["ticket"]
        length = sum(int(np.prod(f.shape)) for f in calibration.families)
        cohort = episode // spec.size
        setup = cohort_setup(run_id, spec, cohort, length)
        user = UserSession(setup, episode % spec.size, np.zeros(length, dtype=np.int64))
        path = f"/v1/runs/{run_id}/cohorts/{cohort}"
        ad = user.advertise()
        http.post(f"{path}/keys", json={"ticket": me, "cipher_key": b64(ad.cipher_key),
                                        "mask_key": b64(ad.mask_key)}).raise_for_status()
        keys = _await(http, f"{path}/roster", me)["keys"]
        roster = {int(i): Advertisement(int(i), unb64(c), unb64(m))
                  for i, (c, m) in keys.items()}
        sealed = user.share_keys(roster)
        http.post(f"{path}/shares", json={"ticket": me, "shares": {
            str(v): b64(s) for v, s in sealed.items()}}).raise_for_status()
        if mode == "die":
            print("SHARED", flush=True)
            time.sleep(600)
            return
        _await(http, f"{path}/inbox", me)
        bad = http.post(f"{path}/masked", json={"ticket": me, "masked": [1, 2, 3]})
        print(f"MALFORMED {bad.status_code}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
