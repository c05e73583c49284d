"""Plans a worker made while its queue was empty still read by key once the queue is flooded.

The hot functions' statements are planned once per connection (generic plans, kept for its
life) from the statistics of that moment. On tables of a page or two, reading a whole index
or table costs what one key lookup does, and a plan that does so would read every queued job
on each dispatch once a flood arrives (schema 11). Counted in buffers read per statement
(auto_explain with BUFFERS), not in time.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from fairq.backends.postgres.keys import channel_salt, schema_seed
from fairq.contract import EnqueueParams
from fairq.job import NewJob

from ._store import DisposableBackend, server_url
from .test_dead_entries import AUTO_EXPLAIN

FLOOD = 20_000
TENANTS = 10
# A statement that reads by key touches about a dozen pages per row it writes (the row and its
# index entries: about 120 for the 10 tenant rows of an UPDATE); reading the flood's ready jobs
# or the jobs table is hundreds to thousands (18,130 for the picks before schema 11).
MAX_BUFFERS = 200


def _job(n: int) -> NewJob:
    return NewJob(
        id=f"j{n}", name="task", queue="default", tenant=f"t{n % TENANTS}", payload="{}",
        priority=0, run_at=0.0, max_attempts=1, lease_timeout=600.0, cost=1.0,
    )  # fmt: skip


def _call(
    backend: DisposableBackend,
    conn: psycopg.Connection[Any],
    name: str,
    rows: list[Any],
    limit: int = 10,
) -> list[Any]:
    """``dequeue`` or ``ack_and_dequeue`` (of the leases in ``rows``) of up to ``limit`` jobs."""
    args: dict[str, Any] = {
        "queues": ["default"], "seed": schema_seed(backend.schema), "worker": "w",
        "now": 1.0, "limit": limit, "ids": [r["l_id"] for r in rows],
        "leases": [r["l_leases"] for r in rows], "ack_now": 1.0,
        "salt": channel_salt(backend.schema),
    }  # fmt: skip
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return [row for row in cur.execute(backend.q[name], args).fetchall() if row["l_id"]]


def test_plans_made_on_an_empty_queue_read_by_key_after_a_flood(
    pg: DisposableBackend,
) -> None:
    with psycopg.connect(server_url(), autocommit=True) as conn:
        for table in ("jobs", "tenants"):  # no ANALYZE may replan the statements meanwhile
            conn.execute(f'ALTER TABLE "{pg.schema}".{table} SET (autovacuum_enabled = false)')
    pg.enqueue(EnqueueParams(jobs=[_job(n) for n in range(TENANTS)], now=0.0))
    with psycopg.connect(server_url(), autocommit=True) as worker:
        # the worker's first calls plan every statement of both on the near-empty tables
        _call(pg, worker, "ack_and_dequeue", _call(pg, worker, "dequeue", [], 1), 1)
        for start in range(TENANTS, FLOOD, 1_000):
            jobs = [_job(n) for n in range(start, min(FLOOD, start + 1_000))]
            pg.enqueue(EnqueueParams(jobs=jobs, now=0.0))
        leases = _call(pg, worker, "dequeue", [])
        plans: list[str] = []
        worker.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
        for setting in AUTO_EXPLAIN:
            worker.execute(setting)
        assert len(_call(pg, worker, "ack_and_dequeue", leases)) == 10
    read = {
        plan["Query Text"]: int(plan["Plan"]["Shared Hit Blocks"])
        + int(plan["Plan"]["Shared Read Blocks"])
        for message in plans
        if (text := message.split("plan:", 1)[-1].strip()).startswith("{")
        and (plan := json.loads(text))
    }
    # each statement on its own: not the calls whose counts hold their functions' statements
    calls = ("ack_dequeue(", "dispatch(", "lock_ack_dequeue(")
    nested = {text: n for text, n in read.items() if not any(c in text for c in calls)}
    assert any("ORDER BY x.start_tag, x.head_seq" in text for text in nested)  # the picks
    assert any("WITH started AS" in text for text in nested)  # the leases
    assert max(nested.values()) <= MAX_BUFFERS, json.dumps(nested, indent=1)
