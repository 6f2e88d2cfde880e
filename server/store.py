"""SQLite persistence (WAL): runs, claims, accepted reports and the public policy log.

What is stored, and who may see it:
  runs      public run specs, each run's secret seed (its central noise is a function of it: it
            never leaves this file) and a deleted flag (a deleted run's seed and other rows are
            purged).
  claims    one row per ticket handed out: episode index, policy version served, the number of
            reports counted when it was claimed (the learner planned there), expiry, state.
  reports   every accepted report in acceptance order with its Ack. JDP / non-private: the raw
            trajectory, the trusted curator's private store, never served by any endpoint.
            LDP: only the locally randomized arrays (nothing raw ever reaches the server).
  policies  the public policy log: each policy version's actions and the other arrays of its
            policy message (JSON {name: {shape, data}}, e.g. ucrl-vtr's value tables), which a
            restart serves again and replays against.
  noise_epochs  the noise epochs an admin started after the store went back (see
            `privrl.server.ops.highwater`): from `at` reports on, the run's tree nodes are drawn
            afresh; `published` is what the server had published before (for the ledger).
  node_noise  JDP runs with the unseeded 'opendp' backend: every tree node's noise as drawn
            (float64 bytes), keyed by run, family, level and index. Private: with the billboard
            it gives the exact sums, so no endpoint serves it and deleting a run purges it.
  meta      the store's identity (`store_id`, random, drawn when the file is created): the
            high-water mark records it, so a mark is only ever compared with its own database.

Every write is committed before the server answers: an Ack is only sent for a report that is on
disk, and node noise is written in the transaction of the report whose ingestion drew it. Claims
and reports are written in groups (`write_groups`, driven by `privrl.server.writer`): the rows of
every claim and report that arrived while the previous COMMIT was running go into one
transaction, so one fsync serves many acknowledgements. Startup replays `reports` through a
fresh `privrl.run.Run`; the central noise is counter-based on the run's secret seed (numpy
backend) or read back from `node_noise` (opendp), so the replay rebuilds exactly the values
already released (contract 2). The writing connection is shared by the event loop (the writer
stages its rows) and worker threads (commits, run creation and deletion) behind one lock;
reads go through a second connection with its own lock and see committed rows only.

The server is the only process using its database: both connections use SQLite's `unix-excl`
VFS, which holds an exclusive lock on the file and keeps the WAL index in the process's heap,
shared by its connections, instead of a memory-mapped `-shm` file (a `-shm` that cannot be
extended, e.g. on a full disk, would kill the process with SIGBUS). Another process cannot
open the database while the server runs (a second server on it fails to start). A failed
write is remembered (`failing`) until one succeeds: /readyz is not ready meanwhile.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

Statement = tuple[str, tuple]  # one SQL statement and its parameters

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id          TEXT PRIMARY KEY,
    config      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    sequential  INTEGER NOT NULL,
    deleted     INTEGER NOT NULL DEFAULT 0,
    seed        TEXT NOT NULL DEFAULT '',
    credentials INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS claims (
    ticket          TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL,
    episode         INTEGER NOT NULL,
    policy_version  INTEGER NOT NULL,
    planned_at      INTEGER NOT NULL,
    issued_at       REAL NOT NULL,
    expires_at      REAL NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('open', 'reported')),
    UNIQUE (run_id, episode)
);
CREATE TABLE IF NOT EXISTS reports (
    run_id   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    ticket   TEXT NOT NULL UNIQUE,
    episode  INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    payload  TEXT NOT NULL,
    digest   TEXT NOT NULL,
    ack      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS policies (
    run_id      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    planned_at  INTEGER NOT NULL,
    actions     TEXT NOT NULL,
    arrays      TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, version)
);
CREATE TABLE IF NOT EXISTS health (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS noise_epochs (
    run_id  TEXT NOT NULL,
    epoch   INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    published  INTEGER NOT NULL,
    PRIMARY KEY (run_id, epoch)
);
CREATE TABLE IF NOT EXISTS node_noise (
    run_id  TEXT NOT NULL,
    family  TEXT NOT NULL,
    level   INTEGER NOT NULL,
    idx     INTEGER NOT NULL,
    value   BLOB NOT NULL,
    PRIMARY KEY (run_id, family, level, idx)
);
CREATE TABLE IF NOT EXISTS meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class RunRow:
    """A stored run spec."""

    id: str
    config: str  # RunConfig JSON (public)
    created_at: float
    sequential: bool
    seed: int  # the server's secret seed of this run (never served, never logged)
    stopped: bool = False  # an admin stopped it after its store went back: read-only
    credentials: bool = False  # claims need a user credential issued by the admin

    def __repr__(self) -> str:
        """Everything but the seed (a repr can end up in a log line)."""
        return f"RunRow(id={self.id!r}, created_at={self.created_at}, sequential={self.sequential})"


@dataclass(frozen=True)
class ClaimRow:
    """A ticket handed out; `planned_at` = reports counted when the policy was served."""

    ticket: str
    run_id: str
    episode: int
    policy_version: int
    planned_at: int
    issued_at: float
    expires_at: float
    state: str  # 'open' | 'reported'


@dataclass(frozen=True)
class ReportRow:
    """An accepted report, its canonical payload, digest and the Ack that was answered."""

    run_id: str
    seq: int
    ticket: str
    episode: int
    kind: str
    payload: str
    digest: str
    ack: str


@dataclass(frozen=True)
class PolicyRow:
    """One version of the public policy log."""

    run_id: str
    version: int
    planned_at: int
    actions: str  # JSON list[list[int]]
    arrays: str = "{}"  # JSON {name: {"shape": [...], "data": [...]}}


@dataclass(frozen=True)
class NoiseRow:
    """One tree node's noise as drawn (little-endian float64 bytes, the tree knows its shape)."""

    run_id: str
    family: str
    level: int
    index: int
    value: bytes


