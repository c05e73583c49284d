"""Unique keys do not pile up: SQLite and PostgreSQL delete keys whose window ended at
maintenance (and only those); Redis keys expire with their window."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from fairq.backends.clock import Clock
from fairq.backends.redis import RedisBackend
from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import EnqueueParams, MaintainParams
from fairq.job import NewJob, Unique


def keyed(n: int, window: float) -> NewJob:
    return NewJob(
        id=f"j{n}", name="task", queue="default", tenant="a", payload="{}", run_at=0.0,
        max_attempts=1, lease_timeout=60.0, cost=1.0, unique=Unique(key=f"k{n}", window=window),
    )  # fmt: skip


JOBS = [keyed(0, 5.0), keyed(1, 50.0), keyed(2, 5.0)]


def test_sqlite_maintenance_deletes_ended_keys(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "q.db", clock=Clock.CALLER)
    try:
        backend.enqueue(EnqueueParams(jobs=JOBS, now=0.0))
        backend.maintain(MaintainParams(now=4.0))
        count = "SELECT count(*) FROM unique_keys"
        assert backend._store.conn.execute(count).fetchone()[0] == 3
        backend.maintain(MaintainParams(now=5.0, queues=["other"]))
        rows = backend._store.conn.execute("SELECT key FROM unique_keys").fetchall()
        assert [row[0] for row in rows] == ["k1"]
    finally:
        backend.close()


@pytest.fixture
def pg() -> Iterator[object]:
    from postgres._store import open_disposable

    backend = open_disposable(clock="caller")
    yield backend
    backend.close()


def test_postgres_maintenance_deletes_ended_keys(pg: object) -> None:
    from postgres._store import server_url

    from fairq.backends.postgres import PostgresBackend

    assert isinstance(pg, PostgresBackend)
    pg.enqueue(EnqueueParams(jobs=JOBS, now=0.0))
    pg.maintain(MaintainParams(now=4.0))
    sql = f'SELECT key FROM "{pg.schema}".unique_keys ORDER BY key'
    with psycopg.connect(server_url()) as conn:
        assert [row[0] for row in conn.execute(sql)] == ["k0", "k1", "k2"]
    pg.maintain(MaintainParams(now=5.0))
    with psycopg.connect(server_url()) as conn:
        assert [row[0] for row in conn.execute(sql)] == ["k1"]


def test_redis_keys_expire_with_their_window() -> None:
    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    backend = RedisBackend.from_url(f"{url}?prefix=u{uuid.uuid4().hex[:8]}&clock=caller")
    try:
        backend.enqueue(EnqueueParams(jobs=JOBS, now=0.0))
        layout = backend.layout
        ttls = [backend.client.pttl(layout.unique_key("default", "a", f"k{n}")) for n in range(3)]
        assert 0 < ttls[0] <= 5000 and 5000 < ttls[1] <= 50000 and 0 < ttls[2] <= 5000
        assert backend.client.get(layout.unique_key("default", "a", "k1")) == b"50 0 default j1"
    finally:
        backend.client.delete(*backend.client.keys(f"{backend.layout.prefix}:*"))
        backend.close()
