"""Server settings from PRIVRL_* environment variables (flags of `python -m privrl.server` win)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from privrl.server.admission import RunLimits
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the server process is configured with (none of it is part of a run's spec)."""

    model_config = SettingsConfigDict(env_prefix="PRIVRL_", extra="ignore", frozen=True)

    admin_token: SecretStr | None = Field(
        None,
        description="bearer token of the admin routes (create/delete runs); unset: they answer 503",
    )
    credential_key: SecretStr | None = Field(
        None,
        description="HMAC key of the user credentials of runs that require them; unset: one"
        " derived from the admin token (changing it revokes every credential)",
    )
    db: Path = Field(Path("privrl.db"), description="SQLite database file (WAL mode)")
    highwater: Path | None = Field(
        None,
        description="base path of the high-water mark files (BASE.0, BASE.1); unset: beside the"
        " database (DB.highwater). On other storage, a backup restored with the database does"
        " not bring back its mark too",
    )
    claim_timeout: float = Field(
        30.0, gt=0, le=86_400, description="seconds a claim stays valid before its slot is freed"
    )
    max_body_bytes: int = Field(
        2 * 1024 * 1024,
        ge=1024,
        description="largest request body accepted (413 above, before it is read); a report is"
        " also refused above its run's own bound: 32 bytes per number it carries plus 4096",
    )
    body_timeout: float = Field(
        15.0,
        gt=0,
        le=3600,
        description="seconds a request body may take to arrive once its headers have: a slower"
        " one is answered 408 and its connection closed (a stalled upload holds no memory"
        " longer)",
    )
    max_body_buffer_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="bytes of request bodies held at once, by all the requests being received"
        " or handled (a declared length counts from the start); a body that does not fit is"
        " answered 503 with Retry-After before it is read. At least max_body_bytes",
    )
    sequential: bool = Field(
        False, description="default of new runs: at most one outstanding claim per run"
    )
    max_claim_wait: float = Field(
        60.0, ge=0, description="upper bound of the ?wait= seconds a claim may wait for a slot"
    )
    max_cells: int = Field(
        1_000_000,
        ge=1,
        description="largest H*S*A*S (entries of one N(s,a,s') array) of a run this server hosts,"
        " and of a public world /regret builds",
    )
    plugins: str = Field(
        "",
        description="comma-separated Python modules of third-party algorithms, imported at"
        " start (each registers its algorithm); the built-ins need none",
    )
    db_exclusive: bool = Field(
        True,
        description="the server is the only process using the database: SQLite's unix-excl VFS"
        " keeps the WAL index in the process's heap (no -shm file, which SIGBUS-kills the"
        " process when it cannot be extended) and locks other processes out while it runs",
    )
    db_synchronous: Literal["FULL", "NORMAL"] = Field(
        "FULL",
        description="SQLite synchronous level: FULL survives power loss, NORMAL only a crash",
    )

    max_outstanding: int = Field(
        1024,
        ge=1,
        description="most claims of one run outstanding at once (admission control: fewer while"
        " its users' reports arrive late, see queue_fraction)",
    )
    min_outstanding: int = Field(
        64, ge=1, description="claims of one run admitted however late its reports (the least"
        " window)"
    )
    queue_fraction: float = Field(
        0.5,
        gt=0,
        le=1,
        description="share of the claim timeout a report may take to arrive (claim to report):"
        " each report within it widens a run's window of outstanding claims by one, a later one"
        " or a lapsed claim halves it",
    )
    max_claims_per_address: int = Field(
        256,
        ge=1,
        description="most claims outstanding at once from one client address, in a run without"
        " credentials (one less for each of its claims that lapses unreported, one more for"
        " each timely report); a client with many addresses gets around it: deployments create"
        " runs with credentials",
    )
    max_claims_per_credential: int = Field(
        4,
        ge=1,
        description="most claims outstanding at once per user credential, in a run that requires"
        " them (one less for each of its claims that lapses unreported, one more for each"
        " timely report)",
    )
    max_reads_per_address: int = Field(
        2,
        ge=1,
        description="public reads (run, billboard, policy, ledger, policies, regret) answered at"
        " once per client address; more wait their turn, so a client looping over them gets a"
        " bounded share of the server",
    )
    max_reads_per_second: float = Field(
        20.0,
        gt=0,
        description="public reads per second per client address on average (bursts of twice"
        " as many); more wait their turn",
    )
    max_waiting: int = Field(
        2048,
        ge=0,
        description="claims of one run that may wait (?wait=) for a slot at once; beyond: 429",
    )
    max_in_flight: int = Field(
        4096,
        ge=1,
        description="claims (and twice as many reports) the server handles at once; beyond: 503",
    )
    access_log: bool = Field(
        False,
        description="log one line per HTTP request (uvicorn's access log; it costs the server"
        " about a tenth of its CPU per episode request, and /metrics counts every answer by"
        " route and status anyway)",
    )
    plan_interval: float = Field(
        0.05,
        ge=0,
        description="seconds between two plannings of a concurrent run (coalesced planning;"
        " sequential runs plan at every claim)",
    )

    inline_entries: int = Field(
        16_384,
        ge=0,
        description="runs whose released statistics have at most this many entries in all are"
        " claimed and reported on the event loop (well under a millisecond each: a hop to a"
        " worker thread would cost more than the work); larger runs' claims and reports run in"
        " a worker thread so the loop keeps answering",
    )

    @model_validator(mode="after")
    def _one_body_fits(self) -> Settings:
        """The body buffer holds at least one body of the largest size accepted."""
        if self.max_body_buffer_bytes < self.max_body_bytes:
            raise ValueError(
                f"max_body_buffer_bytes ({self.max_body_buffer_bytes}) is below max_body_bytes"
                f" ({self.max_body_bytes}): no body of the largest size could ever be received"
            )
        return self

    def run_limits(self) -> RunLimits:
        """The per-run limits these settings give."""
        return RunLimits(
            claim_timeout=self.claim_timeout,
            min_outstanding=min(self.min_outstanding, self.max_outstanding),
            max_outstanding=self.max_outstanding,
            queue_fraction=self.queue_fraction,
            max_waiting=self.max_waiting,
            plan_interval=self.plan_interval,
            inline_entries=self.inline_entries,
            per_address=self.max_claims_per_address,
            per_credential=self.max_claims_per_credential,
        )

    @field_validator("admin_token", "credential_key")
    @classmethod
    def _blank_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        """An empty or blank token counts as unset (admin routes then answer 503)."""
        if value is None or not value.get_secret_value().strip():
            return None
        return SecretStr(value.get_secret_value().strip())
