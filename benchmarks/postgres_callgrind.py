"""Instructions PostgreSQL executes per job for fairq and pgqueuer: a repeatable cost figure.

Seconds of server CPU swing by ±30 % on a shared 2-core machine; instructions counted by
callgrind do not (the same drain twice gives the same count within 0.2 %). Run a private
PostgreSQL under callgrind, every backend it forks traced into its own file, then this script:

    initdb -D /tmp/fq-pgcg/data -A trust -U postgres          # as the postgres OS user
    valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/tmp/fq-pgcg/cg.%p \\
        /usr/lib/postgresql/15/bin/postgres -D /tmp/fq-pgcg/data -p 5499 -k /tmp/fq-pgcg \\
        -c listen_addresses=127.0.0.1 -c autovacuum=off &
    benchmarks/peers_pg/.venv/bin/python benchmarks/postgres_callgrind.py \\
        --url postgresql://postgres@127.0.0.1:5499/postgres --out /tmp/fq-pgcg

A backend writes its file when it exits. Each system drains N and then 2N no-op jobs, each
drain on connections of its own; the difference of the two totals over N is the cost of one
more job, without connecting, planning and other fixed costs. fairq: one connection calls
``ack_dequeue`` as a busy worker does (the acks of the batch before, the next batch of
``--limit``), 10 tenants. pgqueuer (where installed): its worker, batch size ``--limit``,
every backend it opened during the drain counted. Both run against fresh schemas. --enqueue:
fairq only, single-job ``enqueue()`` calls on one connection (N, then 2N) instead of the drains:
an enqueue's cost per call. --hook FILE
runs an SQL file on fairq's schema after its migrations (``{schema}`` in it is replaced): a
way to price a part of the hot path by removing or doubling it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import postgres_job_cost as job_cost
import postgres_throughput as throughput
import psycopg
from psycopg import sql

from fairq.backends.postgres import PostgresBackend
from fairq.backends.postgres.producing import arguments as enqueue_arguments
from fairq.backends.postgres.sql import queries_for
from fairq.job import NewJob

TENANTS = 10


def instructions(out: str, pid: int) -> int:
    """The total a traced backend wrote when it exited (waits for the file)."""
    path = Path(out) / f"cg.{pid}"
    for _ in range(300):
        if path.exists() and (
            found := re.search(r"^(?:totals|summary):\s+(\d+)", path.read_text(), re.M)
        ):
            return int(found.group(1))
        time.sleep(0.1)
    raise RuntimeError(
        f"{path}: no callgrind totals; is the server at --url running under "
        f"callgrind, writing to --out as the docstring says?"
    )


def fairq_drain(url: str, out: str, jobs: int, limit: int, hook: str | None = None) -> int:
    """Instructions of one connection draining ``jobs`` jobs with ack_dequeue."""
    schema = f"fq_cg_{uuid.uuid4().hex[:8]}"
    job_cost.enqueue(url, schema, jobs, TENANTS)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if hook:
                conn.execute(Path(hook).read_text().replace("{schema}", f'"{schema}"').encode())
            pid = conn.info.backend_pid
            done, _ = job_cost.drain_plain(conn, schema, limit, combined=True)
        assert done == jobs, (done, jobs)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return instructions(out, pid)


def fairq_enqueues(url: str, out: str, jobs: int, limit: int) -> int:
    """Instructions of one connection making ``jobs`` single-job enqueue() calls (``limit``
    is the drains' and not used)."""
    schema = f"fq_cg_{uuid.uuid4().hex[:8]}"
    PostgresBackend(url, schema=schema).close()  # migrated, its queries read
    statement = queries_for(schema)["enqueue"]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            pid = conn.info.backend_pid
            for n in range(jobs):
                job = NewJob(
                    id=f"j{n}", name="task", queue="default", tenant=f"t{n % TENANTS}",
                    payload="{}", priority=0, run_at=0.0, max_attempts=3, lease_timeout=60.0,
                    cost=1.0,
                )  # fmt: skip
                conn.execute(statement, enqueue_arguments([job], 1.0, schema=schema))
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return instructions(out, pid)


def pgqueuer_drain(url: str, out: str, jobs: int, limit: int) -> int:
    """Instructions of every backend pgqueuer's worker opened while draining ``jobs``."""
    database = f"pgq_cg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    dsn = str(urlsplit(url)._replace(path=f"/{database}").geturl())
    throughput.pgqueuer_install(dsn)
    throughput.pgqueuer_enqueue(dsn, jobs, TENANTS)
    pids: set[int] = set()
    with psycopg.connect(dsn, autocommit=True) as watch:
        mine = watch.info.backend_pid
        worker = subprocess.Popen(
            throughput.pgqueuer_workers(argparse.Namespace(concurrency=limit), 0),
            env=throughput.env(dsn), cwd=throughput.APPS,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            done = throughput.PGQUEUER_DONE % jobs
            while watch.execute(done).fetchone() != (jobs,):
                pids.update(_others(watch, database, mine))
                time.sleep(0.05)
            pids.update(_others(watch, database, mine))
        finally:
            worker.terminate()
            worker.wait(30)
    total = sum(instructions(out, pid) for pid in pids)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
    return total


def _others(conn: psycopg.Connection[tuple[int]], database: str, mine: int) -> set[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s", (database, mine)
    ).fetchall()
    return {row[0] for row in rows}


def per_job(drain: Callable[..., int], args: argparse.Namespace) -> float:
    """One more job's instructions: (drain of 2N - drain of N) / N."""
    small = drain(args.url, args.out, args.jobs, args.limit)
    large = drain(args.url, args.out, 2 * args.jobs, args.limit)
    return (large - small) / args.jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5499/postgres")
    parser.add_argument("--out", default="/tmp/fq-pgcg", help="callgrind's output folder")
    parser.add_argument("--jobs", type=int, default=1000, help="N: drains of N and 2N jobs")
    parser.add_argument("--limit", type=int, default=10, help="jobs per call / batch size")
    parser.add_argument("--systems", default="fairq,pgqueuer")
    parser.add_argument("--hook", help="an SQL file run on fairq's schema before its drains")
    parser.add_argument(
        "--enqueue", action="store_true", help="fairq's single-job enqueue() calls instead"
    )
    args = parser.parse_args()
    if args.enqueue:
        cost = per_job(fairq_enqueues, args)
        print(f"fairq     {cost:12,.0f} instructions per single-job enqueue() call")
        return
    drains = {"fairq": partial(fairq_drain, hook=args.hook), "pgqueuer": pgqueuer_drain}
    results = {name: per_job(drains[name], args) for name in args.systems.split(",")}
    base = results.get("fairq")
    for name, cost in results.items():
        ratio = f" ({cost / base:.2f}x fairq)" if base and name != "fairq" else ""
        print(f"{name:9} {cost:12,.0f} instructions per job, batches of {args.limit}{ratio}")


if __name__ == "__main__":
    main()
