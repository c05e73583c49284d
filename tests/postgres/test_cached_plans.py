"""Plans a worker made while its queue was empty still read by key once the queue is flooded.

The hot functions' statements are planned once per connection (generic plans, kept for its
life) from the statistics of that moment. On tables of a page or two, reading a whole index
or table costs what one key lookup does, and a plan that does so would read every queued job
on each dispatch once a flood arrives (schema 11), or every running job on each ack once many
workers hold leases (schema 13). Counted in buffers read per statement (auto_explain with
BUFFERS), not in time.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from fairq.backends.postgres.keys import channel_salt, schema_seed
from fairq.contract import EnqueueParams
from fairq.job import NewJob

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .test_dead_entries import AUTO_EXPLAIN

FLOOD = 20_000
TENANTS = 10
# A statement that reads by key touches about a dozen pages per row it writes (the row and its
# index entries: about 120 for the 10 tenant rows of an UPDATE); reading the flood's ready jobs
# or the jobs table is hundreds to thousands (18,130 for the picks before schema 11).
MAX_BUFFERS = 200
RUNNING = 5_000  # leases other workers hold


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
        "salt": channel_salt(backend.schema), "wait": False, "hold": None,
    }  # fmt: skip
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return [row for row in cur.execute(backend.q[name], args).fetchall() if row["l_id"]]


def _flood(backend: DisposableBackend, start: int) -> None:
    for first in range(start, FLOOD, 1_000):
        jobs = [_job(n) for n in range(first, min(FLOOD, first + 1_000))]
        backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))


def _ack_many(
    backend: DisposableBackend, conn: psycopg.Connection[Any], rows: list[Any]
) -> list[str]:
    args = {
        "ids": [r["l_id"] for r in rows], "leases": [r["l_leases"] for r in rows], "now": 1.0,
        "seed": schema_seed(backend.schema), "salt": channel_salt(backend.schema),
    }  # fmt: skip
    ((statuses,),) = conn.execute(backend.q["ack_many"], args).fetchall()
    return list(statuses)


def _explained(conn: psycopg.Connection[Any]) -> list[str]:
    """Turn on auto_explain for ``conn``; the plans it logs from then on."""
    plans: list[str] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    for setting in AUTO_EXPLAIN:
        conn.execute(setting)
    return plans


def _no_autovacuum(backend: DisposableBackend) -> None:
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as conn:
        for table in ("jobs", "tenants"):  # no ANALYZE may replan the statements meanwhile
            conn.execute(f'ALTER TABLE "{backend.schema}".{table} SET (autovacuum_enabled = false)')


def test_plans_made_on_an_empty_queue_read_by_key_after_a_flood(
    pg: DisposableBackend,
) -> None:
    _no_autovacuum(pg)
    pg.enqueue(EnqueueParams(jobs=[_job(n) for n in range(TENANTS)], now=0.0))
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as worker:
        # the worker's first calls plan every statement of both on the near-empty tables
        _call(pg, worker, "ack_and_dequeue", _call(pg, worker, "dequeue", [], 1), 1)
        _flood(pg, TENANTS)
        leases = _call(pg, worker, "dequeue", [])
        plans = _explained(worker)
        assert len(_call(pg, worker, "ack_and_dequeue", leases)) == 10
    _check_nested(plans)


def test_plans_first_made_by_a_slow_path_dispatch_read_by_key_after_a_flood(
    pg: DisposableBackend,
) -> None:
    """dequeue's slow path (maintenance was due) calls dispatch() from Python, outside the
    entry points' settings; plpgsql caches one plan per statement per session, whoever calls."""
    _no_autovacuum(pg)
    pg.enqueue(EnqueueParams(jobs=[_job(n) for n in range(TENANTS)], now=0.0))
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as worker:
        _call(pg, worker, "dispatch", [], 1)
        _flood(pg, TENANTS)
        plans = _explained(worker)
        assert len(_call(pg, worker, "ack_and_dequeue", [])) == 10
    _check_nested(plans)


