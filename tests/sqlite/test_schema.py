"""Migrations give the expected schema; files that are not ours, or newer, are refused untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairq.backends._sql import parse_queries, split_statements
from fairq.backends.clock import Clock
from fairq.backends.sqlite import SQLiteBackend
from fairq.backends.sqlite.sql import LATEST_VERSION, Q, migrations
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    MaintainParams,
    RequeueParams,
    StatsParams,
)
from fairq.errors import SchemaError, StoreUnavailable
from fairq.job import JobState
from tests.sqlite.helpers import new_job, raw_connect

EXPECTED_OBJECTS = {
    ("table", "fairq_meta", "fairq_meta"),
    ("table", "queues", "queues"),
    ("table", "tenants", "tenants"),
    ("table", "jobs", "jobs"),
    ("table", "job_types", "job_types"),
    ("table", "job_costs", "job_costs"),
    ("table", "throttle_times", "throttle_times"),
    ("index", "tenants_eligible", "tenants"),
    ("index", "tenants_limited", "tenants"),
    ("index", "jobs_ready", "jobs"),
    ("index", "jobs_scheduled", "jobs"),
    ("index", "jobs_running", "jobs"),
    ("index", "jobs_dead", "jobs"),
    ("index", "jobs_succeeded", "jobs"),
    ("index", "jobs_cancelled", "jobs"),
    ("index", "jobs_results", "jobs"),
    ("index", "throttle_times_key", "throttle_times"),
    ("index", "throttle_times_expiry", "throttle_times"),
    ("table", "slots", "slots"),
    ("index", "slots_place", "slots"),
    ("index", "slots_deadline", "slots"),
    ("table", "slot_waiters", "slot_waiters"),
    ("index", "slot_waiters_line", "slot_waiters"),
    ("index", "slot_waiters_touched", "slot_waiters"),
    ("table", "figures", "figures"),
    ("table", "unique_keys", "unique_keys"),
    ("index", "unique_keys_expiry", "unique_keys"),
}
# Each partial index covers exactly one job state (or eligible tenants); dispatch relies on it.
PARTIAL = {
    "tenants_eligible": "WHERE start_tag IS NOT NULL",
    "tenants_limited": "WHERE limited_until IS NOT NULL",
    "jobs_ready": "WHERE state = 'ready'",
    "jobs_scheduled": "WHERE state = 'scheduled'",
    "jobs_running": "WHERE state = 'running'",
    "jobs_dead": "WHERE state = 'dead'",
    "jobs_succeeded": "WHERE state = 'succeeded' AND result_until IS NULL",
    "jobs_cancelled": "WHERE state = 'cancelled'",
    "jobs_results": "WHERE result_until IS NOT NULL",
}


def schema_of(path: Path) -> set[tuple[str, str, str]]:
    with raw_connect(path) as db:
        rows = db.execute(Q["schema_objects"]).fetchall()
    return {(kind, name, table) for kind, name, table in rows if not name.startswith("sqlite_")}


def meta(path: Path) -> dict[str, str]:
    with raw_connect(path) as db:
        return dict(db.execute("SELECT key, value FROM fairq_meta").fetchall())


def test_migrations_are_numbered_from_one() -> None:
    assert [version for version, _ in migrations()] == list(range(1, LATEST_VERSION + 1))


def test_fresh_store_has_the_expected_schema(backend: SQLiteBackend, db_path: Path) -> None:
    assert schema_of(db_path) == EXPECTED_OBJECTS
    with raw_connect(db_path) as db:
        sql = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'"))
    for name, where in PARTIAL.items():
        assert where in " ".join(sql[name].split()), sql[name]
    assert meta(db_path) == {"application": "fairq", "schema_version": str(LATEST_VERSION)}


def test_applying_every_migration_by_hand_gives_the_same_schema(
    backend: SQLiteBackend, db_path: Path, tmp_path: Path
) -> None:
    by_hand = tmp_path / "by_hand.db"
    with raw_connect(by_hand) as db:
        for _, statements in migrations():
            for statement in statements:
                db.execute(statement)
    assert schema_of(by_hand) == schema_of(db_path)


def test_journal_mode_is_wal(backend: SQLiteBackend, db_path: Path) -> None:
    with raw_connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_keeps_data_and_does_not_migrate_again(db_path: Path) -> None:
    first = SQLiteBackend(db_path)
    first.enqueue(EnqueueParams(jobs=[new_job("j1")], now=0.0))
    first.close()
    again = SQLiteBackend(db_path)
    try:
        assert [s.ready for s in again.stats(StatsParams())] == [1]
    finally:
        again.close()
    assert meta(db_path)["schema_version"] == str(LATEST_VERSION)


# A store as version 1 of fairq left it: tenant "a" of queue "default" has one job in each
# state; "run" was handed out once (token "run:1") and "gone" failed its three attempts.
VERSION_1_ROWS = [
    "INSERT INTO fairq_meta VALUES ('application', 'fairq'), ('schema_version', '1')",
    "INSERT INTO queues (name, weight, max_running, vclock) VALUES ('default', 1.0, NULL, 1.0)",
    "INSERT INTO tenants (id, queue, tenant, weight, finish_tag, start_tag, head_seq, ready,"
    " scheduled, running, succeeded, failed, dead)"
    " VALUES (1, 'default', 'a', 1.0, 2.0, 2.0, 1, 1, 1, 1, 4, 3, 1)",
    "INSERT INTO jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,"
    " max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at, started_at, deadline,"
    " finished_at, last_error, worker_id) VALUES"
    " (1, 'next', 1, 'default', 'task', 'ready', '{}', 0, 0, 3, 30.0, 1.0, 0.5, 0.5, 0.5,"
    "  NULL, NULL, NULL, NULL, NULL),"
    " (2, 'run', 1, 'default', 'task', 'running', '{}', 0, 1, 3, 30.0, 1.0, 0.0, 0.0, 0.0,"
    "  1.0, 31.0, NULL, NULL, 'w'),"
    " (3, 'later', 1, 'default', 'task', 'scheduled', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 50.0,"
    "  NULL, NULL, NULL, NULL, NULL, NULL),"
    " (4, 'gone', 1, 'default', 'task', 'dead', '{}', 0, 3, 3, 30.0, 1.0, 0.0, 0.0, 0.0,"
    "  0.2, NULL, 0.4, 'boom', 'w')",
]


def test_a_version_1_store_with_jobs_upgrades_and_keeps_them(db_path: Path) -> None:
    with raw_connect(db_path) as db:
        (_, first), *_ = migrations()
        for statement in [*first, *VERSION_1_ROWS]:
            db.execute(statement)
    backend = SQLiteBackend(db_path, clock=Clock.CALLER)
    try:
        assert meta(db_path)["schema_version"] == str(LATEST_VERSION)
        assert schema_of(db_path) == EXPECTED_OBJECTS
        ids = ["next", "run", "later", "gone"]
        jobs = backend.get_jobs(GetJobsParams(ids=ids))
        assert [j.state for j in jobs] == [
            JobState.READY,
            JobState.RUNNING,
            JobState.SCHEDULED,
            JobState.DEAD,
        ]
        assert [j.attempts for j in jobs] == [0, 1, 0, 3]
        (row,) = backend.stats(StatsParams(now=2.0))
        counts = (row.ready, row.scheduled, row.running, row.succeeded, row.failed, row.dead)
        assert counts == (1, 1, 1, 4, 3, 1)
        assert (row.rate, row.limited_until, row.usage) == (None, None, 0.0)
        # the lease handed out by version 1 is still held, and charged its estimate so far
        backend.ack_many(AckManyParams(tokens=["run:1"], now=3.0))  # ran 2 s: F = 2 + (2 - 1) / 1
        assert backend.stats(StatsParams(now=3.0))[0].usage == 1.0  # that change of F
        (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=3.0)).leases
        assert (lease.job_id, lease.token) == ("next", "next:4")  # past any version 1 token
        backend.ack_many(AckManyParams(tokens=[lease.token], now=4.0))
        assert backend.maintain(MaintainParams(now=50.0)).promoted == 1
        assert backend.requeue(RequeueParams(ids=["gone"], now=50.0)) == 1
        taken = backend.dequeue(
            DequeueParams(queues=["default"], worker_id="w", now=50.0, limit=2)
        ).leases
        assert [t.token for t in taken] == ["later:4", "gone:4"]
    finally:
        backend.close()


# A store as version 2 left it: tenant "a" has two succeeded jobs, finished at 5 and at 50.
VERSION_2_ROWS = [
    "INSERT INTO fairq_meta VALUES ('application', 'fairq'), ('schema_version', '2')",
    "INSERT INTO queues (name) VALUES ('default')",
    "INSERT INTO tenants (id, queue, tenant, weight, succeeded) VALUES (1, 'default', 'a', 1.0, 2)",
    "INSERT INTO jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,"
    " max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at, started_at,"
    " finished_at, worker_id) VALUES"
    " (1, 's1', 1, 'default', 'task', 'succeeded', '{}', 0, 1, 3, 30.0, 1.0, 0, 0, 0, 4, 5, 'w'),"
    " (2, 's2', 1, 'default', 'task', 'succeeded', '{}', 0, 1, 3, 30.0, 1.0, 0, 0, 0, 49, 50, 'w')",
]


def test_version_3_counts_the_succeeded_jobs_already_stored(db_path: Path) -> None:
    """kept is backfilled: the tenant is forgotten when its last old succeeded job is pruned."""
    with raw_connect(db_path) as db:
        for _, statements in migrations()[:2]:
            for statement in statements:
                db.execute(statement)
        for statement in VERSION_2_ROWS:
            db.execute(statement)
    backend = SQLiteBackend(db_path, clock=Clock.CALLER)
    try:
        assert backend.maintain(MaintainParams(now=30.0, retention=10.0)).pruned == 1
        assert backend.stats(StatsParams())[0].succeeded == 2
        assert backend.maintain(MaintainParams(now=100.0, retention=10.0)).pruned == 1
        assert backend.stats(StatsParams()) == []
    finally:
        backend.close()


def test_newer_schema_is_refused_naming_both_versions(db_path: Path) -> None:
    SQLiteBackend(db_path).close()
    newer = LATEST_VERSION + 1
    with raw_connect(db_path) as db:
        db.execute("UPDATE fairq_meta SET value = ? WHERE key = 'schema_version'", (str(newer),))
    before = db_path.read_bytes()
    with pytest.raises(SchemaError, match=rf"schema version {newer}.* {LATEST_VERSION} "):
        SQLiteBackend(db_path)
    assert db_path.read_bytes() == before


def test_another_programs_database_is_refused_untouched(db_path: Path) -> None:
    with raw_connect(db_path) as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    before = db_path.read_bytes()
    with pytest.raises(SchemaError, match=r"not fairq's.*invoices"):
        SQLiteBackend(db_path)
    assert db_path.read_bytes() == before
    with raw_connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_file_that_is_not_sqlite_is_refused_untouched(db_path: Path) -> None:
    db_path.write_text("name,amount\nalice,3\n")
    with pytest.raises(StoreUnavailable, match=r"not a SQLite database") as caught:
        SQLiteBackend(db_path)
    assert str(db_path) in str(caught.value)
    assert db_path.read_text() == "name,amount\nalice,3\n"


def test_an_empty_file_becomes_a_store(db_path: Path) -> None:
    db_path.touch()
    SQLiteBackend(db_path).close()
    assert schema_of(db_path) == EXPECTED_OBJECTS


def test_query_files_parse_into_named_blocks() -> None:
    parsed = parse_queries("-- name: one\n-- says why\nSELECT 1\n\n-- name: two\nSELECT 2;\n")
    assert dict(parsed) == {"one": "-- says why\nSELECT 1", "two": "SELECT 2;"}
    with pytest.raises(ValueError, match="defined twice"):
        parse_queries("-- name: one\nSELECT 1\n-- name: one\nSELECT 2\n")
    with pytest.raises(KeyError, match="no query named 'three'"):
        parsed["three"]


def test_scripts_split_into_whole_statements() -> None:
    script = (
        "-- a comment\nCREATE TABLE t (a TEXT DEFAULT ';');\n"
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  UPDATE t SET a = 'x;';\nEND;\n-- end\n"
    )
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")
    with pytest.raises(ValueError, match="incomplete"):
        split_statements("SELECT 1;\nSELECT 2")
