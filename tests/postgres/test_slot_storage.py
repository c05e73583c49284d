"""Tenant slots in PostgreSQL: one row per slot held, none once given back or expired."""

from __future__ import annotations

import psycopg

from fairq.contract import AcquireSlotParams, MaintainParams, ReleaseSlotsParams

from ._store import DisposableBackend, server_url


def rows(pg: DisposableBackend) -> list[tuple[str, str, float]]:
    with psycopg.connect(server_url()) as conn:
        found = conn.execute(
            f'SELECT tenant, holder, deadline FROM "{pg.schema}".slots ORDER BY deadline'
        )
        return list(found.fetchall())


def acquire(pg: DisposableBackend, tenant: str, now: float, lease: float = 30.0) -> str:
    params = AcquireSlotParams(queue="q", tenant=tenant, holder="w1", lease=lease, now=now)
    token = pg.acquire_slot(params).token
    assert token is not None
    return token


def test_a_slot_is_one_row_until_released(pg: DisposableBackend) -> None:
    long_id = "t" * 10_000  # longer than a btree entry: found through its digest
    token = acquire(pg, long_id, 1.0)
    assert rows(pg) == [(long_id, "w1", 31.0)]
    pg.release_slots(ReleaseSlotsParams(tokens=[token], now=2.0))
    assert rows(pg) == []


def test_expired_slots_go_at_the_next_acquire_or_maintenance(pg: DisposableBackend) -> None:
    acquire(pg, "a", 0.0, lease=5.0)
    acquire(pg, "b", 0.0, lease=5.0)
    acquire(pg, "a", 10.0)  # drops a's expired slot, not b's
    assert [(tenant, deadline) for tenant, _, deadline in rows(pg)] == [("b", 5.0), ("a", 40.0)]
    pg.maintain(MaintainParams(now=10.0))
    assert [tenant for tenant, _, _ in rows(pg)] == ["a"]