@pytest.mark.alone  # another test process's open transactions keep dead entries readable
def test_acks_read_by_key_while_many_jobs_run(pg: DisposableBackend) -> None:
    """Other workers hold thousands of leases; a worker's acks (both ways a worker acks)
    still find its own jobs by key, however small the tables were when it planned them."""
    _no_autovacuum(pg)
    pg.enqueue(EnqueueParams(jobs=[_job(n) for n in range(TENANTS)], now=0.0))
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as worker:
        _call(pg, worker, "ack_and_dequeue", _call(pg, worker, "dequeue", [], 1), 1)
        assert _ack_many(pg, worker, _call(pg, worker, "dequeue", [], 1)) == ["ok"]
        _flood(pg, TENANTS)
        with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as others:
            held = sum(len(_call(pg, others, "dequeue", [], 50)) for _ in range(RUNNING // 50))
        assert held == RUNNING
        leases = _call(pg, worker, "dequeue", [])
        plans = _explained(worker)
        again = _call(pg, worker, "ack_and_dequeue", leases)
        assert _ack_many(pg, worker, again) == ["ok"] * 10
    _check_nested(plans)
    assert any("DELETE FROM" in text for text in _buffers(plans))  # the acks' moves


def test_a_worker_with_one_slot_runs_generic_plans(pg: DisposableBackend) -> None:
    """A worker with one slot makes one call per job. Left to choose, the plan cache makes a
    custom plan again on almost every call of a statement that takes arrays or a LIMIT from a
    variable, and at one job per call that planning was most of the server's work
    (benchmarks/postgres_callgrind.py --limit 1: 9.87 M instructions per job, 4.23 M with
    generic plans). A custom plan writes the call's values into its conditions (the queue's
    name as a literal); a generic plan, made once, its parameters."""
    pg.enqueue(EnqueueParams(jobs=[_job(n) for n in range(3 * TENANTS)], now=0.0))
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as worker:
        rows = _call(pg, worker, "dequeue", [], 1)
        for _ in range(8):  # past the five custom plans the cache always makes first
            rows = _call(pg, worker, "ack_and_dequeue", rows, 1)
        plans = _explained(worker)
        assert len(_call(pg, worker, "ack_and_dequeue", rows, 1)) == 1
    read = _buffers(plans)
    assert any("ORDER BY e.start_tag, e.head_seq" in text for text in read)  # the picks
    custom = [
        json.loads(text)["Query Text"]
        for message in plans
        if (text := message.split("plan:", 1)[-1].strip()).startswith("{")
        and "'default'::text" in text
    ]
    assert custom == [], "\n\n".join(custom)


def _buffers(plans: list[str]) -> dict[str, int]:
    """The most shared buffers a run of each statement read (its nested statements
    included), by statement text."""
    read: dict[str, int] = {}
    for message in plans:
        if (text := message.split("plan:", 1)[-1].strip()).startswith("{"):
            plan = json.loads(text)
            used = _read(plan["Plan"])
            read[plan["Query Text"]] = max(used, read.get(plan["Query Text"], 0))
    return read


def _read(node: dict[str, Any]) -> int:
    """The buffers a plan node read; of an UPDATE, those of the rows it found, not of the
    index entries its new row versions add (the same for every plan, and with autovacuum off
    as here, a walk past the dead entries of thousands of earlier versions of the 10 tenant
    rows: 236 to 2,584 buffers once in a few runs, under custom plans as under generic ones)."""
    if node["Node Type"] == "ModifyTable":
        return sum(_read(child) for child in node.get("Plans", []))
    return int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"])


def _check_nested(plans: list[str]) -> None:
    read = _buffers(plans)
    # each statement on its own: not the calls whose counts hold their functions' statements
    calls = (
        "ack_dequeue(", "dispatch(", "ack_many(", "ack_held(", "succeeded_runs(", "move_acked(",
        "dispatch_queue(", "lock_candidates(", "take_picks(", "write_round(", "start_picks(",
        "write_tenants(", "runs_freed(",
    )  # fmt: skip
    nested = {text: n for text, n in read.items() if not any(c in text for c in calls)}
    assert any("ORDER BY e.start_tag, e.head_seq" in text for text in nested)  # the picks
    assert any("WITH started AS" in text for text in nested)  # the leases
    assert max(nested.values()) <= MAX_BUFFERS, json.dumps(nested, indent=1)
