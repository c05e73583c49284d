"""Tenant slots in SQLite: one row per slot held, none once given back or expired."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import AcquireSlotParams, MaintainParams, ReleaseSlotsParams


def rows(db_path: Path) -> list[tuple[str, str, str, float, float]]:
    with sqlite3.connect(db_path) as db:
        found = db.execute("SELECT queue, tenant, holder, lease, deadline FROM slots ORDER BY 5")
        return list(found.fetchall())


def acquire(backend: SQLiteBackend, tenant: str, now: float, lease: float = 30.0) -> str:
    params = AcquireSlotParams(queue="q", tenant=tenant, holder="w1", lease=lease, now=now)
    token = backend.acquire_slot(params).token
    assert token is not None
    return token


def test_a_slot_is_one_row_until_released(backend: SQLiteBackend, db_path: Path) -> None:
    token = acquire(backend, "a", 1.0)
    assert rows(db_path) == [("q", "a", "w1", 30.0, 31.0)]
    backend.release_slots(ReleaseSlotsParams(tokens=[token], now=2.0))
    assert rows(db_path) == []


def test_expired_slots_go_at_the_next_acquire_or_maintenance(
    backend: SQLiteBackend, db_path: Path
) -> None:
    acquire(backend, "a", 0.0, lease=5.0)
    acquire(backend, "b", 0.0, lease=5.0)
    acquire(backend, "a", 10.0)  # drops a's expired slot, not b's
    assert [(tenant, deadline) for _, tenant, _, _, deadline in rows(db_path)] == [
        ("b", 5.0),
        ("a", 40.0),
    ]
    backend.maintain(MaintainParams(now=10.0))
    assert [tenant for _, tenant, _, _, _ in rows(db_path)] == ["a"]