# columns later versions added: (table, column, its declaration with old rows' value)
ADDED_COLUMNS = (("runs", "seed", "TEXT NOT NULL DEFAULT ''"),
                 ("policies", "arrays", "TEXT NOT NULL DEFAULT '{}'"),
                 ("runs", "stopped", "INTEGER NOT NULL DEFAULT 0"),
                 ("runs", "credentials", "INTEGER NOT NULL DEFAULT 0"))


class Store:
    """The server's database: one connection, one lock, one transaction per write."""

    def __init__(self, path: str | Path, synchronous: str = "FULL", exclusive: bool = True
                 ) -> None:
        """`exclusive`: the only process using the file (no `-shm`; see the module's doc)."""
        self.path = Path(path)
        if not self.path.parent.exists():
            raise FileNotFoundError(f"directory of the database {self.path} does not exist")
        self.failing: str | None = None  # the last write's error, until one succeeds
        self._lock = threading.Lock()
        target = _uri(self.path, exclusive)
        self._conn = sqlite3.connect(
            target, check_same_thread=False, isolation_level=None, timeout=30.0, uri=True
        )
        mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"could not switch {self.path} to WAL mode (got {mode!r})")
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, got {synchronous!r}")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.executescript(SCHEMA)
        self._add_columns()
        self._migrate_public_seeds()
        self._conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)",
                           (secrets.token_hex(16),))
        self.identity: str = self._conn.execute(
            "SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
        # Reads have their own connection and lock: they see committed rows only (never a
        # batch the writer has staged), and never wait for a COMMIT, so the event loop may
        # read while the writer's transaction is open (WAL: readers and the writer coexist).
        self._read_lock = threading.Lock()
        self._reader = sqlite3.connect(
            target, check_same_thread=False, isolation_level=None, timeout=30.0, uri=True
        )

    def _add_columns(self) -> None:
        """Databases written before a column existed: add it with the value old rows had
        (policy messages without arrays, runs not stopped, open, seed still in the config)."""
        for table, column, declared in ADDED_COLUMNS:
            if column not in {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}:
                self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")

    def _migrate_public_seeds(self) -> None:
        """Databases written before seeds were secret: move the seed out of the public config."""
        rows = self._conn.execute("SELECT id, config FROM runs WHERE seed = ''").fetchall()
        for run_id, text in rows:
            config = json.loads(text)
            seed = int(config.pop("seed", 0))
            self._conn.execute(
                "UPDATE runs SET config = ?, seed = ? WHERE id = ?",
                (json.dumps(config), str(seed), run_id),
            )

    def close(self) -> None:
        """Close the connection (checkpointing the WAL)."""
        with self._read_lock:
            self._reader.close()
        with self._lock:
            self._conn.close()

    def _write(self, statements: list[Statement]) -> None:
        """Run `statements` as one immediate transaction and commit it (all or nothing)."""
        self.write_groups([statements])

    def write_groups(self, groups: Sequence[Sequence[Statement]]) -> None:
        """Run every group's statements in one immediate transaction and commit it (all or
        nothing: one COMMIT, one fsync, for the whole batch)."""
        self.stage_groups(groups)
        self.commit()

    def stage_groups(self, groups: Sequence[Sequence[Statement]]) -> None:
        """Begin one immediate transaction and run every group's statements in it (page-cache
        work, microseconds a row: the writer does it on the event loop); nothing is durable
        until `commit`. On failure it is rolled back and raised. The store's lock is held from
        here until `commit` ends (which may run in another thread)."""
        self._lock.acquire()
        try:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                for statements in groups:
                    for sql, params in statements:
                        cur.execute(sql, params)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        except BaseException:
            self._lock.release()
            raise

    def commit(self) -> None:
        """COMMIT the staged transaction (the fsync: the writer runs it in a worker thread),
        roll it back if that fails, and release the lock `stage_groups` took."""
        try:
            try:
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self.failing = f"{type(exc).__name__}: {exc}"
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self.failing = None
        finally:
            self._lock.release()

    def probe(self) -> None:
        """One small write (a timestamp): raises while writes fail, clears `failing` once one
        succeeds."""
        self._write([("INSERT OR REPLACE INTO health (id, at) VALUES (1, ?)", (time.time(),))])

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        """All rows of one query."""
        with self._read_lock:
            return self._reader.execute(sql, params).fetchall()

    # -- runs ---------------------------------------------------------------------------------

    def insert_run(self, run: RunRow, first_policy: PolicyRow) -> None:
        """A new run with the policy planned before any report (version 1)."""
        self._write(
            [
                (
                    "INSERT INTO runs (id, config, created_at, sequential, seed, credentials)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (run.id, run.config, run.created_at, int(run.sequential), str(run.seed),
                     int(run.credentials)),
                ),
                _insert_policy(first_policy),
            ]
        )

    def run_exists(self, run_id: str) -> bool:
        """Whether the id was ever used (deleted runs included)."""
        return bool(self._read("SELECT 1 FROM runs WHERE id = ?", (run_id,)))

    def deleted_ids(self) -> set[str]:
        """Ids of deleted runs."""
        return {r[0] for r in self._read("SELECT id FROM runs WHERE deleted = 1")}

    def runs(self) -> list[RunRow]:
        """Live (not deleted) runs in creation order."""
        rows = self._read(
            "SELECT id, config, created_at, sequential, seed, stopped, credentials FROM runs"
            " WHERE deleted = 0 ORDER BY created_at, id"
        )
        return [RunRow(r[0], r[1], r[2], bool(r[3]), int(r[4]), bool(r[5]), bool(r[6]))
                for r in rows]

    def stop_run(self, run_id: str) -> None:
        """Flag the run stopped (it takes no more claims or reports)."""
        self._write([("UPDATE runs SET stopped = 1 WHERE id = ?", (run_id,))])

    def start_noise_epochs(self, run_id: str, epochs: Sequence[int], at: int,
                           published: int) -> None:
        """Record noise epochs started at `at` reports, after `published` had been published."""
        self._write([
            ("INSERT INTO noise_epochs (run_id, epoch, at, published) VALUES (?, ?, ?, ?)",
             (run_id, epoch, at, published))
            for epoch in epochs
        ])

    def noise_epochs(self, run_id: str) -> list[tuple[int, int, int]]:
        """A run's noise epochs as (epoch, at, published), in order."""
        return [(r[0], r[1], r[2]) for r in self._read(
            "SELECT epoch, at, published FROM noise_epochs WHERE run_id = ? ORDER BY epoch",
            (run_id,))]

    def delete_run(self, run_id: str) -> None:
        """Flag the run deleted and purge its claims, reports (private data) and policy log."""
        self._write(
            [
                ("UPDATE runs SET deleted = 1, seed = 'purged' WHERE id = ?", (run_id,)),
                ("DELETE FROM claims WHERE run_id = ?", (run_id,)),
                ("DELETE FROM reports WHERE run_id = ?", (run_id,)),
                ("DELETE FROM policies WHERE run_id = ?", (run_id,)),
                ("DELETE FROM node_noise WHERE run_id = ?", (run_id,)),
                ("DELETE FROM noise_epochs WHERE run_id = ?", (run_id,)),
            ]
        )

    # -- claims -------------------------------------------------------------------------------

    @staticmethod
    def claim_statements(
        claim: ClaimRow, new_policy: PolicyRow | None, noise: Sequence[NoiseRow] = ()
    ) -> list[Statement]:
        """The writes of a ticket handed out (the policy version it serves when new, any noise
        drawn)."""
        statements = [
            (
                "INSERT INTO claims (ticket, run_id, episode, policy_version, planned_at,"
                " issued_at, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.ticket,
                    claim.run_id,
                    claim.episode,
                    claim.policy_version,
                    claim.planned_at,
                    claim.issued_at,
                    claim.expires_at,
                    claim.state,
                ),
            )
        ]
        if new_policy is not None:
            statements.append(_insert_policy(new_policy))
        return statements + [_insert_noise(row) for row in noise]

    def claims(self, run_id: str) -> list[ClaimRow]:
        """All claims of a run by episode index."""
        rows = self._read(
            "SELECT ticket, run_id, episode, policy_version, planned_at, issued_at, expires_at,"
            " state FROM claims WHERE run_id = ? ORDER BY episode",
            (run_id,),
        )
        return [ClaimRow(*r) for r in rows]

    def find_claim(self, ticket: str) -> ClaimRow | None:
        """The claim with this ticket, if any."""
        rows = self._read(
            "SELECT ticket, run_id, episode, policy_version, planned_at, issued_at, expires_at,"
            " state FROM claims WHERE ticket = ?",
            (ticket,),
        )
        return ClaimRow(*rows[0]) if rows else None

    # -- reports ------------------------------------------------------------------------------

    @staticmethod
    def report_statements(report: ReportRow, noise: Sequence[NoiseRow] = ()) -> list[Statement]:
        """The writes of an accepted report: its row, its claim marked reported and the noise
        its ingestion drew (always committed together)."""
        return [
            (
                "INSERT INTO reports (run_id, seq, ticket, episode, kind, payload, digest, ack)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    report.run_id,
                    report.seq,
                    report.ticket,
                    report.episode,
                    report.kind,
                    report.payload,
                    report.digest,
                    report.ack,
                ),
            ),
            (
                "UPDATE claims SET state = 'reported' WHERE ticket = ? AND state = 'open'",
                (report.ticket,),
            ),
            *(_insert_noise(row) for row in noise),
        ]

    def find_report(self, ticket: str) -> ReportRow | None:
        """The accepted report sent with this ticket, if any."""
        rows = self._read(
            "SELECT run_id, seq, ticket, episode, kind, payload, digest, ack FROM reports"
            " WHERE ticket = ?",
            (ticket,),
        )
        return ReportRow(*rows[0]) if rows else None

    def reports(self, run_id: str, batch: int = 512) -> Iterator[ReportRow]:
        """A run's accepted reports in acceptance order (streamed in batches)."""
        last = 0
        while True:
            rows = self._read(
                "SELECT run_id, seq, ticket, episode, kind, payload, digest, ack FROM reports"
                " WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, last, batch),
            )
            if not rows:
                return
            for r in rows:
                yield ReportRow(*r)
            last = rows[-1][1]

    # -- policy log ---------------------------------------------------------------------------

    def policies(self, run_id: str) -> list[PolicyRow]:
        """A run's policy versions in order."""
        rows = self._read(
            "SELECT run_id, version, planned_at, actions, arrays FROM policies WHERE run_id = ?"
            " ORDER BY version",
            (run_id,),
        )
        return [PolicyRow(*r) for r in rows]

    # -- node noise (private) -------------------------------------------------------------------

    def node_noise(self, run_id: str) -> list[NoiseRow]:
        """Every stored tree node noise of a run (what its replay must reuse, never re-draw)."""
        rows = self._read(
            "SELECT run_id, family, level, idx, value FROM node_noise WHERE run_id = ?"
            " ORDER BY family, level, idx",
            (run_id,),
        )
        return [NoiseRow(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]


def _uri(path: Path, exclusive: bool) -> str:
    """The SQLite URI of the database file (the `unix-excl` VFS when `exclusive`)."""
    uri = "file:" + urllib.parse.quote(str(path.resolve()))
    return uri + "?vfs=unix-excl" if exclusive else uri


def _insert_noise(row: NoiseRow) -> Statement:
    """The INSERT of one node's noise (a node is drawn once: a second insert is an error)."""
    return (
        "INSERT INTO node_noise (run_id, family, level, idx, value) VALUES (?, ?, ?, ?, ?)",
        (row.run_id, row.family, row.level, row.index, row.value),
    )


def _insert_policy(policy: PolicyRow) -> Statement:
    """The INSERT of one policy version."""
    return (
        "INSERT INTO policies (run_id, version, planned_at, actions, arrays)"
        " VALUES (?, ?, ?, ?, ?)",
        (policy.run_id, policy.version, policy.planned_at, policy.actions, policy.arrays),
    )
