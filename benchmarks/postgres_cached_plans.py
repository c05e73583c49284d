"""fairq on PostgreSQL: does a worker that started beside an empty queue keep up with a flood?

A worker's connection plans the hot functions' statements once and keeps the plans. This
starts a "worker" connection on a queue of 10 jobs (its calls plan everything there), floods
the queue with --jobs more over 10 tenants from another connection, then times dequeue +
ack_many of 10 on the old connection and on a new one. Before schema 11 the old connection's
plans read the whole flood on every call. Autovacuum's ANALYZE would replan them, so the
script turns it off for its tables. With --running N, another connection then takes N leases
(other workers' jobs, running) and the worker's busy path is timed, ack_and_dequeue of 10:
before schema 13 its acks read every running job of the queue.

    .venv/bin/python benchmarks/postgres_cached_plans.py --jobs 50000 --running 5000
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import psycopg

from fairq.backends.postgres import PostgresBackend
from fairq.contract import AckAndDequeueParams, AckManyParams, DequeueParams, EnqueueParams
from fairq.job import NewJob

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/perf_pg"
SCHEMA = "fq_cached_plans"
CALLS = 20


def job(tenant: str) -> NewJob:
    return NewJob(
        id=uuid.uuid4().hex, name="noop", queue="default", tenant=tenant, payload="[]",
        run_at=0.0, max_attempts=3, lease_timeout=600.0, cost=1.0,
    )  # fmt: skip


def call_ms(backend: PostgresBackend, calls: int, limit: int = 10) -> float:
    """Mean milliseconds of a dequeue of ``limit`` plus the ack_many of what it took."""
    started = time.perf_counter()
    for _ in range(calls):
        params = DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=limit)
        leases = backend.dequeue(params).leases
        backend.ack_many(AckManyParams(tokens=[lease.token for lease in leases], now=1.0))
    return (time.perf_counter() - started) / calls * 1000


def busy_ms(backend: PostgresBackend, calls: int, limit: int = 10) -> float:
    """Mean milliseconds of an ack_and_dequeue of ``limit`` (the acks of the call before)."""
    params = DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=limit)
    leases = backend.dequeue(params).leases
    started = time.perf_counter()
    for _ in range(calls):
        acks = AckManyParams(tokens=[lease.token for lease in leases], now=1.0)
        _, leases = backend.ack_and_dequeue(AckAndDequeueParams(acks=acks, dequeue=params))
    elapsed = time.perf_counter() - started
    backend.ack_many(AckManyParams(tokens=[lease.token for lease in leases], now=1.0))
    return elapsed / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("FAIRQ_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--running", type=int, default=0, help="leases held by another worker")
    args = parser.parse_args()
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    producer = PostgresBackend(args.url, schema=SCHEMA)
    worker = PostgresBackend(args.url, schema=SCHEMA)
    try:
        with psycopg.connect(args.url, autocommit=True) as conn:
            for table in ("jobs", "tenants", "succeeded_jobs"):
                conn.execute(f"ALTER TABLE {SCHEMA}.{table} SET (autovacuum_enabled = false)")
        producer.enqueue(EnqueueParams(jobs=[job(f"t{n}") for n in range(10)], now=0.0))
        print(f"worker, queue of 10 jobs:  {call_ms(worker, 5, limit=1):6.2f} ms a call")
        for start in range(0, args.jobs, 1000):
            batch = [job(f"t{n % 10}") for n in range(start, min(args.jobs, start + 1000))]
            producer.enqueue(EnqueueParams(jobs=batch, now=0.0))
        print(f"same worker, after {args.jobs:,}: {call_ms(worker, CALLS):6.2f} ms a call")
        fresh = PostgresBackend(args.url, schema=SCHEMA)
        try:
            print(f"new worker, after {args.jobs:,}:  {call_ms(fresh, CALLS):6.2f} ms a call")
        finally:
            fresh.close()
        if args.running:
            print(f"same worker, ack_and_dequeue:  {busy_ms(worker, CALLS):6.2f} ms a call")
            others = PostgresBackend(args.url, schema=SCHEMA)
            try:
                params = DequeueParams(queues=["default"], worker_id="o", now=1.0, limit=100)
                held = sum(len(others.dequeue(params).leases) for _ in range(args.running // 100))
            finally:
                others.close()
            print(f"  with {held:,} leases held elsewhere: {busy_ms(worker, CALLS):6.2f} ms a call")
    finally:
        worker.close()
        producer.close()
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


if __name__ == "__main__":
    main()
