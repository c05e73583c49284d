"""A dequeue costs the same after thousands of jobs as at the start, before any vacuum.

A job handed out leaves its entry in the partial index jobs_ready until vacuum removes it, and
every such entry sorts before the tenant's current head. Finding the next head from the start
of the tenant's range walked over all of them; the server-side dispatch starts from the job it
hands out. Likewise an acked job leaves its entry in jobs_running, before those of the jobs
still running: the "is maintenance due" check reads that index only up to now. Counted in
buffers read (auto_explain with BUFFERS), not in time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from fairq.backends.postgres.keys import schema_seed
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams
from fairq.job import NewJob

from ._store import CALLER_CLOCK, DisposableBackend, server_url

JOBS = 3_000
HANDED_OUT = 2_000
AUTO_EXPLAIN = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_buffers = on",
    "SET auto_explain.log_timing = off",
    "SET auto_explain.log_nested_statements = on",
    "SET auto_explain.log_format = 'json'",
    "SET client_min_messages = 'log'",
)


def _job(n: int) -> NewJob:
    return NewJob(
        id=f"j{n}", name="task", queue="default", tenant="one", payload="{}",
        priority=0, run_at=0.0, max_attempts=1, lease_timeout=600.0, cost=1.0,
    )  # fmt: skip


def _statement_buffers(
    backend: DisposableBackend, conn: psycopg.Connection[Any], marker: str, now: float = 1.0
) -> int:
    """Shared buffers read by the one statement of a dequeue of one job whose text holds
    ``marker`` (nested statements included), from auto_explain; rolled back, so nothing
    changes."""
    plans: list[Any] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary))
    args: dict[str, Any] = {
        "queues": ["default"], "seed": schema_seed(backend.schema), "worker": "w",
        "now": now, "limit": 1, "wait": False, "hold": None,
    }  # fmt: skip
    with conn.transaction(force_rollback=True):
        conn.execute(backend.q["dequeue"], args).fetchall()
    found = [
        json.loads(text)
        for message in plans
        if (text := (message or "").split("plan:", 1)[-1].strip()).startswith("{")
    ]
    (plan,) = [plan for plan in found if marker in plan["Query Text"]]
    return int(plan["Plan"]["Shared Hit Blocks"]) + int(plan["Plan"]["Shared Read Blocks"])


def _head_lookup_buffers(backend: DisposableBackend, conn: psycopg.Connection[Any]) -> int:
    """dispatch's lookup of the next head (since schema 8 its own statement, before the
    tenant is written; dispatch.sql: next_head, inlined into take_picks' statement)."""
    return _statement_buffers(backend, conn, "next_head(p_queue")


def _due_check_buffers(backend: DisposableBackend, conn: psycopg.Connection[Any]) -> int:
    """The "is maintenance due" check, at a time before any lease here ends."""
    return _statement_buffers(backend, conn, "j.state = 'running'", now=3.0)


@pytest.mark.parametrize(
    "measure", [_head_lookup_buffers, _due_check_buffers], ids=["next head", "maintenance due"]
)
def test_a_dequeue_does_not_walk_the_entries_of_jobs_already_handed_out(
    pg: DisposableBackend, measure: Callable[[DisposableBackend, psycopg.Connection[Any]], int]
) -> None:
    """Before the fixes, both read one more leaf page per ~200 jobs handed out and acked
    (about 10 here): the next head from the tenant's first entry of jobs_ready, the lease
    test from the queue's first entry of jobs_running (looking each entry not yet marked
    dead up in jobs). The leases, of 600 s, do not end during the test."""
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as conn:
        for table in ("jobs", "tenants"):  # keep every dead entry for the whole test
            conn.execute(f'ALTER TABLE "{pg.schema}".{table} SET (autovacuum_enabled = false)')
    for start in range(0, JOBS, 500):
        jobs = [_job(n) for n in range(start, start + 500)]
        pg.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as conn:
        for setting in AUTO_EXPLAIN:
            conn.execute(setting)
        fresh = measure(pg, conn)
        for _ in range(0, HANDED_OUT, 100):
            params = DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=100)
            tokens = [lease.token for lease in pg.dequeue(params).leases]
            pg.ack_many(AckManyParams(tokens=tokens, now=2.0))
        measure(pg, conn)  # the first visit marks the dead entries dead
        after = measure(pg, conn)
    assert after <= fresh + 2, (fresh, after)
