"""fairq on PostgreSQL: what one job costs the server, measured so a busy machine barely moves it.

One process enqueues N jobs over T tenants, then drains them the way a worker's fast path does
(``dequeue(limit=L)`` then ``ack_many`` of those leases), each call under
``EXPLAIN (ANALYZE, WAL, BUFFERS)``: the server's execution time, WAL records, full-page images
and bytes, and buffers dirtied are those of the call itself, not of other sessions. Rows
inserted, updated (HOT or not) and deleted come from pg_stat_user_tables of the schema; time
per server-side function from pg_stat_user_functions (the database gets track_functions = all).
Commit records (one per call) and the client are not included. ``--combined`` drains with
``ack_and_dequeue`` instead (the server-side ``ack_dequeue``: each call acks the leases of the
call before and hands out the next ones), the worker's busy path since schema 9. ``--cpu``
drains with plain calls (no EXPLAIN) and reports the CPU time of the server process serving
them (read from /proc, so the server must be local): parsing, planning, execution and commit,
per job.

Run: .venv/bin/python benchmarks/postgres_job_cost.py --url postgresql://postgres@127.0.0.1:5432/perf_pg
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from fairq.backends.postgres import PostgresBackend
from fairq.backends.postgres.keys import channel_salt, schema_seed
from fairq.contract import EnqueueParams
from fairq.job import NewJob

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/perf_pg"
TABLES = "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables WHERE schemaname = %s"  # noqa: E501
FUNCTIONS = "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions WHERE schemaname = %s"  # noqa: E501


def noop(tenant: str, now: float) -> NewJob:
    return NewJob(
        id=uuid.uuid4().hex, name="noop", queue="default", tenant=tenant, payload="[]",
        run_at=now, max_attempts=3, lease_timeout=60.0, cost=1.0,
    )  # fmt: skip


def enqueue(url: str, schema: str, jobs: int, tenants: int) -> None:
    backend = PostgresBackend(url, schema=schema)
    now = time.time()
    try:
        for start in range(0, jobs, 1000):
            batch = [
                noop(f"tenant-{n % tenants}", now) for n in range(start, min(jobs, start + 1000))
            ]
            backend.enqueue(EnqueueParams(jobs=batch, now=now))
    finally:
        backend.close()


def explain(conn: psycopg.Connection[Any], query: sql.Composed, params: dict[str, Any]) -> Any:
    head = sql.SQL("EXPLAIN (ANALYZE, WAL, BUFFERS, VERBOSE, FORMAT JSON) ")
    ((plan,),) = conn.execute(head + query, params).fetchall()
    return plan[0]


def drain(url: str, schema: str, limit: int) -> tuple[Counter[str], int, int]:
    """Drain the queue; the summed EXPLAIN figures, the number of jobs and of calls."""
    ident = sql.Identifier(schema)
    dequeue = sql.SQL(
        "SELECT * FROM {}.dequeue(%(queues)s, %(seed)s, 'bench', %(now)s, %(limit)s)"
    ).format(ident)
    ack_many = sql.SQL(
        "SELECT * FROM {}.ack_many(%(ids)s, %(leases)s, %(now)s, %(seed)s, %(salt)s)"
    ).format(ident)
    totals: Counter[str] = Counter()
    jobs = calls = 0
    seed, salt = schema_seed(schema), channel_salt(schema)
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            args = {"queues": ["default"], "seed": seed, "now": time.time(), "limit": limit}
            plan = explain(conn, dequeue, args)
            add(totals, "dequeue", plan)
            leases = taken(conn, schema)
            if not leases:
                break
            acks = {"ids": [i for i, _ in leases], "leases": [n for _, n in leases]}
            plan = explain(conn, ack_many, {**acks, "now": time.time(), "seed": seed, "salt": salt})
            add(totals, "ack_many", plan)
            jobs += len(leases)
            calls += 2
    return totals, jobs, calls


def drain_combined(url: str, schema: str, limit: int) -> tuple[Counter[str], int, int]:
    """As ``drain``, with one ``ack_dequeue`` per batch: it acks the batch before."""
    call = sql.SQL(
        "SELECT * FROM {}.ack_dequeue(%(ids)s, %(leases)s, %(now)s, %(queues)s, 'bench', "
        "%(now)s, %(limit)s, %(seed)s, %(salt)s)"
    ).format(sql.Identifier(schema))
    totals: Counter[str] = Counter()
    jobs = calls = 0
    fixed = {"queues": ["default"], "limit": limit, "seed": schema_seed(schema),
             "salt": channel_salt(schema)}  # fmt: skip
    leases: list[tuple[str, int]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            acks = {"ids": [i for i, _ in leases], "leases": [n for _, n in leases]}
            plan = explain(conn, call, {**fixed, **acks, "now": time.time()})
            add(totals, "ack_dequeue", plan)
            jobs += len(leases)
            calls += 1
            leases = taken(conn, schema)
            if not leases:
                break
    return totals, jobs, calls


def drain_cpu(url: str, schema: str, limit: int, combined: bool) -> tuple[float, int, int]:
    """Drain with plain calls, leases read from their results; the serving process's CPU
    seconds (utime + stime), the number of jobs and of calls."""
    with psycopg.connect(url, autocommit=True) as conn:
        pid = conn.info.backend_pid
        cpu0 = process_cpu(pid)
        jobs, calls = drain_plain(conn, schema, limit, combined)
        cpu = process_cpu(pid) - cpu0
    return cpu, jobs, calls


def drain_plain(
    conn: psycopg.Connection[Any], schema: str, limit: int, combined: bool
) -> tuple[int, int]:
    """Drain on ``conn`` as a busy worker does: ``dequeue`` and ``ack_many`` of the batch
    before, or one ``ack_dequeue`` for both when ``combined``; the jobs and calls made."""
    ident = sql.Identifier(schema)
    dequeue = sql.SQL(
        "SELECT * FROM {}.dequeue(%(queues)s, %(seed)s, 'bench', %(now)s, %(limit)s)"
    ).format(ident)
    ack_many = sql.SQL(
        "SELECT * FROM {}.ack_many(%(ids)s, %(leases)s, %(now)s, %(seed)s, %(salt)s)"
    ).format(ident)
    both = sql.SQL(
        "SELECT * FROM {}.ack_dequeue(%(ids)s, %(leases)s, %(now)s, %(queues)s, 'bench', "
        "%(now)s, %(limit)s, %(seed)s, %(salt)s)"
    ).format(ident)
    fixed = {"queues": ["default"], "limit": limit, "seed": schema_seed(schema),
             "salt": channel_salt(schema)}  # fmt: skip
    jobs = calls = 0
    leases: list[tuple[str, int]] = []
    while True:
        acks = {"ids": [i for i, _ in leases], "leases": [n for _, n in leases]}
        args = {**fixed, **acks, "now": time.time()}
        if combined:
            statuses, *rows = conn.execute(both, args).fetchall()
            due = statuses[1]
            calls += 1
        else:
            if leases:
                conn.execute(ack_many, args).fetchall()
                calls += 1
            rows = conn.execute(dequeue, args).fetchall()
            due = any(row[0] for row in rows)
            calls += 1
        assert not due, "maintenance due: not a busy drain"
        jobs += len(leases)
        leases = [(row[-14], row[-8]) for row in rows]  # l_id, l_leases (dispatch.sql)
        if not leases:
            return jobs, calls


def process_cpu(pid: int) -> float:
    """utime + stime of one local process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def taken(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, int]]:
    """The leases the last dequeue handed out (EXPLAIN discards a function's result rows)."""
    query = sql.SQL("SELECT id, leases FROM {}.jobs WHERE state = 'running'").format(
        sql.Identifier(schema)
    )
    return [(row[0], row[1]) for row in conn.execute(query).fetchall()]


