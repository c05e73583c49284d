"""Migrations give the expected schema; files that are not ours, or newer, are refused untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairq.backends._sql import parse_queries, split_statements
from fairq.backends.sqlite import SQLiteBackend
from fairq.backends.sqlite.sql import LATEST_VERSION, Q, migrations
from fairq.contract import EnqueueParams, StatsParams
from fairq.errors import SchemaError, StoreUnavailable
from tests.sqlite.helpers import new_job, raw_connect

EXPECTED_OBJECTS = {
    ("table", "fairq_meta", "fairq_meta"),
    ("table", "queues", "queues"),
    ("table", "tenants", "tenants"),
    ("table", "jobs", "jobs"),
    ("table", "job_types", "job_types"),
    ("index", "tenants_eligible", "tenants"),
    ("index", "jobs_ready", "jobs"),
    ("index", "jobs_scheduled", "jobs"),
    ("index", "jobs_running", "jobs"),
    ("index", "jobs_dead", "jobs"),
    ("index", "jobs_succeeded", "jobs"),
}
# Each partial index covers exactly one job state (or eligible tenants); dispatch relies on it.
PARTIAL = {
    "tenants_eligible": "WHERE start_tag IS NOT NULL",
    "jobs_ready": "WHERE state = 'ready'",
    "jobs_scheduled": "WHERE state = 'scheduled'",
    "jobs_running": "WHERE state = 'running'",
    "jobs_dead": "WHERE state = 'dead'",
    "jobs_succeeded": "WHERE state = 'succeeded'",
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
