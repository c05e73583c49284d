"""Hot paths read indexes only: no query on enqueue/dequeue/ack/maintain scans a table.

Two angles: every named query the hot paths use is planned with bound parameters (as the
backend prepares it), and every statement a real scenario executes is traced and planned too,
so a query added to a hot path without being listed here is still checked.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import replace

import pytest

from fairq.backends.sqlite import SQLiteBackend
from fairq.backends.sqlite.sql import Q
from fairq.contract import (
    AckManyParams,
    AcquireSlotParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    HeartbeatParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    ReleaseSlotsParams,
    RenewSlotsParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
)
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle
from tests.sqlite.helpers import new_job

HOT = {
    "queue_get",
    "queue_ensure",
    "queue_set_vclock",
    "queue_in_flight",
    "tenant_ensure",
    "tenant_id",
    "tenant_get",
    "tenant_save",
    "tenant_delete",
    "tenant_pick",
    "tenant_head",
    "tenant_oldest_ready",
    "shard_load",
    "job_insert",
    "job_by_seq",
    "job_by_id",
    "job_save",
    "job_checkpoint",
    "job_keep_result",
    "job_request_cancel",
    "job_cost_get",
    "job_cost_put",
    "jobs_due",
    "jobs_expired",
    "next_run_at",
    "next_deadline",
    "jobs_prune",
    "cancelled_prune",
    "results_prune",
    "tenants_unlimit",
    "next_limited",
    "throttle_window",
    "throttle_drop",
    "throttle_record",
    "throttle_stamp",
    "throttle_prune",
    "slots_drop_expired",
    "slots_held",
    "slot_setting",
    "slot_insert",
    "slot_get",
    "slot_renew",
    "slot_delete",
    "slots_prune",
    "waiter_get",
    "waiter_park",
    "waiter_delete",
    "waiter_leave",
    "waiter_wake",
    "waiters_prune",
    "figures_add",
    "figures_prune",
    "unique_get",
    "unique_put",
    "unique_prune",
}
# Operator and start-up paths: allowed to scan, each for a reason given in queries.sql.
COLD = {
    "meta_get",
    "meta_set",
    "queue_set_defaults",
    "queue_names",
    "tenants_of_queue",
    "tenants_stats",
    "tenants_oldest_ready",
    "jobs_dead",
    "job_type_save",
    "job_types_all",
    "job_costs_read",
    "schema_objects",
    "figures_read",
}


def test_every_query_is_classified() -> None:
    assert set(Q) == HOT | COLD


def plan(db: sqlite3.Connection, sql: str, params: dict[str, object] | None = None) -> list[str]:
    rows = db.execute(f"EXPLAIN QUERY PLAN {sql}", params or {}).fetchall()
    return [str(row[3]) for row in rows]


def assert_indexed(steps: list[str], sql: str) -> None:
    for step in steps:
        assert not re.match(
            r"SCAN (jobs|tenants|throttle_times|slots|figures|unique_keys|job_costs)\b", step
        ), f"{step!r} in plan of {sql}"
        assert "TEMP B-TREE" not in step, f"{step!r} (a sort) in plan of {sql}"


@pytest.mark.parametrize("name", sorted(HOT))
def test_hot_query_plans_use_indexes(backend: SQLiteBackend, name: str) -> None:
    db = backend._store.conn
    params: dict[str, object] = {key: None for key in re.findall(r":(\w+)", Q[name])}
    assert_indexed(plan(db, Q[name], params), name)


def test_dispatch_reads_the_eligible_index(backend: SQLiteBackend) -> None:
    steps = plan(backend._store.conn, Q["tenant_pick"], {"queue": "q"})
    assert any("INDEX tenants_eligible (queue=?" in s for s in steps), steps
    steps = plan(backend._store.conn, Q["tenant_head"], {"tenant_id": 1})
    assert any("INDEX jobs_ready (tenant_id=?)" in s for s in steps), steps


def test_rate_limits_end_through_the_limited_index(backend: SQLiteBackend) -> None:
    db = backend._store.conn
    steps = plan(db, Q["tenants_unlimit"], {"queue": "q", "now": 1.0})
    assert any("INDEX tenants_limited (queue=? AND limited_until" in s for s in steps), steps
    steps = plan(db, Q["next_limited"], {"queue": "q"})
    assert any("INDEX tenants_limited (queue=?" in s for s in steps), steps


def test_throttle_windows_are_read_and_pruned_through_indexes(backend: SQLiteBackend) -> None:
    db = backend._store.conn
    steps = plan(db, Q["throttle_window"], {"name": "n", "tenant": "t"})
    assert any("INDEX throttle_times_key (name=? AND tenant=?)" in s for s in steps), steps
    steps = plan(db, Q["throttle_prune"], {"now": 1.0})
    assert any("INDEX throttle_times_expiry (expires_at<?)" in s for s in steps), steps


def test_slots_are_counted_and_pruned_through_indexes(backend: SQLiteBackend) -> None:
    db = backend._store.conn
    steps = plan(db, Q["slots_held"], {"queue": "q", "tenant": "t"})
    assert any("INDEX slots_place (queue=? AND tenant=?)" in s for s in steps), steps
    steps = plan(db, Q["slots_prune"], {"now": 1.0})
    assert any("INDEX slots_deadline (deadline<?)" in s for s in steps), steps


def test_traced_hot_path_statements_use_indexes(backend: SQLiteBackend) -> None:
    """Run every hot operation once with tracing on, then plan each statement it executed."""
    statements: list[str] = []
    db = backend._store.conn
    db.set_trace_callback(statements.append)
    try:
        run_hot_paths(backend)
    finally:
        db.set_trace_callback(None)
    planned = [s for s in statements if re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE)", s, re.I)]
    assert len(planned) > 20
    for sql in set(planned):
        assert_indexed(plan(db, sql), sql)


def run_hot_paths(backend: SQLiteBackend) -> None:
    """Every hot event, with a rate limit (limited tenants, un-limiting), heartbeats that
    charge, throttle rules (recording, trimming, re-spanning, pruning), and the relay's
    unclaimed leases (held, claimed, learned from, lapsed)."""
    backend.set_queue(
        SetQueueParams(
            settings=QueueSettings(
                queue="default", rate=Rate(2, 10.0, burst=2), half_life=30.0, max_in_flight=50
            ),
            now=0.0,
        )
    )
    rules = (Throttle(1, 5.0, "slow"), Throttle(2, 60.0, "slower"))
    jobs = [new_job(f"j{i}", f"t{i % 3}") for i in range(6)]
    jobs += [replace(new_job(f"th{i}", "t9"), throttle=rules) for i in range(3)]
    jobs.append(new_job("later", "t0", run_at=5.0))
    assert backend.enqueue(EnqueueParams(jobs=jobs, now=0.0)).queues[-4:] == [
        "default",
        "slow",
        "slower",
        "default",
    ]
    wider = (Throttle(1, 90.0, "slow"),)
    backend.enqueue(EnqueueParams(jobs=[replace(new_job("w", "t9"), throttle=wider)], now=1.0))
    taken = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=5)
    ).leases
    assert [lease.job_id for lease in taken] == ["j0", "j1", "j2", "th0", "j3"]
    assert backend.stats(StatsParams(queue="default", tenant="t0"))[0].limited_until == 6.0
    backend.ack_many(AckManyParams(tokens=[taken[0].token], now=2.0))
    backend.fail(FailParams(token=taken[1].token, now=2.0, error="boom", retry_at=3.0))
    backend.release(ReleaseParams(token=taken[2].token, now=2.0))
    backend.heartbeat(HeartbeatParams(tokens=[taken[3].token, "nope:1"], now=2.0))
    backend.heartbeat(HeartbeatParams(tokens=[taken[3].token], now=8.0))
    backend.maintain(MaintainParams(now=10.0, queues=["default"], retention=1.0))
    backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=40.0, limit=2))
    backend.maintain(MaintainParams(now=100.0, queues=["default"]))
    backend.set_tenant(TenantSettingsParams(queue="default", tenant="t1", now=100.0, weight=2.0))
    tokens = [slot_token(backend, now=100.0), slot_token(backend, now=100.0)]
    fresh = slot_token(backend, now=106.0)  # the two before have expired: dropped first
    backend.renew_slots(RenewSlotsParams(tokens=[fresh, *tokens], now=107.0))
    backend.release_slots(ReleaseSlotsParams(tokens=[fresh], now=108.0))
    slot_token(backend, now=108.0)
    backend.maintain(MaintainParams(now=200.0, queues=["default"]))
    relayed = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="relay", now=300.0, limit=2, hold=5.0)
    ).leases
    assert len(relayed) == 2
    tokens = [lease.token for lease in relayed]
    backend.heartbeat(HeartbeatParams(tokens=tokens, now=301.0, hold=5.0))
    backend.heartbeat(HeartbeatParams(tokens=tokens[:1], now=302.0, claim=True))
    backend.ack_many(AckManyParams(tokens=tokens[:1], now=303.0))  # a sample: learned
    assert backend.maintain(MaintainParams(now=306.0, queues=["default"])).expired  # unclaimed


def slot_token(backend: SQLiteBackend, now: float) -> str:
    params = AcquireSlotParams(queue="default", tenant="t1", holder="w", lease=5.0, now=now)
    token = backend.acquire_slot(params).token
    assert token is not None
    return token