def add(totals: Counter[str], call: str, plan: dict[str, Any]) -> None:
    top = plan["Plan"]
    totals[f"{call} ms"] += plan["Execution Time"]
    for key in ("WAL Records", "WAL FPI", "WAL Bytes", "Shared Dirtied Blocks",
                "Shared Hit Blocks", "Shared Written Blocks"):  # fmt: skip
        totals[f"{call} {key}"] += top.get(key, 0)


def snapshot(url: str, query: str, schema: str) -> dict[str, tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute(query, (schema,)).fetchall()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("FAIRQ_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--limit", type=int, default=4, help="jobs per dequeue and per ack_many")
    parser.add_argument(
        "--combined", action="store_true", help="drain with ack_and_dequeue (one call per batch)"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="plain calls; the serving process's CPU per job"
    )
    args = parser.parse_args()
    dbname = psycopg.conninfo.conninfo_to_dict(args.url)["dbname"]
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'all'").format(
            sql.Identifier(str(dbname))))  # fmt: skip
    schema = f"fq_cost_{uuid.uuid4().hex[:8]}"
    try:
        enqueue(args.url, schema, args.jobs, args.tenants)
        if args.cpu:
            cpu, jobs, calls = drain_cpu(args.url, schema, args.limit, args.combined)
            print(f"{jobs} jobs, {calls} calls, combined={args.combined}, limit {args.limit}: "
                  f"server CPU {cpu * 1e6 / jobs:.1f} µs per job")  # fmt: skip
            return
        time.sleep(0.6)  # let the enqueue's table statistics reach the shared counters
        tables0 = snapshot(args.url, TABLES, schema)
        funcs0 = snapshot(args.url, FUNCTIONS, schema)
        totals, jobs, calls = (drain_combined if args.combined else drain)(
            args.url, schema, args.limit
        )
        time.sleep(0.6)
        tables1 = snapshot(args.url, TABLES, schema)
        funcs1 = snapshot(args.url, FUNCTIONS, schema)
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    calls_made = "ack_and_dequeue" if args.combined else "dequeue/ack_many"
    print(f"{jobs} jobs, {args.tenants} tenants, {calls_made} of {args.limit}; per job:")
    for key in sorted(totals):
        print(f"  {key:32} {totals[key] / jobs:10.3f}")
    for call in ("ack_dequeue",) if args.combined else ("dequeue", "ack_many"):
        total = totals[f"{call} ms"] + 0.0
        print(f"  {call + ' µs (server)':32} {total * 1000 / jobs:10.1f}")
    print("  rows per job (pg_stat_user_tables: ins, upd, hot_upd, del):")
    for name in sorted(tables1):
        before = tables0.get(name, (0, 0, 0, 0))
        delta = [(b - a) / jobs for a, b in zip(before, tables1[name], strict=True)]
        if any(delta):
            print(f"    {name:18} " + "  ".join(f"{d:6.2f}" for d in delta))
    print("  server functions per job (calls, total µs, self µs):")
    for name in sorted(funcs1):
        c0, t0, s0 = funcs0.get(name, (0, 0.0, 0.0))
        c1, t1, s1 = funcs1[name]
        print(f"    {name:18} {(c1 - c0) / jobs:6.2f} {(t1 - t0) * 1000 / jobs:8.1f} "
              f"{(s1 - s0) * 1000 / jobs:8.1f}")  # fmt: skip
    print(json.dumps({"jobs": jobs, "calls": calls}))


if __name__ == "__main__":
    main()
