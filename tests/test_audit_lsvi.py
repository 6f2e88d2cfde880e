"""`privrl audit server` on LSVI-UCB runs (their billboard shows the Gram snapshot at the
algorithm's own rounds and the weights, not the targets): polled and increment-tested in
process; and a linear world's public `feature_seed` is not flagged as a secret."""

from __future__ import annotations

import numpy as np
from privrl.client.api import ServerAPI
from privrl.client.audit.server_attack import ServerAudit, secret_looking
from privrl.protocol import RunRequest
from privrl.seeding import generator
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.server import Apps, claim, create, user_report

CUBE = make("lin-cube")


def test_an_honest_batched_lsvi_run_is_polled_and_its_gram_increments_pass(apps: Apps
                                                                           ) -> None:
    client = apps()
    body = RunRequest(algo="lsvi-ucb-batched", n_states=CUBE.S, n_actions=CUBE.A,
                      horizon=CUBE.H, model=model_spec_of(CUBE), episodes=40, privacy="jdp",
                      epsilon=1.0, delta=1e-5, mechanism="gaussian", knobs={"batches": 8},
                      seed=None).model_dump(mode="json", exclude_none=True)
    run_id = create(client, body)
    api = ServerAPI("http://testserver")
    api.http = client
    audit = ServerAudit(api, [run_id], polls=21, interval=0.0, rng=generator(1, "audit"))
    audit.collect()
    for _ in range(21):
        audit.poll_once()
        ticket = claim(client, run_id)
        assert client.post(f"/v1/runs/{run_id}/reports",
                           json=user_report(ticket, body, CUBE)).status_code == 200
    audit.finish_polls()
    report = audit.check()
    checks = {c.check: c for c in report.checks if c.run_id == run_id}
    assert report.findings == [] and len(audit.runs[run_id].polls) == 21, report.text()
    assert checks["noise"].ran and checks["noise"].message.startswith("3 increment(s)"), \
        report.text()
    assert not checks["seeds"].ran and "target only through" in checks["seeds"].message
    broken = audit.runs[run_id].polls  # the same readings without the Gram noise's movement
    base = broken[5].arrays["gram"]
    for poll in broken[5:]:
        poll.arrays["gram"] = base + np.eye(base.shape[-1]) * poll.reported
    audit.report.findings.clear()
    audit.report.checks.clear()
    assert any(f.check == "noise" for f in audit.check().findings)


def test_a_public_feature_seed_is_not_a_secret() -> None:
    assert not secret_looking("feature_seed") and not secret_looking("featureSeed")
    assert secret_looking("seed") and secret_looking("noise_seed")
