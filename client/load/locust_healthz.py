"""The ceiling for `privrl bench http --generator locust`: Locust FastHttpUser users that GET
/healthz in a loop, the same generator as the locustfile's episode users (Locust only)."""

from __future__ import annotations

from locust import FastHttpUser, constant, task
from privrl.client.load import locust_common  # --privrl-samples, last CSV rows


class HealthzUser(FastHttpUser):
    """GET /healthz, nothing else: what the server does per request when the work is nil."""

    wait_time = constant(0)

    def on_start(self) -> None:
        """No cookie jar, as the episode users."""
        locust_common.without_cookies(self)

    @task
    def healthz(self) -> None:
        """One request to the trivial endpoint."""
        self.client.get("/healthz", name="healthz")
